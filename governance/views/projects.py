"""Project pages, and the members of a project."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone

from governance import forms, selectors, services

from ._common import (
    edit_page,
    history_page,
    list_page,
    object_page,
    page,
    propose_change,
    propose_create_page,
)


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    filter_form = forms.ProjectFilterForm(request.GET)
    # The default tier is among the tier menu's rows: read once for both (the menu's choices
    # are the same evaluated queryset).
    menu = filter_form.fields["tier"].queryset  # type: ignore[attr-defined]
    return list_page(
        request,
        "governance/project_list.html",
        filter_form,
        selectors.project_list,
        name="projects",
        default_tier=next((tier for tier in menu if tier.is_default), None),
    )


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_get(user=request.user, slug=slug)
    default = selectors.default_tier()
    return object_page(
        request,
        "governance/project_detail.html",
        project,
        "detail",
        default_tier=default,
        memberships=selectors.project_memberships(project=project),
        quotas=selectors.quotas_for_projects(project_ids=[project.pk]),
        in_force=selectors.effective_rules(
            at=timezone.now(), project_slugs=[project.slug]
        ).projects[project.slug],
    )


@login_required
def project_history(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_get(user=request.user, slug=slug)
    return history_page(request, project)


@login_required
def project_create(request: HttpRequest) -> HttpResponse:
    """A new project is proposed: a rule change that someone else approves."""
    return propose_create_page(request, forms.ProjectCreateForm, cancel_url=reverse("project_list"))


@login_required
def project_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_get(user=request.user, slug=slug, for_edit=True)
    return edit_page(request, forms.ProjectForm, project)


@login_required
def membership_edit(request: HttpRequest, slug: str) -> HttpResponse:
    """Add, change or remove a member: each proposes a rule change of the membership."""
    project = selectors.project_get(user=request.user, slug=slug, for_edit=True)
    action = request.POST.get("action") if request.method == "POST" else None
    set_form = forms.MembershipSetForm(
        request.POST if action == "set" else None,
        prefix="set",
        initial={"role": "member"},
    )
    remove_form = forms.MembershipRemoveForm(
        request.POST if action == "remove" else None, prefix="remove", project=project
    )
    set_change_form = forms.RuleChangeMetaForm(
        request.POST if action == "set" else None, prefix="set-change"
    )
    remove_change_form = forms.RuleChangeMetaForm(
        request.POST if action == "remove" else None, prefix="remove-change"
    )
    change_form = remove_change_form if action == "remove" else set_change_form
    form: forms.ReasonForm | None = None
    edit: services.EditSpec | None = None
    if action == "set" and set_form.is_valid():
        form = set_form
        edit = services.EditSpec(
            target=project,
            field=services.MEMBERSHIP,
            key=set_form.cleaned_data["member"],
            value=set_form.cleaned_data["role"],
        )
    elif action == "remove" and remove_form.is_valid():
        form = remove_form
        edit = services.EditSpec(
            target=project,
            field=services.MEMBERSHIP,
            key=remove_form.cleaned_data["membership"].user,
            value=None,
        )
    if form is not None and edit is not None and change_form.is_valid():
        response = propose_change(
            request, edits=[edit], reason=form.change_reason, form=form, change_form=change_form
        )
        if response is not None:
            return response
    return page(
        request,
        "governance/membership_edit.html",
        {
            "object": project,
            "memberships": selectors.project_memberships(project=project),
            "set_form": set_form,
            "remove_form": remove_form,
            "set_change_form": set_change_form,
            "remove_change_form": remove_change_form,
        },
    )
