"""GPU flavor pages."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _

from governance import forms, selectors, services

from ._common import (
    create_title,
    edit_title,
    form_page,
    history_page,
    object_page,
    page,
    posted,
    require_ops,
    saved,
    search_query,
    unchanged,
)


@login_required
def flavor_list(request: HttpRequest) -> HttpResponse:
    query = search_query(request)
    flavors = selectors.search_filter(
        selectors.flavor_list(), query=query, fields=["slug", "name", "gpu_model", "gres_type"]
    )
    return page(request, "governance/flavor_list.html", {"flavors": flavors, "query": query})


@login_required
def flavor_detail(request: HttpRequest, slug: str) -> HttpResponse:
    flavor = selectors.flavor_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/flavor_detail.html",
        flavor,
        "detail",
        usage=[use for use in selectors.pool_usage() if use.flavor.pk == flavor.pk],
        quotas=selectors.quota_list().filter(flavor=flavor),
    )


@login_required
def flavor_history(request: HttpRequest, slug: str) -> HttpResponse:
    flavor = selectors.flavor_get(user=request.user, slug=slug)
    return history_page(request, flavor, [(_("GPU flavor"), selectors.history_entries(obj=flavor))])


@login_required
def flavor_create(request: HttpRequest) -> HttpResponse:
    require_ops(request.user)
    form = forms.FlavorCreateForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            flavor = services.flavor_create(
                user=request.user, reason=form.change_reason, **form.service_data()
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, flavor)
    return form_page(
        request,
        form,
        title=create_title(forms.FlavorCreateForm.Meta.model),
        cancel_url=reverse("flavor_list"),
    )


@login_required
def flavor_edit(request: HttpRequest, slug: str) -> HttpResponse:
    flavor = selectors.flavor_get(user=request.user, slug=slug, for_edit=True)
    form = forms.FlavorForm(posted(request), instance=flavor)
    if request.method == "POST" and form.is_valid():
        if not form.changed_rule_fields():
            return unchanged(request, flavor)
        try:
            flavor = services.flavor_update(
                flavor=flavor,
                user=request.user,
                reason=form.change_reason,
                data=form.service_data(),
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, flavor)
    return form_page(
        request, form, title=edit_title(flavor), cancel_url=flavor.get_absolute_url(), obj=flavor
    )
