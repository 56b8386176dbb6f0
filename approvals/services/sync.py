"""Keeping requests in step with their grants, and telling people before and at expiry.

``requests_sync`` runs every minute (beat). It first brings the grants up to date through
governance's own idempotent ``grants_transition``, then moves each approved or active
request to its grant's state. A second run at the same instant changes nothing and sends
nothing: the state checks, the once-only timeline rows and the unique expiry notifications
see to that.
"""

from collections import Counter
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils.translation import gettext as _

from approvals.models import (
    EventAction,
    NotificationEvent,
    RequestState,
    UpgradeRequest,
)
from approvals.selectors import EXPIRY_WARNING
from governance.models import GrantState, User
from governance.services import grants_transition, system_user

from ._common import deciders, event_add, notify, when_text


def _save(request: UpgradeRequest, *, state: RequestState, reason: str, actor: User) -> None:
    request.state = state
    request._history_user = actor  # type: ignore[attr-defined]
    request._change_reason = reason  # type: ignore[attr-defined]
    request.save()


@transaction.atomic
def requests_sync(*, now: datetime) -> dict[str, int]:
    """Follow the grants' states at ``now``; return how many requests moved, by new state."""
    grants_transition(now=now)
    actor = system_user()
    moved: Counter[str] = Counter()
    following = (
        UpgradeRequest.objects.select_for_update(of=("self",))
        .select_related("grant", "project", "requester")
        .filter(state__in=[RequestState.APPROVED, RequestState.ACTIVE], grant__isnull=False)
        .order_by("pk")
    )
    for request in following:
        grant = request.grant
        assert grant is not None
        values = {
            "kind": request.get_kind_display().lower(),
            "project": request.project,
            "end": when_text(grant.ends_at),
        }
        if grant.state == GrantState.ACTIVE and request.state == RequestState.APPROVED:
            _save(request, state=RequestState.ACTIVE, reason=_("The grant began."), actor=actor)
            event_add(request=request, actor=actor, action=EventAction.ACTIVATED, at=now)
            notify(
                users=[request.requester],
                request=request,
                event=NotificationEvent.ACTIVATED,
                text=_("Your %(kind)s for %(project)s is now in force, until %(end)s.") % values,
                at=now,
            )
        elif grant.state == GrantState.EXPIRED:
            if request.state == RequestState.APPROVED:
                # Started and ended between two runs: the timeline still shows both.
                event_add(
                    request=request,
                    actor=actor,
                    action=EventAction.ACTIVATED,
                    at=grant.starts_at,
                )
            _save(request, state=RequestState.EXPIRED, reason=_("The grant ended."), actor=actor)
            event_add(request=request, actor=actor, action=EventAction.EXPIRED, at=now)
            notify(
                users=[request.requester, *deciders(request)],
                request=request,
                event=NotificationEvent.EXPIRED,
                text=_("The %(kind)s for %(project)s ended on %(end)s.") % values,
                at=now,
            )
        elif grant.state == GrantState.REVOKED:
            reason = _("The grant was revoked.")
            _save(request, state=RequestState.REVOKED, reason=reason, actor=actor)
            event_add(
                request=request, actor=actor, action=EventAction.REVOKED, at=now, comment=reason
            )
            notify(
                users=[request.requester, *deciders(request)],
                request=request,
                event=NotificationEvent.REVOKED,
                text=_("The %(kind)s for %(project)s was revoked.") % values,
                at=now,
            )
        else:
            continue
        moved[request.state] += 1

    # A day before the end, once; not for grants that were shorter than a day to begin with.
    ending = (
        UpgradeRequest.objects.select_related("grant", "project", "requester")
        .filter(
            state__in=[RequestState.APPROVED, RequestState.ACTIVE],
            grant__ends_at__gt=now,
            grant__ends_at__lte=now + EXPIRY_WARNING,
        )
        .filter(grant__ends_at__gt=F("grant__starts_at") + EXPIRY_WARNING)
        .exclude(notifications__event=NotificationEvent.ENDING_SOON)
        .order_by("pk")
    )
    for request in ending:
        assert request.grant is not None
        notify(
            users=[request.requester, *deciders(request)],
            request=request,
            event=NotificationEvent.ENDING_SOON,
            text=_(
                "The %(kind)s for %(project)s ends on %(end)s. Ask for an extension if the "
                "work needs more time."
            )
            % {
                "kind": request.get_kind_display().lower(),
                "project": request.project,
                "end": when_text(request.grant.ends_at),
            },
            at=now,
        )
        moved["reminded"] += 1
    return dict(moved)
