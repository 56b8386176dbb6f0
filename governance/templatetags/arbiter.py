"""Filters every page uses to show stored texts and figures the way people read them.

Built in (``TEMPLATES``' ``builtins`` in the settings): no ``{% load %}`` needed.
"""

import functools
import html
import re
from typing import Any

from django import template
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import ngettext

from governance.models.texts import stored_text

register = template.Library()

# Stands for the key while a URL is reversed once (digits: both slug and int routes take it).
_PLACEHOLDER = "9081726354"
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
_INT = re.compile(r"[0-9]+")


@functools.cache
def _key_route(name: str, prefix: str, urlconf: Any) -> tuple[str, str, re.Pattern[str]]:
    """The URL ``name`` reversed with a placeholder key, split around it, and the keys its
    route takes (slugs, or digits only when a slug is refused)."""
    head, tail = reverse(name, args=[_PLACEHOLDER]).split(_PLACEHOLDER)
    try:
        reverse(name, args=["a-b_c"])
    except NoReverseMatch:
        return head, tail, _INT
    return head, tail, _SLUG


@register.simple_tag
def key_url(name: str, key: Any) -> str:
    """``{% url name key %}`` for the rows of a long list, at a fraction of its cost: the
    route is reversed once (per URL configuration and script prefix) and each key put in
    its place. A key the route would not take is reversed as usual (and refused as usual)."""
    head, tail, keys = _key_route(name, get_script_prefix(), get_urlconf())
    text = str(key)
    if keys.fullmatch(text):
        return head + text + tail
    return reverse(name, args=[key])


@register.filter
def stored(value: Any) -> str:
    """A text stored in English (a choice label, a generated title) in the reader's language;
    what someone typed stays as written."""
    return stored_text(str(value)) if value not in (None, "") else ""


@register.filter
def duration(seconds: Any) -> str:
    """A duration in days, hours and minutes ("2 days 3 hours", "45 minutes"): the two
    largest units, rounded down."""
    try:
        total = max(0, int(float(seconds)))
    except (TypeError, ValueError):
        return "—"
    minutes = total // 60
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = []
    if days:
        parts.append(ngettext("%(n)d day", "%(n)d days", days) % {"n": days})
    if hours:
        parts.append(ngettext("%(n)d hour", "%(n)d hours", hours) % {"n": hours})
    if (minutes and not days) or not parts:
        parts.append(ngettext("%(n)d minute", "%(n)d minutes", minutes) % {"n": minutes})

    return " ".join(parts[:2])


@register.filter
def gpus(value: Any) -> str:
    """A GPU count as people write it: 8 for whole GPUs, 0.25 for a fraction."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—" if value in (None, "") else str(value)
    return str(int(number)) if number.is_integer() else f"{number:.2f}".rstrip("0")


@register.filter
def limit(value: Any) -> str:
    """A limit where empty means "no limit": ∞, never a dash that reads as zero."""
    return "∞" if value is None or value == "" else str(value)


@register.filter
def figure(value: Any) -> Any:
    """A figure in a table as people read it: whole numbers from 100 up (1328 GPU-hours, not
    1327.53), one decimal below; anything not a float as it is."""
    if not isinstance(value, float):
        return value
    if abs(value) >= 100:
        return str(round(value))
    rounded = round(value, 1)
    return str(int(rounded)) if rounded.is_integer() else str(rounded)


_DASH = mark_safe('<span class="muted">—</span>')


def _html(value: Any) -> str:
    """``conditional_escape`` without its lazy-string wrapper (rows call it thousands of
    times): safe text as it is, anything else escaped as Django escapes."""
    return value.__html__() if hasattr(value, "__html__") else html.escape(str(value))


@register.simple_tag
def project_row(project: Any, default_label: str = "") -> SafeString:
    """A row of the project list (``governance/project_list.html``), as its template wrote
    it cell by cell, in one tag: the list's cost is its rows (a tenth of the template
    variables, no tags inside). ``project`` comes from ``project_list()``; ``default_label``
    names the default tier for a project without one (empty: no default tier)."""
    tier = "—"
    if project.tier_slug:
        link = _html(key_url("tier_detail", project.tier_slug))
        tier = f'<a href="{link}">{_html(project.tier_name)}</a>'
    elif default_label:
        tier = f'<span class="muted">{_html(default_label)}</span>'
    leads = _html(project.lead_names) if project.lead_names else _DASH
    return mark_safe(  # every value escaped above
        f'<tr>\n      <td><a href="{_html(key_url("project_detail", project.slug))}">'
        f"{_html(project.name)}</a></td>\n      <td><code>{_html(project.slug)}</code></td>\n"
        f"      <td>{tier}</td>\n      <td>{leads}</td>\n"
        f'      <td class="num">{_html(project.member_count)}</td>\n'
        f'      <td class="num">{_html(project.guaranteed_gpus)}</td>\n    </tr>'
    )
