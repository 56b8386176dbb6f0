"""The demo's clock: load a past event as if it happened then.

The demo tells a story over the last 90 days (rules set up, changes applied and rolled back,
requests decided). The services stamp rows with ``timezone.now()`` (``auto_now_add`` fields,
history dates), so while one past event is loaded the clock reads that moment. Only the demo
loaders use this, in a management command, one thread; nothing else sets the clock back.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from unittest import mock

from django.test.utils import override_settings
from django.utils import timezone


@contextmanager
def clock_at(moment: datetime) -> Iterator[None]:
    """While inside, ``django.utils.timezone.now()`` returns ``moment``."""
    with mock.patch.object(timezone, "now", return_value=moment):
        yield


@contextmanager
def mails_discarded() -> Iterator[None]:
    """Mails that the demo's past events would send are dropped, not printed or sent: their
    in-app notifications remain, and loading the demo prints no mail about its past."""
    with override_settings(EMAIL_BACKEND="django.core.mail.backends.dummy.EmailBackend"):
        yield
