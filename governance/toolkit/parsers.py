"""The API's JSON parser: DRF's, with limits that turn hostile bodies into 400s.

(DRF's settings load it, so it lives outside the ``apis`` package, whose import needs DRF's
views: no import cycle.)

A body nested deeper than ``MAX_DEPTH`` (Python's parser would hit its recursion limit and
fail with a server error) and any string holding a NUL byte (PostgreSQL refuses those in
text) are refused with a 400 that names where the problem is.
"""

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import exceptions, parsers

MAX_DEPTH = 32


def _check(data: Any) -> None:
    """Walk the parsed body without recursion; raise a 400 at the first bad value."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise exceptions.ParseError(
                _("JSON nested deeper than %(depth)d levels.") % {"depth": MAX_DEPTH}
            )
        if isinstance(value, str):
            if "\x00" in value:
                raise exceptions.ValidationError(
                    {path or "body": [_("Null characters are not allowed.")]}
                )
        elif isinstance(value, dict):
            for key, item in value.items():
                if "\x00" in key:
                    raise exceptions.ValidationError(
                        {path or "body": [_("Null characters are not allowed.")]}
                    )
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, f"{path}[{index}]" if path else f"[{index}]", depth + 1))


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(
                _("JSON nested deeper than %(depth)d levels.") % {"depth": MAX_DEPTH}
            ) from None
        _check(data)
        return data


__all__ = ["JSONParser"]
