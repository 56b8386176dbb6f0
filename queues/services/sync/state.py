"""A cluster's sync state: the lease that lets one sync run at a time, and a run's record
(its progress, its finish, the reason the cluster stays due)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from queues.models import (
    Cluster,
    ClusterSyncState,
    SyncDueReason,
    SyncRun,
)
from queues.schedulers.backends import (
    SchedulerError,
)


class SyncBusy(SchedulerError):
    """Another sync of the cluster holds the lease: try again later."""


def lease_seconds() -> int:
    return int(getattr(settings, "ARBITER_SYNC_LEASE_SECONDS", 900))


def retry_delay(retries: int) -> int:
    """Exponential backoff: 10 s, 20 s, 40 s, ... capped at 10 minutes."""
    return int(min(10 * 2**retries, 600))


def _state(cluster: Cluster) -> ClusterSyncState:
    state, _created = ClusterSyncState.objects.get_or_create(cluster=cluster)
    return state


@transaction.atomic
def lease_acquire(*, cluster: Cluster, now: datetime | None = None) -> str:
    now = now or timezone.now()
    _state(cluster)
    state = ClusterSyncState.objects.select_for_update().get(cluster=cluster)
    if state.lease_token and state.lease_expires_at and state.lease_expires_at > now:
        raise SyncBusy(
            _("Another sync of %(cluster)s is running (lease until %(until)s).")
            % {"cluster": cluster, "until": state.lease_expires_at.isoformat(timespec="seconds")}
        )
    state.lease_token = uuid.uuid4().hex
    state.lease_expires_at = now + timedelta(seconds=lease_seconds())
    state.save(update_fields=["lease_token", "lease_expires_at"])
    return state.lease_token


@transaction.atomic
def lease_release(*, cluster: Cluster, token: str) -> None:
    state = ClusterSyncState.objects.select_for_update().get(cluster=cluster)
    if state.lease_token == token:
        state.lease_token = ""
        state.lease_expires_at = None
        state.save(update_fields=["lease_token", "lease_expires_at"])


def _progress(run: SyncRun, text: str) -> None:
    run.progress = str(text)[:200]
    run.save(update_fields=["progress"])


def _finish(run: SyncRun, *, status: str, error: str = "", **result: Any) -> SyncRun:
    run.status = status
    run.error = error
    run.result = {**run.result, **result}
    run.finished_at = timezone.now()
    run.progress = ""
    run.save()
    return run


def _mark_due(cluster: Cluster, reason: str) -> None:
    """Keep the cluster due (a failed sync, drift) until a sync succeeds."""
    state = _state(cluster)
    if state.due_reason != SyncDueReason.FAILED:  # a failure outranks drift
        state.due_reason = reason
        state.save(update_fields=["due_reason"])
