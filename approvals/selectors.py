"""Reads of requests, policies, grants and notifications, shaped for pages and the API.

Rules (tiers, quotas, policies, grants in force) are public inside the organisation, but a
request's justification, business impact and evidence belong to its project: a request is
read by the project's members, the requester, its approvers (the tier's business owner and
whoever decided it) and ops, and by nobody else (``requests_readable``: ``request_get`` and
the list selectors apply it, for pages and API alike). Who may *act* on a request is
``request_action_blocker``, which the pages ask to show the buttons and the services ask
before they write.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals.models import (
    GRANTED_STATES,
    TIER_KINDS,
    Approval,
    ApprovalPolicy,
    ApproverRule,
    Decision,
    Notification,
    RequestAction,
    RequestStage,
    RequestState,
    UpgradeRequest,
    UpgradeRequestQuerySet,
    grant_summary,
)
from governance.models import (
    ChangeStatus,
    Grant,
    GrantState,
    Membership,
    PriorityTier,
    Project,
    ProjectRole,
    RuleChange,
    Terms,
    grant_in_force_q,
)
from governance.selectors import (
    Blocker,
    Sorts,
    approval_problem,
    default_tier,
    effective_rules,
    pool_usage,
    rule_change_list,
    sorted_by,
    through_account_problem,
    user_can_read_rules,
)

EVIDENCE_WINDOW_DAYS = 90
EVIDENCE_USAGE_DAYS = 30
EXPIRY_WARNING = timedelta(hours=24)


# --- requests -------------------------------------------------------------------------------


def _request_queryset() -> UpgradeRequestQuerySet:
    return UpgradeRequest.objects.select_related(
        "project",
        "requester",
        "tier",
        "pool",
        "flavor",
        "preemption_class",
        "owner_approver",
        "grant",
    )


REQUEST_SORTS: Sorts = {
    "-created_at": (gettext_lazy("Newest first"), ("-created_at", "-pk")),
    "created_at": (gettext_lazy("Oldest first"), ("created_at", "pk")),
    "ends_at": (gettext_lazy("Ending first"), ("ends_at", "pk")),
}


def request_list(
    *,
    state: str | None = None,
    kind: str | None = None,
    project: Project | None = None,
    requester: Any = None,
    sort: str | None = None,
) -> UpgradeRequestQuerySet:
    """Requests with what the list pages show (one query plus one prefetch), filtered as the
    page and the API ask, newest first unless ``sort`` says otherwise."""
    requests = _request_queryset()
    if state:
        requests = requests.in_state(state)
    if kind:
        requests = requests.filter(kind=kind)
    if project is not None:
        requests = requests.filter(project=project)
    if requester is not None:
        requests = requests.filter(requester=requester)
    requests = requests.prefetch_related("approvals__approver")
    return sorted_by(requests, sort=sort, sorts=REQUEST_SORTS)  # type: ignore[return-value]


def requests_readable(queryset: QuerySet[UpgradeRequest], *, user: Any) -> QuerySet[UpgradeRequest]:
    """The requests of ``queryset`` that ``user`` may read (see the module's docstring)."""
    if not user_can_read_rules(user):
        return queryset.none()
    if user.is_ops:
        return queryset
    return queryset.filter(
        Q(requester=user)
        | Q(owner_approver=user)
        | Exists(Membership.objects.filter(project=OuterRef("project"), user=user))
        | Exists(Approval.objects.filter(request=OuterRef("pk"), approver=user))
    )


def request_list_for(*, user: Any, **filters: Any) -> QuerySet[UpgradeRequest]:
    """``request_list(**filters)`` as ``user`` may read it: what the list page and the list
    API show."""
    return requests_readable(request_list(**filters), user=user)


def request_get(*, user: Any, pk: int | str) -> UpgradeRequest:
    """The request with its timeline and approvals; 404 when missing or not readable."""
    if not user_can_read_rules(user):
        raise Http404
    try:
        return requests_readable(
            _request_queryset()
            .select_related("extends", "policy", "policy__tier")
            .prefetch_related("events__actor", "approvals__approver", "extensions"),
            user=user,
        ).get(pk=pk)
    except (UpgradeRequest.DoesNotExist, ValueError, TypeError):
        raise Http404 from None


def inbox(*, user: Any) -> QuerySet[UpgradeRequest]:
    """Submitted requests waiting for ``user``'s decision, the oldest first (one query, one
    prefetch; counted in SQL, so the inbox costs the same however many requests wait).

    The filter says in SQL what ``approval_blocker`` says of each request (as ``state_q``
    says ``state_at``): not filed by ``user``, not decided by ``user`` yet, ``user`` is the
    tier's business owner or ops, and when the business owner holds a seat and ``user`` is
    not them, a seat for ops is still free. ``test_inbox`` checks that both agree.
    """
    if not user_can_read_rules(user):
        return UpgradeRequest.objects.none()
    mine = Q(owner_approver=user)
    if user.is_ops:
        mine |= (
            Q(approver_rule=ApproverRule.OPS)
            | Q(owner_approver__isnull=True)
            | Q(approvals_required__gt=1)
        )
    approved_by_others = (
        Approval.objects.filter(request=OuterRef("pk"), decision=Decision.APPROVE)
        .exclude(approver=OuterRef("owner_approver"))
        .order_by()
        .values("request")
        .annotate(total=Count("*"))
        .values("total")
    )
    seat_free = (
        Q(owner_approver__isnull=True)
        | Q(owner_approver=user)
        | Q(approved_by_others__lt=F("approvals_required") - 1)
    )
    return (
        _request_queryset()
        .filter(stage=RequestStage.SUBMITTED)
        .filter(mine)
        .exclude(requester=user)
        .exclude(Exists(Approval.objects.filter(request=OuterRef("pk"), approver=user)))
        .alias(approved_by_others=Coalesce(Subquery(approved_by_others), 0))
        .filter(seat_free)
        .prefetch_related("approvals__approver")
        .order_by("submitted_at", "pk")
    )


def inbox_count(*, user: Any) -> int:
    return inbox(user=user).count()


def _not_now(request: UpgradeRequest, state: RequestState, *, decide: bool = False) -> Blocker:
    text = (
        _("This request is %(state)s: there is nothing to decide.")
        if decide
        else _("This request is %(state)s: it cannot be changed that way.")
    )
    return Blocker(text % {"state": state.label.lower()})


def _decision_blocker(
    *, request: UpgradeRequest, user: Any, state: RequestState, approve: bool
) -> Blocker | None:
    if not user_can_read_rules(user):
        return Blocker(_("Sign in to decide requests."), forbidden=True)
    if request.requester_id == user.pk:
        return Blocker(_("You filed this request: someone else must decide it."), forbidden=True)
    if request.submitted_by_id == user.pk:
        return Blocker(
            _(
                "Four eyes: you submitted this request for %(requester)s, so it counts as "
                "yours: someone else must decide it."
            )
            % {"requester": request.requester},
            forbidden=True,
        )
    problem = through_account_problem(user=user, authors=[request.requester], action=_("decide"))
    if problem is not None:
        return Blocker(problem, forbidden=True)
    is_owner = request.owner_approver_id == user.pk
    if not (is_owner or user.is_ops):
        return Blocker(
            _("Only %(who)s may decide this request.") % {"who": approvers_label(request)},
            forbidden=True,
        )
    if state != RequestState.SUBMITTED:
        return _not_now(request, state, decide=True)
    decisions = list(request.approvals.all())
    if any(approval.approver_id == user.pk for approval in decisions):
        return Blocker(_("You have already decided this request."))
    if approve and request.owner_approver_id is not None and not is_owner:
        # The business owner holds one of the seats; ops fill the others.
        by_others = sum(
            1
            for approval in decisions
            if approval.decision == Decision.APPROVE
            and approval.approver_id != request.owner_approver_id
        )
        if by_others >= request.approvals_required - 1:
            return Blocker(
                _("This request now waits for the tier's business owner, %(owner)s.")
                % {"owner": request.owner_approver}
            )
    return None


def request_action_blocker(
    *, request: UpgradeRequest, user: Any, action: RequestAction | str, at: datetime | None = None
) -> Blocker | None:
    """Why ``user`` may not do ``action`` to ``request`` at ``at``, or ``None`` when they may.

    The one rule: pages ask it to show a button, the services ask it of the locked row
    before they write. Reads ``request.approvals`` (prefetched by the selectors above).
    """
    state = request.state_at(at or timezone.now())
    action = RequestAction(action)
    if getattr(user, "is_service_account", False) and action in (
        RequestAction.APPROVE,
        RequestAction.REJECT,
        RequestAction.REVOKE,
    ):
        # A pipeline's or an ops tool's token files and withdraws; it never decides.
        return Blocker(
            _("A service account may not approve, reject or revoke anything."), forbidden=True
        )
    if action in (RequestAction.APPROVE, RequestAction.REJECT):
        return _decision_blocker(
            request=request, user=user, state=state, approve=action == RequestAction.APPROVE
        )
    if action == RequestAction.SUBMIT:
        if not (user_can_read_rules(user) and (request.requester_id == user.pk or user.is_ops)):
            return Blocker(_("Only the requester may submit this request."), forbidden=True)
        allowed: tuple[RequestState, ...] = (RequestState.DRAFT,)
    elif action == RequestAction.WITHDRAW:
        if not user_may_withdraw(user=user, request=request):
            return Blocker(
                _("Only the requester, a lead of the project or ops may withdraw this request."),
                forbidden=True,
            )
        allowed = (RequestState.DRAFT, RequestState.SUBMITTED)
    elif action == RequestAction.REVOKE:
        if not (user_can_read_rules(user) and user.is_ops):
            return Blocker(_("Only ops may revoke a grant."), forbidden=True)
        allowed = GRANTED_STATES
    else:
        if not user_may_file_for(user=user, project=request.project):
            return Blocker(
                _("Only members of %(project)s (or ops) may file requests for it.")
                % {"project": request.project},
                forbidden=True,
            )
        if state not in GRANTED_STATES:
            return Blocker(
                _("Only an approved or active request can be extended (#%(pk)d is %(state)s).")
                % {"pk": request.pk, "state": state.label.lower()}
            )
        return None
    return None if state in allowed else _not_now(request, state)


def request_action_blockers(
    *, request: UpgradeRequest, user: Any, at: datetime | None = None
) -> dict[str, Blocker | None]:
    """``request_action_blocker`` for every action (for a request's page)."""
    at = at or timezone.now()
    return {
        action.value: request_action_blocker(request=request, user=user, action=action, at=at)
        for action in RequestAction
    }


def approval_blocker(*, request: UpgradeRequest, user: Any) -> Blocker | None:
    """Why ``user`` may not approve ``request`` now, or ``None`` when they may."""
    return request_action_blocker(request=request, user=user, action=RequestAction.APPROVE)


def approvers_label(request: UpgradeRequest) -> str:
    if request.approver_rule == ApproverRule.TIER_OWNER and request.owner_approver_id:
        if request.approvals_required > 1:
            return _("%(owner)s (the tier's business owner) and %(count)d more from ops") % {
                "owner": request.owner_approver,
                "count": request.approvals_required - 1,
            }
        return _("%(owner)s (the tier's business owner)") % {"owner": request.owner_approver}
    if request.approvals_required > 1:
        return _("%(count)d distinct people from ops") % {"count": request.approvals_required}
    return _("ops")


def user_may_file_for(*, user: Any, project: Project) -> bool:
    """Ops may file for any project; anyone else for a project they belong to."""
    if not user_can_read_rules(user):
        return False
    return bool(user.is_ops or Membership.objects.filter(user=user, project=project).exists())


def user_may_withdraw(*, user: Any, request: UpgradeRequest) -> bool:
    if not user_can_read_rules(user):
        return False
    return bool(
        user.is_ops
        or request.requester_id == user.pk
        or Membership.objects.filter(
            user=user, project_id=request.project_id, role=ProjectRole.LEAD
        ).exists()
    )


def projects_user_may_file_for(*, user: Any) -> QuerySet[Project]:
    if not user_can_read_rules(user):
        return Project.objects.none()
    if user.is_ops:
        return Project.objects.order_by("name")
    return Project.objects.filter(memberships__user=user).distinct().order_by("name")


def extension_initial(*, request: UpgradeRequest) -> dict[str, Any]:
    """What an extension of ``request`` starts from: the same ask, from where it ends."""
    initial = Terms.of(request).fields()
    del initial["ends_at"]
    return {
        **initial,
        "project": request.project,
        "starts_at": request.grant.ends_at if request.grant else request.ends_at,
        "extends": request,
    }


# --- policies -------------------------------------------------------------------------------


def policy_list() -> QuerySet[ApprovalPolicy]:
    return ApprovalPolicy.objects.select_related("tier", "tier__owner").order_by(
        "kind", "-tier__score", "pk"
    )


def policy_get(*, user: Any, pk: int | str) -> ApprovalPolicy:
    if not user_can_read_rules(user):
        raise Http404
    try:
        return ApprovalPolicy.objects.select_related("tier").get(pk=pk)
    except (ApprovalPolicy.DoesNotExist, ValueError, TypeError):
        raise Http404 from None


def policy_tier(*, kind: str, project: Project, tier: PriorityTier | None) -> PriorityTier | None:
    """The tier a policy is chosen by: the target tier, or the project's own tier."""
    if kind in TIER_KINDS:
        return tier
    return project.tier or default_tier()


def policy_for(*, kind: str, tier: PriorityTier | None) -> ApprovalPolicy | None:
    """The policy of ``kind`` for ``tier``, or the kind's policy for every other tier."""
    policies = ApprovalPolicy.objects.select_related("tier", "tier__owner").filter(kind=kind)
    policies = (
        policies.filter(Q(tier=tier) | Q(tier__isnull=True))
        if tier
        else policies.filter(tier__isnull=True)
    )
    found = {policy.tier_id: policy for policy in policies}
    return found.get(tier.pk if tier else None) or found.get(None)


@dataclass(frozen=True)
class PolicyLimit:
    """What the request form shows before anyone submits: one row per kind and tier."""

    kind: str
    kind_label: str
    tier: PriorityTier | None
    policy: ApprovalPolicy


def policy_limits() -> list[PolicyLimit]:
    return [
        PolicyLimit(
            kind=policy.kind,
            kind_label=policy.get_kind_display(),
            tier=policy.tier,
            policy=policy,
        )
        for policy in policy_list()
    ]


# --- evidence -------------------------------------------------------------------------------


def _month_start(at: datetime) -> datetime:
    return at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def exceptions_this_month(*, project: Project, at: datetime) -> int:
    """Approved exceptions (grants) of ``project`` that start in the calendar month of ``at``."""
    start = _month_start(at)
    end = (start + timedelta(days=32)).replace(day=1)
    return Grant.objects.filter(project=project, starts_at__gte=start, starts_at__lt=end).count()


def _ref(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    return {"slug": obj.slug, "name": obj.name}


def _hook(name: str) -> Any:
    """A callable named by a setting (the workload side lives in an app approvals may not
    import); None when the setting is empty."""
    path = getattr(settings, name, "")
    return import_string(path) if path else None


def workload_evidence(
    *, project: Project, at: datetime, job_ids: list[str] | None = None
) -> dict[str, Any]:
    """Usage against guarantee and maximum, waits by category and the named jobs' state, as
    plain data from ``ARBITER_WORKLOAD_EVIDENCE`` and ``ARBITER_JOBS_STATUS``."""
    summary = _hook("ARBITER_WORKLOAD_EVIDENCE")
    status = _hook("ARBITER_JOBS_STATUS")
    data: dict[str, Any] = {"usage": None, "recent_waits": None, "jobs": None}
    if summary is not None:
        found = summary(project=project, days=EVIDENCE_USAGE_DAYS, at=at)
        data["usage"] = {key: value for key, value in found.items() if key != "waits"}
        data["recent_waits"] = found.get("waits", [])
    if status is not None and job_ids:
        data["jobs"] = status(project=project, job_ids=list(job_ids))
    return data


def project_evidence(
    *, project: Project, at: datetime, job_ids: list[str] | None = None
) -> dict[str, Any]:
    """What an approver decides on, as JSON: stored on the request when it is submitted.

    The project's tier and quotas as the effective rules have them at ``at`` (base rules
    plus active grants), the pool's capacity and commitment next to each quota, and the
    project's approved exceptions of the last 90 days. Usage, recent waits and the named
    jobs' state come from the workload evidence (``workload_evidence``); ``None`` when no
    collector is configured, never made up.
    """
    rules = effective_rules(at=at, project_slugs=[project.slug])
    effective = rules.projects.get(project.slug)
    pools = {(use.pool.pk, use.flavor.pk): use for use in pool_usage()}
    quotas = []
    tier = None
    if effective is not None:
        tier = effective.tier
        for quota in effective.quotas:
            use = pools.get((quota.quota.pool_id, quota.quota.flavor_id))
            quotas.append(
                {
                    "pool": _ref(quota.quota.pool),
                    "flavor": _ref(quota.quota.flavor),
                    "guarantee": quota.guarantee,
                    "borrow_limit": quota.borrow_limit,
                    "maximum": quota.maximum,
                    "lending_limit": quota.lending_limit,
                    "preemption_class": {
                        **(_ref(quota.preemption_class) or {}),
                        "kind": quota.preemption_class.kind,
                    },
                    "changed_by_grants": quota.changed_by_grants,
                    "pool_capacity": use.capacity if use else None,
                    "pool_committed": use.committed if use else None,
                }
            )
    since = at - timedelta(days=EVIDENCE_WINDOW_DAYS)
    recent = (
        Grant.objects.filter(project=project, starts_at__lte=at, ends_at__gte=since)
        .select_related("tier", "pool", "flavor", "preemption_class")
        .order_by("-starts_at", "-pk")
    )
    exceptions = [
        {
            "id": grant.pk,
            "kind": grant.kind,
            "kind_label": str(grant.get_kind_display()),
            "summary": grant_summary(grant),
            "starts_at": grant.starts_at.isoformat(),
            "ends_at": grant.ends_at.isoformat(),
            "state": grant.state,
            "source": grant.source,
        }
        for grant in recent
    ]
    return {
        "captured_at": at.isoformat(),
        "tier": {**(_ref(tier) or {}), "score": tier.score} if tier else None,
        "base_tier": _ref(project.tier),
        "quotas": quotas,
        **workload_evidence(project=project, at=at, job_ids=job_ids),
        "exceptions_window_days": EVIDENCE_WINDOW_DAYS,
        "recent_exceptions": exceptions,
        "exceptions_this_month": exceptions_this_month(project=project, at=at),
    }


# --- grants of a project --------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectGrant:
    grant: Grant
    request: UpgradeRequest | None
    in_force: bool
    ends_soon: bool

    @property
    def summary(self) -> str:
        return grant_summary(self.grant)


def project_grants(*, project: Project, at: datetime) -> list[ProjectGrant]:
    """The project's grants in force at ``at`` or still to start, by end (two queries)."""
    grants = (
        Grant.objects.filter(project=project, ends_at__gt=at)
        .exclude(state__in=[GrantState.REVOKED, GrantState.EXPIRED])
        .select_related("project", "tier", "pool", "flavor", "preemption_class")
        .order_by("ends_at", "pk")
    )
    requests = {
        request.grant_id: request
        for request in UpgradeRequest.objects.filter(grant__in=grants).select_related("requester")
    }
    return [
        ProjectGrant(
            grant=grant,
            request=requests.get(grant.pk),
            in_force=grant.is_active_at(at),
            ends_soon=grant.ends_at - at <= EXPIRY_WARNING,
        )
        for grant in grants
    ]


GRANT_SORTS: Sorts = {
    "-starts_at": (gettext_lazy("Newest first"), ("-starts_at", "-pk")),
    "ends_at": (gettext_lazy("Ending first"), ("ends_at", "pk")),
}


def _grant_queryset() -> QuerySet[Grant]:
    return Grant.objects.select_related(
        "project", "tier", "pool", "flavor", "preemption_class"
    ).annotate(
        request_id=Subquery(UpgradeRequest.objects.filter(grant=OuterRef("pk")).values("pk")[:1])
    )


def grant_list(
    *,
    user: Any,
    project: Project | None = None,
    at: datetime | None = None,
    kind: str | None = None,
    state: str | None = None,
    sort: str | None = None,
) -> QuerySet[Grant]:
    """Grants (rules, readable by everyone who reads the rules), newest first; with ``at``
    only those in force at that instant (started, not ended, not revoked by then)."""
    if not user_can_read_rules(user):
        return Grant.objects.none()
    grants = _grant_queryset()
    if project is not None:
        grants = grants.filter(project=project)
    if at is not None:
        grants = grants.filter(grant_in_force_q(at))
    if kind:
        grants = grants.filter(kind=kind)
    if state:
        grants = grants.filter(state=state)
    return sorted_by(grants, sort=sort, sorts=GRANT_SORTS)


def grant_get(*, user: Any, pk: int | str) -> Grant:
    """One grant; 404 when missing or the user reads no rules."""
    if not user_can_read_rules(user):
        raise Http404
    try:
        return _grant_queryset().get(pk=pk)
    except (Grant.DoesNotExist, ValueError, TypeError):
        raise Http404 from None


# --- notifications --------------------------------------------------------------------------


def notification_list(*, user: Any) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user).order_by("-created_at", "-pk")


def unread_count(*, user: Any) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


# Proposed rule changes the inbox shows at most (the change list has the rest).
INBOX_CHANGES = 25


def rule_changes_to_decide(*, user: Any) -> list[RuleChange]:
    """The proposed rule changes ``user`` may approve, the oldest first: the inbox lists them
    next to the requests, each with its what-if replay."""
    if not (getattr(user, "is_ops", False) or getattr(user, "is_approver", False)):
        return []
    proposed = rule_change_list(status=ChangeStatus.PROPOSED, sort="created_at")[:INBOX_CHANGES]
    return [change for change in proposed if approval_problem(change=change, user=user) is None]
