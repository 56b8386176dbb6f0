"""Texts that services store in rows (history reasons, generated change titles) are stored in
English and shown in the reader's language.

A fixed text ("Proposed") is its own message id, so ``gettext`` translates it. A text with
parameters ("Rolled back by change #5") is matched against the registered English templates
below; its parameters are taken out (translated themselves when they are stored texts or
field labels) and put into the translated template. What matches nothing (a reason someone
typed) is shown as it was written.
"""

import re
from functools import cache

from django.utils.translation import get_language, gettext, gettext_noop

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
    # A generated change title: the objects (names, kept), then the fields that change.
    GENERATED_TITLE,
]
NUMBERS = {"id"}
NAMES = {"objects", "flavor", "user"}


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
