"""Telling people when a request's grant starts and ends, a day before the end, and when it
was revoked outside the request.

A request's state is not stored: it follows its grant's time box (``UpgradeRequest.state_at``).
``requests_sync`` runs every minute (beat). It brings the grants up to date through
governance's own idempotent ``grants_transition`` (which queues the scheduler syncs), then
adds the timeline row and the notification of each start, end and revocation it has not
announced yet. A second run at the same instant changes nothing and sends nothing: the
once-only timeline rows and the unique expiry notifications see to that.
"""

from collections import Counter
from datetime import datetime

from django.db import transaction
from django.db.models import F, Q
from django.utils.translation import gettext_noop

from approvals.models import (
    EventAction,
    NotificationEvent,
    RequestStage,
    RequestState,
    UpgradeRequest,
)
from approvals.selectors import EXPIRY_WARNING
from governance.models.texts import message
from governance.services import grants_transition, system_user

from ._common import deciders, event_add, notify

# The timeline rows that close a request's announcements.
_CLOSING = (EventAction.EXPIRED, EventAction.REVOKED)


@transaction.atomic
def requests_sync(*, now: datetime) -> dict[str, int]:
    """Announce the grant starts, ends and revocations up to ``now``; return what was said."""
    grants_transition(now=now)
    actor = system_user()
    moved: Counter[str] = Counter()
    following = (
        UpgradeRequest.objects.select_for_update(of=("self",))
        .select_related("grant", "project", "requester")
        .prefetch_related("events")
        .filter(stage=RequestStage.APPROVED)
        .filter(Q(grant__starts_at__lte=now) | Q(grant__revoked_at__lte=now))
        .exclude(events__action__in=_CLOSING)
        .order_by("pk")
    )
    for request in following:
        grant = request.grant
        assert grant is not None
        state = request.state_at(now)
        done = {event.action for event in request.events.all()}
        started = grant.revoked_at is None or grant.revoked_at > grant.starts_at
        if state == RequestState.ACTIVE and EventAction.ACTIVATED not in done:
            event_add(request=request, actor=actor, action=EventAction.ACTIVATED, at=now)
            notify(
                users=[request.requester],
                request=request,
                event=NotificationEvent.ACTIVATED,
                template=gettext_noop(
                    "Your %(kind)s for %(project)s is now in force, until %(end)s."
                ),
                at=now,
                end=grant.ends_at,
            )
        elif state == RequestState.EXPIRED:
            if EventAction.ACTIVATED not in done:
                # Started and ended between two runs: the timeline still shows both.
                event_add(
                    request=request,
                    actor=actor,
                    action=EventAction.ACTIVATED,
                    at=grant.starts_at,
                )
            event_add(request=request, actor=actor, action=EventAction.EXPIRED, at=now)
            notify(
                users=[request.requester, *deciders(request)],
                request=request,
                event=NotificationEvent.EXPIRED,
                template=gettext_noop("The %(kind)s for %(project)s ended on %(end)s."),
                at=now,
                end=grant.ends_at,
            )
        elif state == RequestState.REVOKED:
            # Revoked on the grant itself (``request_revoke`` writes its own row).
            if started and EventAction.ACTIVATED not in done:
                event_add(
                    request=request, actor=actor, action=EventAction.ACTIVATED, at=grant.starts_at
                )
            event_add(
                request=request,
                actor=actor,
                action=EventAction.REVOKED,
                at=now,
                said=message(gettext_noop("The grant was revoked.")),
            )
            notify(
                users=[request.requester, *deciders(request)],
                request=request,
                event=NotificationEvent.REVOKED,
                template=gettext_noop("The %(kind)s for %(project)s was revoked."),
                at=now,
            )
        else:
            continue
        moved[state] += 1

    reminded = _ending_soon_remind(now=now)
    if reminded:  # a key only for what happened, as for the transitions
        moved["reminded"] += reminded
    return dict(moved)


def _ending_soon_remind(*, now: datetime) -> int:
    """Remind the requester and the deciders of the grants that end within a day."""
    reminded = 0
    # A day before the end, once; not for grants that were shorter than a day to begin with.
    ending = (
        UpgradeRequest.objects.select_related("grant", "project", "requester")
        .filter(
            stage=RequestStage.APPROVED,
            grant__revoked_at__isnull=True,
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
            template=gettext_noop(
                "The %(kind)s for %(project)s ends on %(end)s. Ask for an extension if the "
                "work needs more time."
            ),
            at=now,
            end=request.grant.ends_at,
        )
        reminded += 1
    return reminded
