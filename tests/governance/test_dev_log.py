"""``make run``'s log: a refused request is one line (no traceback); mails read as written."""

import logging
from io import StringIO

from django.core.mail import EmailMessage

from governance.toolkit.console import ClientErrorsWithoutTraceback, ReadableConsoleEmailBackend


def _logged(status_code: int) -> str:
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ClientErrorsWithoutTraceback())
    logger = logging.getLogger("tests.dev_log")
    logger.addHandler(handler)
    try:
        try:
            raise PermissionError("refused")
        except PermissionError:
            logger.warning("Request: /x/", exc_info=True, extra={"status_code": status_code})
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_refused_request_is_one_line_and_a_fault_keeps_its_traceback():
    assert _logged(403) == "Request: /x/\n"
    assert _logged(404) == "Request: /x/\n"
    assert "Traceback" in _logged(500)


def test_the_settings_filter_django_request(settings):
    assert "client_errors" in settings.LOGGING["handlers"]["console"]["filters"]
    assert settings.LOGGING["loggers"]["django"]["propagate"] is False


def test_the_console_mail_shows_the_subject_as_written():
    stream = StringIO()
    backend = ReadableConsoleEmailBackend(stream=stream)
    subject = "Change #3 approved · 变更 #3 已批准"
    backend.send_messages([EmailMessage(subject, "Body é", "a@example.com", ["b@example.com"])])
    out = stream.getvalue()
    assert f"Subject: {subject}\n" in out
    assert "=?utf-8?" not in out
    assert "Body é" in out
