"""Upgrade requests read: the list and its sorts, what a user may read, the inbox, what blocks
an action on a request and who may take it."""

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals.models import (
    GRANTED_STATES,
    Approval,
    ApproverRule,
    Decision,
    RequestAction,
    RequestStage,
    RequestState,
    UpgradeRequest,
    UpgradeRequestQuerySet,
)
from governance.models import (
    Membership,
    Project,
    ProjectRole,
    Terms,
)
from governance.selectors import (
    Blocker,
    Sorts,
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
