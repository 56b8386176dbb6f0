"""A list page whose filters, rows and pagination are rendered once and kept.

For a list the same for every reader (the rules are public inside the organisation), whose
rows are governed rows: the part of the page below its heading is kept in the cache under a
key naming the list, the request's query string, the reader's language, whether they may
edit the rules, and the fingerprint of the rows (``selectors.rows_fingerprint``: the newest
history row of each governed model the list shows). A write of any of them makes a new key;
a request with the same query then reads one query (the fingerprint) instead of the rows,
their related rows and the filter form's menus. Invalid filters are never kept (the 400 of
``list_page``).
"""

import hashlib
from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.utils.translation import get_language

from governance import forms, selectors
from governance.toolkit.paging import DEFAULT_PAGE_SIZE, paginate

from ._common import list_page, page

# How long a kept list lives at most (a changed fingerprint replaces it first).
KEPT_SECONDS = 3600
# Bump when what the kept parts hold changes shape (a deploy then renders afresh).
VERSION = 1


def kept_list_page(
    request: HttpRequest,
    template: str,
    body_template: str,
    filter_form: Callable[[], forms.ListFilterForm],
    select: Callable[..., Any],
    *,
    name: str,
    governed: tuple[type[models.Model], ...],
) -> HttpResponse:
    """``list_page``, with ``body_template`` (the filters, the rows and the pagination)
    rendered once per key (see the module's docstring) and shown in ``template`` as
    ``kept_body``."""
    can_edit = selectors.user_can_edit_rules(request.user)
    asked = sorted((key, request.GET.getlist(key)) for key in request.GET)
    digest = hashlib.sha1(repr(asked).encode(), usedforsecurity=False).hexdigest()
    key = ":".join(
        [
            f"arbiter:list:v{VERSION}:{name}",
            get_language() or "",
            "edit" if can_edit else "read",
            selectors.rows_fingerprint(governed),
            digest,
        ]
    )
    body = cache.get(key)
    if body is None:
        form = filter_form()
        if not form.is_valid():
            return list_page(request, template, form, select, name=name)
        context = {
            name: paginate(request, select(**form.filters()), default_size=DEFAULT_PAGE_SIZE),
            "filter_form": form,
            "can_edit": can_edit,
        }
        body = render_to_string(body_template, context, request)
        cache.set(key, body, KEPT_SECONDS)
    return page(request, template, {"kept_body": mark_safe(body)})
