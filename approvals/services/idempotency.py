"""``Idempotency-Key``: a retried API call with the same key files nothing new.

The key row is inserted *before* the call runs, in the call's transaction. A concurrent
retry's insert of the same (user, key) waits on the unique constraint until the first
transaction ends: when it commits, the retry finds the stored answer; when it fails (a
400, say), nothing was kept and the retry runs the call itself.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.models import IdempotencyKey
from governance.models import User

KEY_MAX_LENGTH = 255


class IdempotencyKeyReused(Exception):
    """The key was used before by this principal for another operation or body."""


@dataclass(frozen=True)
class IdempotentResponse:
    status: int
    body: Any
    replayed: bool


def idempotency_key_clean(key: str) -> str:
    """The key as given, or a ``ValidationError`` naming the header."""
    if not key or len(key) > KEY_MAX_LENGTH or not key.isascii() or not key.isprintable():
        raise ValidationError(
            {
                "Idempotency-Key": _("Give 1 to %(max)d printable ASCII characters, e.g. a UUID.")
                % {"max": KEY_MAX_LENGTH}
            }
        )
    return key


def request_fingerprint(*, operation: str, payload: Any) -> str:
    text = json.dumps(
        [operation, payload], sort_keys=True, separators=(",", ":"), cls=DjangoJSONEncoder
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _stored(row: IdempotencyKey, fingerprint: str) -> IdempotentResponse:
    if row.fingerprint != fingerprint or row.response_status is None:
        raise IdempotencyKeyReused
    return IdempotentResponse(status=row.response_status, body=row.response_body, replayed=True)


@transaction.atomic
def idempotent_call(
    *,
    user: User,
    key: str,
    operation: str,
    payload: Any,
    perform: Callable[[], tuple[int, Any]],
    now: datetime | None = None,
) -> IdempotentResponse:
    """Run ``perform`` once per (``user``, ``key``); later calls get its stored answer.

    ``perform`` returns the status and the JSON body of the answer and runs in this
    transaction, so an error it raises keeps nothing (the key may be used again).
    Raises ``IdempotencyKeyReused`` when the key was used with another operation or body.
    """
    key = idempotency_key_clean(key)
    now = now or timezone.now()
    fingerprint = request_fingerprint(operation=operation, payload=payload)
    IdempotencyKey.objects.filter(user=user, key=key, expires_at__lte=now).delete()
    existing = IdempotencyKey.objects.select_for_update().filter(user=user, key=key).first()
    if existing is not None:
        return _stored(existing, fingerprint)
    row = IdempotencyKey(
        user=user,
        key=key,
        operation=operation,
        fingerprint=fingerprint,
        created_at=now,
        expires_at=now + timedelta(hours=settings.ARBITER_IDEMPOTENCY_KEY_HOURS),
    )
    # The database's unique constraint decides between concurrent calls (not a SELECT).
    row.full_clean(validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        # Another call with this key committed first: answer as it did.
        return _stored(
            IdempotencyKey.objects.select_for_update().get(user=user, key=key), fingerprint
        )
    status, body = perform()
    row.response_status = status
    row.response_body = body
    row.full_clean(validate_unique=False, validate_constraints=False)
    row.save(update_fields=["response_status", "response_body"])
    return IdempotentResponse(status=status, body=body, replayed=False)


@transaction.atomic
def idempotency_keys_purge(*, now: datetime | None = None) -> int:
    """Delete expired keys (idempotent; a beat task runs it hourly)."""
    deleted, _rows = IdempotencyKey.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted
