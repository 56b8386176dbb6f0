"""Priority tier pages."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from governance import forms, selectors
from governance.toolkit.paging import paginate

from ._common import (
    edit_page,
    history_page,
    list_page,
    object_page,
    propose_create_page,
)


@login_required
def tier_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        "governance/tier_list.html",
        forms.TierFilterForm(request.GET),
        selectors.tier_list,
        name="tiers",
    )


@login_required
def tier_detail(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/tier_detail.html",
        tier,
        "detail",
        preempted_by=selectors.tier_list(preempts=tier),
        projects=paginate(request, selectors.project_list(tier=tier)),
    )


@login_required
def tier_history(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug)
    return history_page(request, tier)


@login_required
def tier_create(request: HttpRequest) -> HttpResponse:
    return propose_create_page(
        request,
        forms.TierCreateForm,
        cancel_url=reverse("tier_list"),
    )


@login_required
def tier_edit(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug, for_edit=True)
    return edit_page(request, forms.TierForm, tier)
