"""GPU flavor pages."""

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
def flavor_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        "governance/flavor_list.html",
        forms.FlavorFilterForm(request.GET),
        selectors.flavor_list,
        name="flavors",
    )


@login_required
def flavor_detail(request: HttpRequest, slug: str) -> HttpResponse:
    flavor = selectors.flavor_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/flavor_detail.html",
        flavor,
        "detail",
        usage=selectors.pool_usage(flavor=flavor),
        quotas=paginate(request, selectors.quota_list(flavor=flavor)),
    )


@login_required
def flavor_history(request: HttpRequest, slug: str) -> HttpResponse:
    flavor = selectors.flavor_get(user=request.user, slug=slug)
    return history_page(request, flavor)


@login_required
def flavor_create(request: HttpRequest) -> HttpResponse:
    return propose_create_page(
        request,
        forms.FlavorCreateForm,
        cancel_url=reverse("flavor_list"),
    )


@login_required
def flavor_edit(request: HttpRequest, slug: str) -> HttpResponse:
    flavor = selectors.flavor_get(user=request.user, slug=slug, for_edit=True)
    return edit_page(request, forms.FlavorForm, flavor)
