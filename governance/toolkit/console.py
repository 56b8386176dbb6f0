"""What the development server's log shows: a line, not a traceback, for a refused request
(403, 404, 400), and mails as people read them (the console mail backend of ``make run``)."""

import logging
from email.header import decode_header, make_header
from typing import Any

from django.core.mail.backends.console import EmailBackend as DjangoConsoleBackend
from django.core.mail.message import EmailMessage


class ClientErrorsWithoutTraceback(logging.Filter):
    """``django.request`` logs a refused request with the exception that refused it; a 4xx is
    the user's input or rights, not a fault: keep the line, drop the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True


def readable(header: str) -> str:
    """A mail header as a person reads it (``=?utf-8?q?…?=`` decoded)."""
    return str(make_header(decode_header(header)))


class ReadableConsoleEmailBackend(DjangoConsoleBackend):
    """Django's console backend, with the headers decoded and the text body as written."""

    def write_message(self, message: Any) -> None:
        assert isinstance(message, EmailMessage)
        mime = message.message()
        lines = [
            f"{name}: {readable(str(mime[name]))}"
            for name in ("From", "To", "Cc", "Subject", "Date")
            if mime[name]
        ]
        self.stream.write("\n".join([*lines, "", str(message.body), "-" * 79, ""]))
