"""Texts that services store in rows (history reasons, generated change titles) are stored in
English and shown in the reader's language.

A fixed text ("Proposed") is its own message id, so ``gettext`` translates it. A text with
parameters ("Rolled back by change #5") is matched against the registered English templates
below; its parameters are taken out (translated themselves when they are stored texts or
field labels) and put into the translated template. What matches nothing (a reason someone
typed) is shown as it was written.
"""

import re
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.utils import formats, timezone
from django.utils.dateparse import parse_datetime
from django.utils.functional import Promise
from django.utils.translation import get_language, gettext, gettext_noop, ngettext, override

# English templates of stored texts, most specific first. A service that stores one of them
# writes ``gettext_noop(TEMPLATE) % params`` (or composes it under English).
GENERATED_TITLE = gettext_noop("%(objects)s: %(fields)s")
TEMPLATES = [
    gettext_noop("Rolled back by change #%(id)d"),
    gettext_noop("Roll back #%(id)d: %(title)s"),
    gettext_noop("Change #%(id)d: %(title)s"),
    gettext_noop("capacity of %(flavor)s"),
    gettext_noop("membership of %(user)s"),
    gettext_noop("Roll this rollback back if the reason for change #%(id)d holds again."),
    gettext_noop("Request #%(pk)d approved: %(justification)s"),
    gettext_noop("Reviewed (%(outcome)s): %(notes)s"),
    # A generated change title: the objects (names, kept), then the fields that change.
    GENERATED_TITLE,
]
NUMBERS = {"id", "pk"}
NAMES = {"objects", "flavor", "user", "justification", "notes"}


@cache
def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    patterns = []
    for template in TEMPLATES:
        regex = re.escape(template)
        regex = re.sub(r"%\\\((\w+)\\\)d", r"(?P<\1>\\d+)", regex)
        regex = re.sub(r"%\\\((\w+)\\\)s", r"(?P<\1>.+)", regex)
        patterns.append((template, re.compile(regex, re.DOTALL)))
    return patterns


def stored_text(text: str) -> str:
    """``text``, stored in English, in the active language."""
    if not text or (get_language() or "en").startswith("en"):
        return text
    translated = gettext(text)
    if translated != text:
        return translated
    for template, pattern in _patterns():
        match = pattern.fullmatch(text)
        if match is None:
            continue
        params: dict[str, object] = {}
        for name, value in match.groupdict().items():
            if name in NUMBERS:
                params[name] = int(value)
            elif name in NAMES:
                params[name] = value
            elif name == "fields":
                english = value.split(", ")
                labels = [stored_text(label) for label in english]
                if set(labels) & set(english):
                    return text  # a title someone typed, not one Arbiter generated
                # Translators: between the field names of a generated change title.
                params[name] = gettext(", ").join(labels)
            else:
                params[name] = stored_text(value)
        return gettext(template) % params
    return text


# --- messages: a message id and its parameters, stored as JSON -----------------------------
#
# A text a service writes for people to read later (a notification, a timeline comment) is
# stored as ``message(TEMPLATE, name=value, ...)``: the English template (its message id) and
# the parameters, rendered in the reader's language when it is read (``message_text``).
# A parameter is kept as it is (names, numbers, what someone typed), except a datetime (shown
# in the reader's date format and time zone) and a translatable label or nested message
# (translated itself).

Message = dict[str, Any]


def message(template: str, **params: Any) -> Message:
    """``template`` (an English message id, marked with ``gettext_noop``) with ``params``."""
    return {
        "key": str(template),
        "params": {name: _encoded(value) for name, value in params.items()},
    }


def ngettext_noop(singular: str, plural: str) -> tuple[str, str]:
    """Marks a message's two English forms for the catalog (as ``gettext_noop`` marks one);
    ``makemessages`` does not know this name, so the pair is entered in the .po by hand."""
    return singular, plural


def message_plural(singular: str, plural: str, *, number: str, **params: Any) -> Message:
    """A message whose wording follows the number in ``params[number]`` ("1 exception",
    "2 exceptions"): both English forms are stored and ``ngettext`` picks the reader's form
    when it is read. Mark the two forms with ``ngettext_noop`` for the catalogs."""
    stored = message(singular, **params)
    stored["plural"] = str(plural)
    stored["number"] = number
    return stored


def label(value: Any, *, lower: bool = False) -> Message:
    """A translatable label (a choice's label, a ``gettext_lazy`` text) as a parameter,
    translated when read; ``lower`` lowercases it (as inside a sentence)."""
    with override("en"):
        english = str(value)
    return {"key": english, "params": {}, "lower": lower}


def _encoded(value: Any) -> Any:
    if isinstance(value, dict) and "key" in value:
        return value
    if isinstance(value, datetime):
        return {"when": value.isoformat()}
    if isinstance(value, Promise):
        return label(value)
    if isinstance(value, list | tuple):
        return {"join": [_encoded(item) for item in value]}
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)


def _decoded(value: Any) -> Any:
    if isinstance(value, dict) and "when" in value:
        moment = parse_datetime(value["when"])
        if moment is None:
            raise ValueError(value["when"])
        return formats.date_format(timezone.localtime(moment), "DATETIME_FORMAT")
    if isinstance(value, dict) and "join" in value:
        # Translators: between the items of a list inside a sentence ("A, B").
        return gettext(", ").join(str(_decoded(item)) for item in value["join"])
    if isinstance(value, dict):
        return _rendered(value)
    return value


def _rendered(stored: Message) -> str:
    params = {name: _decoded(value) for name, value in (stored.get("params") or {}).items()}
    if "plural" in stored:
        text = ngettext(stored["key"], stored["plural"], int(params[stored["number"]]))
    else:
        text = gettext(stored["key"])
    text = text % params if params else text
    return text.lower() if stored.get("lower") else text


def message_text(stored: Message | None, fallback: str = "") -> str:
    """The stored ``message`` in the active language; ``fallback`` (the text as it was stored
    before messages, in English or in its writer's language) when there is none or it no
    longer renders."""
    if stored:
        try:
            return _rendered(stored)
        except (KeyError, TypeError, ValueError):
            pass
    return stored_text(fallback)


def message_english(stored: Message) -> str:
    """The message in English: the plain text stored beside it (search, admin, old readers)."""
    with override("en"):
        return _rendered(stored)


def mail_language(user: Any) -> str:
    """The language of the mails to ``user``: the one they chose, else the site's."""
    return getattr(user, "language", "") or settings.LANGUAGE_CODE
