"""Quota pages."""

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
    unchanged,
)


@login_required
def quota_list(request: HttpRequest) -> HttpResponse:
    filter_form = forms.QuotaFilterForm(request.GET)
    quotas = selectors.quota_list().filter(**filter_form.filters())
    return page(
        request, "governance/quota_list.html", {"quotas": quotas, "filter_form": filter_form}
    )


@login_required
def quota_detail(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk)
    return object_page(
        request,
        "governance/quota_detail.html",
        quota,
        "detail",
        usage=[
            use
            for use in selectors.pool_usage()
            if use.pool.pk == quota.pool_id and use.flavor.pk == quota.flavor_id
        ],
    )


@login_required
def quota_history(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk)
    return history_page(request, quota, [(_("Quota"), selectors.history_entries(obj=quota))])


@login_required
def quota_create(request: HttpRequest) -> HttpResponse:
    require_ops(request.user)
    initial = forms.QuotaFilterForm(request.GET).filters()
    form = forms.QuotaCreateForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            quota = services.quota_create(
                user=request.user, reason=form.change_reason, **form.service_data()
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, quota)
    return form_page(
        request,
        form,
        title=create_title(forms.QuotaCreateForm.Meta.model),
        cancel_url=reverse("quota_list"),
    )


@login_required
def quota_edit(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk, for_edit=True)
    form = forms.QuotaForm(posted(request), instance=quota)
    if request.method == "POST" and form.is_valid():
        if not form.changed_rule_fields():
            return unchanged(request, quota)
        try:
            quota = services.quota_update(
                quota=quota, user=request.user, reason=form.change_reason, data=form.service_data()
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, quota)
    return form_page(
        request, form, title=edit_title(quota), cancel_url=quota.get_absolute_url(), obj=quota
    )
