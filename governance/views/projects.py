"""Project pages, and the members of a project."""

from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _

from governance import forms, selectors, services

from ._common import (
    create_page,
    edit_page,
    history_page,
    object_page,
    page,
    search_query,
)


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    query = search_query(request)
    projects = selectors.search_filter(
        selectors.project_list(), query=query, fields=["slug", "name", "description"]
    )
    return page(
        request,
        "governance/project_list.html",
        {"projects": projects, "query": query, "default_tier": selectors.default_tier()},
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
        allowed_tiers=selectors.allowed_tiers(project=project, default=default),
        quotas=selectors.quotas_for_projects(project_ids=[project.pk]),
    )


@login_required
def project_history(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_get(user=request.user, slug=slug)
    return history_page(
        request,
        project,
        [
            (_("Project"), selectors.history_entries(obj=project)),
            (_("Members"), selectors.membership_history_entries(project=project)),
        ],
    )


@login_required
def project_create(request: HttpRequest) -> HttpResponse:
    return create_page(
        request,
        forms.ProjectCreateForm,
        create=services.project_create,
        cancel_url=reverse("project_list"),
    )


@login_required
def project_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_get(user=request.user, slug=slug, for_edit=True)
    return edit_page(
        request,
        forms.ProjectForm,
        project,
        update=partial(services.project_update, project=project),
    )


@login_required
def membership_edit(request: HttpRequest, slug: str) -> HttpResponse:
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
    try:
        if action == "set" and set_form.is_valid():
            membership = services.membership_set(
                project=project,
                member=set_form.cleaned_data["member"],
                role=set_form.cleaned_data["role"],
                user=request.user,
                reason=set_form.change_reason,
            )
            messages.success(
                request,
                _("%(user)s is now %(role)s of “%(project)s”.")
                % {
                    "user": membership.user,
                    "role": membership.get_role_display().lower(),
                    "project": project,
                },
            )
            return redirect("membership_edit", slug=project.slug)
        if action == "remove" and remove_form.is_valid():
            membership = remove_form.cleaned_data["membership"]
            services.membership_remove(
                membership=membership, user=request.user, reason=remove_form.change_reason
            )
            messages.success(
                request,
                _("%(user)s is no longer a member of “%(project)s”.")
                % {"user": membership.user, "project": project},
            )
            return redirect("membership_edit", slug=project.slug)
    except ValidationError as error:
        (set_form if action == "set" else remove_form).add_service_error(error)
    return page(
        request,
        "governance/membership_edit.html",
        {
            "object": project,
            "memberships": selectors.project_memberships(project=project),
            "set_form": set_form,
            "remove_form": remove_form,
        },
    )
