"""Preemption class pages."""

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
def preemption_class_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        "governance/preemption_class_list.html",
        forms.PreemptionClassFilterForm(request.GET),
        selectors.preemption_class_list,
        name="preemption_classes",
    )


@login_required
def preemption_class_detail(request: HttpRequest, slug: str) -> HttpResponse:
    preemption_class = selectors.preemption_class_get(user=request.user, slug=slug)
    return object_page(
        request,
        "governance/preemption_class_detail.html",
        preemption_class,
        "detail",
        quotas=paginate(request, selectors.quota_list(preemption_class=preemption_class)),
    )


@login_required
def preemption_class_history(request: HttpRequest, slug: str) -> HttpResponse:
    preemption_class = selectors.preemption_class_get(user=request.user, slug=slug)
    return history_page(request, preemption_class)


@login_required
def preemption_class_create(request: HttpRequest) -> HttpResponse:
    return propose_create_page(
        request,
        forms.PreemptionClassCreateForm,
        cancel_url=reverse("preemption_class_list"),
    )


@login_required
def preemption_class_edit(request: HttpRequest, slug: str) -> HttpResponse:
    preemption_class = selectors.preemption_class_get(user=request.user, slug=slug, for_edit=True)
    return edit_page(request, forms.PreemptionClassForm, preemption_class)
