"""Requests: create, submit, withdraw, approve, reject, revoke, extend.

Every function that changes a request locks its row first (``select_for_update``), then
checks the state it found: two approvers deciding at once are serialised, and the second
finds the request already decided. ``now`` is a parameter everywhere so tests (and the beat
task) control the clock.
"""

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from approvals import selectors
from approvals.models import (
    Approval,
    ApproverRule,
    Decision,
    EventAction,
    NotificationEvent,
    RequestAction,
    RequestStage,
    UpgradeRequest,
)
from governance.models import GrantState, Project, SiteRole, Terms, User
from governance.models.texts import message, message_english, message_plural, ngettext_noop
from governance.services import (
    governed_save,
    grant_create,
    grant_revoke,
    require_reason,
    require_text,
)

from ._checks import check_kind_fields, check_time_box, clean_job_ids, policy_of
from ._common import deciders, event_add, notify, when_text


def _locked(request: UpgradeRequest) -> UpgradeRequest:
    return (
        UpgradeRequest.objects.select_for_update(of=("self",))
        .select_related("project", "requester", "tier", "owner_approver", "grant")
        .get(pk=request.pk)
    )


def _locked_for(
    request: UpgradeRequest, user: User, action: RequestAction, now: datetime | None
) -> tuple[UpgradeRequest, datetime]:
    """The request locked, and the instant, once ``user`` may do ``action`` now: the same rule
    the pages ask (``request_action_blocker``); a 403 when they never may, a 400 when not now."""
    now = now or timezone.now()
    request = _locked(request)
    blocker = selectors.request_action_blocker(request=request, user=user, action=action, at=now)
    if blocker is not None:
        raise blocker.error()
    return request, now


# --- create and submit ----------------------------------------------------------------------


@transaction.atomic
def request_create(
    *,
    user: User,
    project: Project,
    terms: Terms,
    justification: str,
    business_impact: str,
    deadline: datetime | None = None,
    extends: UpgradeRequest | None = None,
    submit: bool = False,
    now: datetime | None = None,
) -> UpgradeRequest:
    """File a request as a draft (or submit it at once with ``submit=True``).

    Ops may file for any project; anyone else only for a project they belong to (a lead, a
    member, the project's CI service account). The time box is checked against the policy
    here already, so nobody drafts a request that cannot be submitted.
    """
    now = now or timezone.now()
    if not selectors.user_may_file_for(user=user, project=project):
        raise PermissionDenied(
            _("Only members of %(project)s (or ops) may file requests for it.")
            % {"project": project}
        )
    request = UpgradeRequest(
        **terms.replace(job_ids=tuple(clean_job_ids(list(terms.job_ids)))).fields(),
        project=project,
        requester=user,
        justification=require_text(
            justification,
            field="justification",
            message=_("Say why the work needs this, and why now."),
        ),
        business_impact=require_text(
            business_impact,
            field="business_impact",
            message=_("Say what happens to the business if the request is refused."),
        ),
        deadline=deadline,
        extends=extends,
        created_at=now,
    )
    if extends is not None:
        readable = selectors.requests_readable(
            UpgradeRequest.objects.filter(pk=extends.pk), user=user
        ).first()
        if readable is None:  # missing or another's: the same answer
            raise ValidationError(
                {"extends": _("No request #%(pk)d that you may extend.") % {"pk": extends.pk}}
            )
        request.extends = extends = readable
        _check_extension(request, extends, user=user, now=now)
    check_kind_fields(request, now=now)
    check_time_box(request, policy_of(request), now=now)
    governed_save(request, user=user, reason=gettext_noop("Filed"))
    event_add(request=request, actor=user, action=EventAction.CREATED, at=now)
    if extends is not None:
        event_add(
            request=extends,
            actor=user,
            action=EventAction.EXTENDED,
            at=now,
            said=message(gettext_noop("Extension: request #%(pk)d."), pk=request.pk),
        )
    if submit:
        request = request_submit(request=request, user=user, now=now)
    return request


def _check_extension(
    request: UpgradeRequest, old: UpgradeRequest, *, user: User, now: datetime
) -> None:
    if old.project_id != request.project.pk or old.kind != request.kind:
        raise ValidationError(
            {"extends": _("An extension is for the same project and the same kind of request.")}
        )
    blocker = selectors.request_action_blocker(
        request=old, user=user, action=RequestAction.EXTEND, at=now
    )
    if blocker is not None:
        raise ValidationError({"extends": blocker.message})


@transaction.atomic
def request_submit(
    *, request: UpgradeRequest, user: User, now: datetime | None = None
) -> UpgradeRequest:
    """Send a draft to its approvers, with the policy, the evidence and any flag fixed now."""
    request, now = _locked_for(request, user, RequestAction.SUBMIT, now)
    check_kind_fields(request, now=now)
    policy = policy_of(request)
    check_time_box(request, policy, now=now)

    tier = selectors.policy_tier(kind=request.kind, project=request.project, tier=request.tier)
    owner = tier.owner if tier is not None else None
    request.policy = policy
    request.approver_rule = policy.approver
    request.approvals_required = policy.approvals_required
    request.owner_approver = (
        owner
        if policy.approver == ApproverRule.TIER_OWNER
        and owner is not None
        and owner.pk != request.requester_id
        and owner.is_active
        else None
    )
    request.evidence = selectors.project_evidence(
        project=request.project, at=now, job_ids=list(request.job_ids or [])
    )
    count = request.evidence["exceptions_this_month"]
    request.flagged = count >= policy.monthly_flag_threshold
    request.flag_message = (
        message_plural(
            *ngettext_noop(
                "%(project)s already had %(count)d approved exception this month; the policy "
                "flags requests from %(limit)d on.",
                "%(project)s already had %(count)d approved exceptions this month; the policy "
                "flags requests from %(limit)d on.",
            ),
            number="count",
            project=str(request.project),
            count=count,
            limit=policy.monthly_flag_threshold,
        )
        if request.flagged
        else None
    )
    request.flag_reason = (
        message_english(request.flag_message)[:300] if request.flag_message else ""
    )
    request.stage = RequestStage.SUBMITTED
    request.submitted_at = now
    request.submitted_by = user
    governed_save(request, user=user, reason=gettext_noop("Submitted"))
    event_add(request=request, actor=user, action=EventAction.SUBMITTED, at=now)
    notify(
        users=_approvers(request),
        request=request,
        event=NotificationEvent.SUBMITTED,
        template=gettext_noop(
            "%(requester)s asks for a %(kind)s for %(project)s: waiting for your decision."
        ),
        at=now,
        requester=str(request.requester),
    )
    return request


def _approvers(request: UpgradeRequest) -> list[User]:
    """Everyone who may decide ``request``: its business owner and, where they may, ops."""
    people: list[User] = []
    if request.owner_approver is not None:
        people.append(request.owner_approver)
    if request.owner_approver is None or request.approvals_required > 1:
        people += list(
            User.objects.filter(is_active=True)
            .filter(Q(site_role=SiteRole.OPS) | Q(is_superuser=True))
            .order_by("username")
        )
    authors = {request.requester_id, request.submitted_by_id}
    return [user for user in people if user.pk not in authors]


# --- decisions ------------------------------------------------------------------------------


def _decision_add(
    request: UpgradeRequest, user: User, decision: Decision, comment: str, now: datetime
) -> Approval:
    """``user``'s decision on ``request``; nobody decides a request twice (a constraint)."""
    try:
        with transaction.atomic():
            return Approval.objects.create(
                request=request, approver=user, decision=decision, comment=comment, at=now
            )
    except IntegrityError:
        raise ValidationError(_("You have already decided this request.")) from None


@transaction.atomic
def request_approve(
    *, request: UpgradeRequest, user: User, comment: str = "", now: datetime | None = None
) -> UpgradeRequest:
    """Record ``user``'s approval; with enough approvals the request becomes a grant."""
    request, now = _locked_for(request, user, RequestAction.APPROVE, now)
    comment = (comment or "").strip()
    _decision_add(request, user, Decision.APPROVE, comment, now)
    event_add(request=request, actor=user, action=EventAction.APPROVAL, at=now, comment=comment)
    given = request.approvals_given
    if given < request.approvals_required:
        notify(
            users=[request.requester],
            request=request,
            event=NotificationEvent.APPROVAL,
            template=gettext_noop(
                "%(approver)s approved your %(kind)s for %(project)s (%(given)d of %(needed)d "
                "approvals)."
            ),
            at=now,
            approver=str(user),
            given=given,
            needed=request.approvals_required,
        )
        return request
    return _grant(request, user=user, now=now)


def _grant(request: UpgradeRequest, *, user: User, now: datetime) -> UpgradeRequest:
    if request.ends_at <= now:
        raise ValidationError(
            _("The requested period ended on %(end)s: reject the request instead.")
            % {"end": when_text(request.ends_at)}
        )
    grant = grant_create(
        user=user,
        reason=gettext_noop("Request #%(pk)d approved: %(justification)s")
        % {"pk": request.pk, "justification": request.justification[:200]},
        project=request.project,
        # Approved late: the grant starts now, not in the past the request asked for.
        terms=Terms.of(request).replace(starts_at=max(request.starts_at, now)),
        source=f"request:{request.pk}",
        now=now,
    )
    request.grant = grant
    request.decided_at = now
    active = grant.state == GrantState.ACTIVE
    request.stage = RequestStage.APPROVED
    governed_save(request, user=user, reason=gettext_noop("Approved"))
    event_add(request=request, actor=user, action=EventAction.APPROVED, at=now)
    if active:
        event_add(request=request, actor=user, action=EventAction.ACTIVATED, at=now)
        template = gettext_noop(
            "Your %(kind)s for %(project)s is approved and in force until %(end)s."
        )
    else:
        template = gettext_noop(
            "Your %(kind)s for %(project)s is approved; it starts on %(start)s and ends on %(end)s."
        )
    notify(
        users=[request.requester, *deciders(request)],
        request=request,
        event=NotificationEvent.APPROVED,
        template=template,
        at=now,
        start=grant.starts_at,
        end=grant.ends_at,
    )
    return request


@transaction.atomic
def request_reject(
    *, request: UpgradeRequest, user: User, reason: str, now: datetime | None = None
) -> UpgradeRequest:
    """Reject with a reason; one approver's rejection decides the request."""
    request, now = _locked_for(request, user, RequestAction.REJECT, now)
    reason = require_reason(
        reason, message=_("Say why the request is rejected: the requester reads it.")
    )
    _decision_add(request, user, Decision.REJECT, reason, now)
    request.stage = RequestStage.REJECTED
    request.decided_at = now
    governed_save(request, user=user, reason=reason)
    event_add(request=request, actor=user, action=EventAction.REJECTED, at=now, comment=reason)
    notify(
        users=[request.requester, *deciders(request)],
        request=request,
        event=NotificationEvent.REJECTED,
        template=gettext_noop("%(approver)s rejected the %(kind)s for %(project)s: %(reason)s"),
        at=now,
        approver=str(user),
        reason=reason[:200],
    )
    return request


@transaction.atomic
def request_withdraw(
    *, request: UpgradeRequest, user: User, comment: str = "", now: datetime | None = None
) -> UpgradeRequest:
    """The requester (or the project's lead, or ops) takes back a draft or pending request."""
    request, now = _locked_for(request, user, RequestAction.WITHDRAW, now)
    was_submitted = request.stage == RequestStage.SUBMITTED
    comment = (comment or "").strip()
    request.stage = RequestStage.WITHDRAWN
    request.decided_at = now
    governed_save(request, user=user, reason=comment or gettext_noop("Withdrawn"))
    event_add(request=request, actor=user, action=EventAction.WITHDRAWN, at=now, comment=comment)
    if was_submitted:
        notify(
            users=[*_approvers(request), request.requester],
            request=request,
            event=NotificationEvent.WITHDRAWN,
            template=gettext_noop("%(user)s withdrew the %(kind)s for %(project)s."),
            at=now,
            user=str(user),
        )
    return request


@transaction.atomic
def request_revoke(
    *, request: UpgradeRequest, user: User, reason: str, now: datetime | None = None
) -> UpgradeRequest:
    """Ops end an approved or active request early; its grant is revoked at ``now``."""
    request, now = _locked_for(request, user, RequestAction.REVOKE, now)
    reason = require_reason(reason)
    assert request.grant is not None  # an approved request has its grant (a constraint)
    # The request is revoked because its grant is: its state follows the grant's.
    request.grant = grant_revoke(grant=request.grant, user=user, reason=reason, now=now)
    event_add(request=request, actor=user, action=EventAction.REVOKED, at=now, comment=reason)
    notify(
        users=[request.requester, *deciders(request)],
        request=request,
        event=NotificationEvent.REVOKED,
        template=gettext_noop("%(user)s revoked the %(kind)s for %(project)s: %(reason)s"),
        at=now,
        user=str(user),
        reason=reason[:200],
    )
    return request
