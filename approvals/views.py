"""Pages of requests: the list, the form, the detail with its timeline and decisions, the
approver's inbox, a project's grants, notifications and the approval policies.

Views parse input, call a selector or a service, and render. A service's ``ValidationError``
is shown on the page; its ``PermissionDenied`` is a 403.
"""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from approvals import forms, selectors, services
from approvals.models import (
    ApprovalPolicy,
    RequestAction,
    RequestStage,
    UpgradeRequest,
)
from governance.forms import RuleChangeMetaForm
from governance.selectors import (
    project_get,
    signed_in_user,
    user_can_edit_rules,
)
from governance.services import (
    TEXT_MAX_LENGTH,
    rule_object_propose_create,
    rule_object_propose_update,
)
from governance.toolkit.paging import paginate
from governance.toolkit.web import history_section_pages, posted, propose

# --- requests -------------------------------------------------------------------------------


@login_required
def request_list(request: HttpRequest) -> HttpResponse:
    filter_form = forms.RequestFilterForm(request.GET, user=request.user)
    if not filter_form.is_valid():
        return render(
            request,
            "approvals/request_list.html",
            {"requests": None, "filter_form": filter_form},
            status=400,
        )
    requests = paginate(
        request, selectors.request_list_for(user=request.user, **filter_form.filters())
    )
    return render(
        request,
        "approvals/request_list.html",
        {
            "requests": requests,
            "filter_form": filter_form,
            "may_file": selectors.projects_user_may_file_for(user=request.user).exists(),
        },
    )


@login_required
def request_create(request: HttpRequest) -> HttpResponse:
    projects = selectors.projects_user_may_file_for(user=request.user)
    if not projects.exists():
        raise PermissionDenied(_("You are a member of no project, so you cannot file requests."))
    initial: dict[str, Any] = {"kind": request.GET.get("kind", "")}
    extends_pk = request.GET.get("extends")
    if extends_pk:
        initial.update(
            selectors.extension_initial(
                request=selectors.request_get(user=request.user, pk=extends_pk)
            )
        )
    elif request.GET.get("project"):
        initial["project"] = projects.filter(slug=request.GET["project"]).first()
    if request.GET.get("reason", "").strip():  # a review's finding: the justification to edit
        initial["justification"] = request.GET["reason"].strip()[: forms.TEXT_MAX_LENGTH]
    form = forms.RequestForm(posted(request), initial=initial, projects=projects)
    if request.method == "POST" and form.is_valid():
        try:
            created = services.request_create(
                user=signed_in_user(request),
                submit=request.POST.get("action") != "draft",
                **form.service_data(),
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            if created.stage == RequestStage.SUBMITTED:
                messages.success(
                    request, _("Request #%(pk)d was sent to its approvers.") % {"pk": created.pk}
                )
            else:
                messages.success(
                    request, _("Request #%(pk)d was saved as a draft.") % {"pk": created.pk}
                )
            return redirect(created)
    return render(
        request,
        "approvals/request_form.html",
        {"form": form, "limits": selectors.policy_limits()},
    )


@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    upgrade = selectors.request_get(user=request.user, pk=pk)
    return _detail_page(request, upgrade)


def _detail_page(
    request: HttpRequest,
    upgrade: UpgradeRequest,
    *,
    comment_form: forms.CommentForm | None = None,
    reject_form: forms.DecisionReasonForm | None = None,
    revoke_form: forms.DecisionReasonForm | None = None,
    status: int = 200,
) -> HttpResponse:
    user = request.user
    blockers = selectors.request_action_blockers(request=upgrade, user=user)
    approve_blocker = blockers[RequestAction.APPROVE]
    reject_blocker = blockers[RequestAction.REJECT]
    return render(
        request,
        "approvals/request_detail.html",
        {
            "object": upgrade,
            "events": upgrade.events.all(),
            "approvals": upgrade.approvals.all(),
            "approvals_given": upgrade.approvals_given,
            "approvers_label": selectors.approvers_label(upgrade),
            "may_approve": approve_blocker is None,
            "may_reject": reject_blocker is None,
            "decide_blocker": approve_blocker if reject_blocker is None else reject_blocker,
            "may_submit": blockers[RequestAction.SUBMIT] is None,
            "may_withdraw": blockers[RequestAction.WITHDRAW] is None,
            "may_revoke": blockers[RequestAction.REVOKE] is None,
            "may_extend": blockers[RequestAction.EXTEND] is None,
            "comment_form": comment_form or forms.CommentForm(prefix="approve"),
            "reject_form": reject_form or forms.DecisionReasonForm(prefix="reject"),
            "revoke_form": revoke_form or forms.DecisionReasonForm(prefix="revoke"),
        },
        status=status,
    )


def _act(request: HttpRequest, pk: int, action: Any, done: str) -> HttpResponse:
    """Run ``action(upgrade)``; on success go back to the request with ``done`` as message."""
    upgrade = selectors.request_get(user=request.user, pk=pk)
    try:
        action(upgrade)
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, message)
    else:
        messages.success(request, done)
    return redirect(upgrade)


@login_required
@require_POST
def request_submit(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(
        request,
        pk,
        lambda upgrade: services.request_submit(request=upgrade, user=signed_in_user(request)),
        _("The request was sent to its approvers."),
    )


@login_required
@require_POST
def request_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    comment = request.POST.get("comment", "")[:TEXT_MAX_LENGTH]
    return _act(
        request,
        pk,
        lambda upgrade: services.request_withdraw(
            request=upgrade, user=signed_in_user(request), comment=comment
        ),
        _("The request was withdrawn."),
    )


@login_required
@require_POST
def request_approve(request: HttpRequest, pk: int) -> HttpResponse:
    upgrade = selectors.request_get(user=request.user, pk=pk)
    form = forms.CommentForm(request.POST, prefix="approve")
    if not form.is_valid():
        return _detail_page(request, upgrade, comment_form=form, status=400)
    return _act(
        request,
        pk,
        lambda upgrade: services.request_approve(
            request=upgrade, user=signed_in_user(request), comment=form.cleaned_data["comment"]
        ),
        _("Your approval was recorded."),
    )


@login_required
@require_POST
def request_reject(request: HttpRequest, pk: int) -> HttpResponse:
    upgrade = selectors.request_get(user=request.user, pk=pk)
    form = forms.DecisionReasonForm(request.POST, prefix="reject")
    if form.is_valid():
        try:
            services.request_reject(
                request=upgrade, user=signed_in_user(request), reason=form.change_reason
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            messages.success(request, _("The request was rejected."))
            return redirect(upgrade)
    return _detail_page(request, upgrade, reject_form=form, status=400)


@login_required
@require_POST
def request_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    upgrade = selectors.request_get(user=request.user, pk=pk)
    form = forms.DecisionReasonForm(request.POST, prefix="revoke")
    if form.is_valid():
        try:
            services.request_revoke(
                request=upgrade, user=signed_in_user(request), reason=form.change_reason
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            messages.success(request, _("The grant was revoked."))
            return redirect(upgrade)
    return _detail_page(request, upgrade, revoke_form=form, status=400)


# --- inbox, grants, notifications -----------------------------------------------------------


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "approvals/inbox.html",
        {
            # Each request shows its evidence: 25 to a page keeps a page small.
            "requests": paginate(request, selectors.inbox(user=request.user), default_size=25),
            "changes": selectors.rule_changes_to_decide(user=request.user),
            "now": timezone.now(),
        },
    )


@login_required
def project_grants(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_get(user=request.user, slug=slug)
    return render(
        request,
        "approvals/project_grants.html",
        {
            "project": project,
            "grants": paginate(
                request, selectors.project_grants(project=project, at=timezone.now())
            ),
            "may_file": selectors.user_may_file_for(user=request.user, project=project),
        },
    )


@login_required
def notification_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        services.notifications_mark_read(user=signed_in_user(request))
        return redirect("notification_list")
    return render(
        request,
        "approvals/notification_list.html",
        {"notifications": paginate(request, selectors.notification_list(user=request.user))},
    )


# --- policies -------------------------------------------------------------------------------


@login_required
def policy_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "approvals/policy_list.html",
        {"policies": selectors.policy_list(), "can_edit": user_can_edit_rules(request.user)},
    )


def _require_ops(user: Any) -> None:
    if not user_can_edit_rules(user):
        raise PermissionDenied(_("Only ops may change the approval policies."))


def _policy_form_page(
    request: HttpRequest,
    form: Any,
    change_form: Any,
    *,
    title: str,
    policy: ApprovalPolicy | None = None,
) -> HttpResponse:
    return render(
        request,
        "governance/form.html",
        {
            "form": form,
            "change_form": change_form,
            "title": title,
            "cancel_url": reverse("approval_policy_list"),
            "object": policy,
        },
    )


@login_required
def policy_create(request: HttpRequest) -> HttpResponse:
    """A new policy is proposed: a rule change that someone else approves."""
    _require_ops(request.user)
    form = forms.PolicyCreateForm(posted(request))
    change_form = RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        response = propose(
            request,
            rule_object_propose_create,
            form=form,
            change_form=change_form,
            reason=form.change_reason,
            model=ApprovalPolicy,
            data=form.service_data(),
        )
        if response is not None:
            return response
    return _policy_form_page(request, form, change_form, title=_("New approval policy"))


@login_required
def policy_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Submitting proposes a change of the fields that differ, applied once someone else
    approves it."""
    policy = selectors.policy_get(user=request.user, pk=pk)
    _require_ops(request.user)
    form = forms.PolicyForm(posted(request), instance=policy)
    change_form = RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        if not form.changed_rule_fields():
            messages.info(
                request, _("Nothing changed: “%(object)s” is as it was.") % {"object": policy}
            )
            return redirect("approval_policy_list")
        response = propose(
            request,
            rule_object_propose_update,
            form=form,
            change_form=change_form,
            obj=policy,
            reason=form.change_reason,
            data=form.service_data(),
        )
        if response is not None:
            return response
    return _policy_form_page(
        request,
        form,
        change_form,
        title=_("Propose a change to approval policy “%(object)s”") % {"object": policy},
        policy=policy,
    )


@login_required
def policy_history(request: HttpRequest, pk: int) -> HttpResponse:
    policy = selectors.policy_get(user=request.user, pk=pk)
    return render(
        request,
        "approvals/policy_history.html",
        {"object": policy, "sections": history_section_pages(request, policy)},
    )
