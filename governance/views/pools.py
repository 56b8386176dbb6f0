"""Pool pages, and the capacity a pool holds per flavor."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from governance import forms, selectors, services
from governance.models import GpuFlavor, Pool, PoolCapacity, Quota
from governance.toolkit.paging import paginate

from ._common import (
    edit_page,
    history_page,
    object_page,
    page,
    posted,
    propose_change,
    propose_create_page,
)
from ._kept import kept_list_page


@login_required
def pool_list(request: HttpRequest) -> HttpResponse:
    return kept_list_page(
        request,
        "governance/pool_list.html",
        "governance/includes/pool_list_body.html",
        lambda: forms.PoolFilterForm(request.GET),
        selectors.pool_list,
        name="pools",
        # What the list shows: pools, their parents and capacities (flavors), the projects
        # with quotas in each; the filter form's menu of pools.
        governed=(Pool, PoolCapacity, GpuFlavor, Quota),
    )


@login_required
def pool_detail(request: HttpRequest, slug: str) -> HttpResponse:
    pool = selectors.pool_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/pool_detail.html",
        pool,
        "detail",
        usage=selectors.pool_usage(pool=pool),
        children=selectors.pool_list(parent=pool),
        quotas=paginate(request, selectors.quota_list(pool=pool)),
    )


@login_required
def pool_history(request: HttpRequest, slug: str) -> HttpResponse:
    pool = selectors.pool_get(user=request.user, slug=slug)
    return history_page(request, pool)


@login_required
def pool_create(request: HttpRequest) -> HttpResponse:
    return propose_create_page(
        request,
        forms.PoolCreateForm,
        cancel_url=reverse("pool_list"),
    )


@login_required
def pool_edit(request: HttpRequest, slug: str) -> HttpResponse:
    pool = selectors.pool_get(user=request.user, slug=slug, for_edit=True)
    return edit_page(request, forms.PoolForm, pool)


@login_required
def pool_capacity_edit(request: HttpRequest, slug: str) -> HttpResponse:
    pool = selectors.pool_get(user=request.user, slug=slug, for_edit=True)
    usage = selectors.pool_usage(pool=pool)
    initial = {}
    flavor_slug = request.GET.get("flavor")
    current = next((use for use in usage if use.flavor.slug == flavor_slug), None)
    if current is not None:
        initial = {"flavor": current.flavor, "gpus": current.capacity}
    form = forms.PoolCapacityForm(posted(request), initial=initial)
    change_form = forms.RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        edit = services.EditSpec(
            target=pool,
            field=services.CAPACITY,
            key=form.cleaned_data["flavor"],
            value=form.cleaned_data["gpus"],
        )
        response = propose_change(
            request, edits=[edit], reason=form.change_reason, form=form, change_form=change_form
        )
        if response is not None:
            return response
    return page(
        request,
        "governance/pool_capacity_edit.html",
        {"object": pool, "usage": usage, "form": form, "change_form": change_form},
    )
