"""Priority tier pages."""

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
def tier_list(request: HttpRequest) -> HttpResponse:
    query = search_query(request)
    tiers = selectors.search_filter(
        selectors.tier_list(), query=query, fields=["slug", "name", "description", "eligibility"]
    )
    return page(request, "governance/tier_list.html", {"tiers": tiers, "query": query})


@login_required
def tier_detail(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/tier_detail.html",
        tier,
        "detail",
        preempted_by=selectors.tier_list().filter(preemptible_tiers=tier),
        projects=selectors.project_list().filter(tier=tier),
    )


@login_required
def tier_history(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug)
    return history_page(request, tier, [(_("Priority tier"), selectors.history_entries(obj=tier))])


@login_required
def tier_create(request: HttpRequest) -> HttpResponse:
    require_ops(request.user)
    form = forms.TierCreateForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            tier = services.tier_create(
                user=request.user, reason=form.change_reason, **form.service_data()
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, tier)
    return form_page(
        request,
        form,
        title=create_title(forms.TierCreateForm.Meta.model),
        cancel_url=reverse("tier_list"),
    )


@login_required
def tier_edit(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug, for_edit=True)
    form = forms.TierForm(posted(request), instance=tier)
    if request.method == "POST" and form.is_valid():
        if not form.changed_rule_fields():
            return unchanged(request, tier)
        try:
            tier = services.tier_update(
                tier=tier, user=request.user, reason=form.change_reason, data=form.service_data()
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, tier)
    return form_page(
        request, form, title=edit_title(tier), cancel_url=tier.get_absolute_url(), obj=tier
    )
