"""Preemption class pages."""

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
def preemption_class_list(request: HttpRequest) -> HttpResponse:
    query = search_query(request)
    classes = selectors.search_filter(
        selectors.preemption_class_list(),
        query=query,
        fields=["slug", "name", "business_impact"],
    )
    return page(
        request,
        "governance/preemption_class_list.html",
        {"preemption_classes": classes, "query": query},
    )


@login_required
def preemption_class_detail(request: HttpRequest, slug: str) -> HttpResponse:
    preemption_class = selectors.preemption_class_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/preemption_class_detail.html",
        preemption_class,
        "detail",
        quotas=selectors.quota_list().filter(preemption_class=preemption_class),
    )


@login_required
def preemption_class_history(request: HttpRequest, slug: str) -> HttpResponse:
    preemption_class = selectors.preemption_class_get(user=request.user, slug=slug)
    return history_page(
        request,
        preemption_class,
        [(_("Preemption class"), selectors.history_entries(obj=preemption_class))],
    )


@login_required
def preemption_class_create(request: HttpRequest) -> HttpResponse:
    require_ops(request.user)
    form = forms.PreemptionClassCreateForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            preemption_class = services.preemption_class_create(
                user=request.user, reason=form.change_reason, **form.service_data()
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, preemption_class)
    return form_page(
        request,
        form,
        title=create_title(forms.PreemptionClassCreateForm.Meta.model),
        cancel_url=reverse("preemption_class_list"),
    )


@login_required
def preemption_class_edit(request: HttpRequest, slug: str) -> HttpResponse:
    preemption_class = selectors.preemption_class_get(user=request.user, slug=slug, for_edit=True)
    form = forms.PreemptionClassForm(posted(request), instance=preemption_class)
    if request.method == "POST" and form.is_valid():
        if not form.changed_rule_fields():
            return unchanged(request, preemption_class)
        try:
            preemption_class = services.preemption_class_update(
                preemption_class=preemption_class,
                user=request.user,
                reason=form.change_reason,
                data=form.service_data(),
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            return saved(request, preemption_class)
    return form_page(
        request,
        form,
        title=edit_title(preemption_class),
        cancel_url=preemption_class.get_absolute_url(),
        obj=preemption_class,
    )
