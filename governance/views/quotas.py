"""Quota pages."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from governance import forms, selectors

from ._common import (
    edit_page,
    history_page,
    list_page,
    object_page,
    propose_create_page,
)


@login_required
def quota_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        "governance/quota_list.html",
        forms.QuotaFilterForm(request.GET),
        selectors.quota_list,
        name="quotas",
    )


@login_required
def quota_detail(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk)
    return object_page(
        request,
        "governance/quota_detail.html",
        quota,
        "detail",
        usage=selectors.pool_usage(pool=quota.pool, flavor=quota.flavor),
    )


@login_required
def quota_history(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk)
    return history_page(request, quota)


@login_required
def quota_create(request: HttpRequest) -> HttpResponse:
    return propose_create_page(
        request,
        forms.QuotaCreateForm,
        cancel_url=reverse("quota_list"),
        initial=_quota_initial(request),
    )


def _quota_initial(request: HttpRequest) -> dict[str, object]:
    """A new quota starts from the quota list's filters (the valid ones)."""
    filter_form = forms.QuotaFilterForm(request.GET)
    filter_form.is_valid()
    cleaned = getattr(filter_form, "cleaned_data", {})
    return {name: cleaned[name] for name in ("project", "pool", "flavor") if cleaned.get(name)}


@login_required
def quota_edit(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk, for_edit=True)
    return edit_page(request, forms.QuotaForm, quota)
