"""The job_submit table of a Slurm cluster whose controller has no file system in common
with Arbiter: the pull agent fetches it through the API (``submit_table_fetch`` records each
fetch), and an expired table raises an alert (``submit_table_expiry_check``).

The table's bytes are rendered by the sync and by the guard's minute (``submit_refresh``)
exactly as they would be written beside ``slurm.conf``, and kept in the cluster's sync state;
the API serves them as they are. Their expiry is renewed only while the cluster is in sync,
so a cluster whose sync keeps failing, or whose agent cannot reach Arbiter, ends with an
expired table on the controller: the plugin then refuses governed GPU jobs or falls back to
Slurm's native limits and the guard (``Cluster.submit_table_lapse``), and ops are alerted.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import SiteRole, User
from queues.models import (
    AlertKind,
    Cluster,
    ClusterBackend,
    ClusterSyncState,
    SubmitTableDelivery,
)

from .alerts import alert_close, alert_raise
from .slurm.submit import table_header

AGENT_TEXT_MAX = 200


def table_etag(text: str) -> str:
    """The HTTP entity tag of a table: a digest of its bytes (quoted, as HTTP wants it)."""
    return '"' + hashlib.sha256(text.encode("utf-8")).hexdigest() + '"'


def _clean(value: str) -> str:
    return "".join(ch for ch in value if ch.isprintable())[:AGENT_TEXT_MAX]


@transaction.atomic
def submit_table_fetch(
    *,
    cluster: Cluster,
    host: str,
    plugin_version: str,
    status: int,
    address: str = "",
    now: datetime | None = None,
) -> ClusterSyncState:
    """Record a fetch of ``cluster``'s table by its pull agent, and return the sync state
    whose ``submit_table`` the agent gets. Refused (ValidationError) when the cluster's table
    is not pulled, or no sync has rendered one yet."""
    if cluster.backend != ClusterBackend.SLURM:
        raise ValidationError(_("Only a Slurm cluster has a job_submit table."))
    if cluster.submit_table_delivery != SubmitTableDelivery.PULL:
        raise ValidationError(
            _(
                "The table of cluster %(cluster)s is written by the sync beside slurm.conf; "
                "set its submit table delivery to “pull” for the agent to fetch it."
            )
            % {"cluster": cluster.name}
        )
    state = ClusterSyncState.objects.select_for_update().filter(cluster=cluster).first()
    if state is None or not state.submit_table:
        raise ValidationError(
            _("No table yet: cluster %(cluster)s has not been synced since its table is pulled.")
            % {"cluster": cluster.name}
        )
    now = now or timezone.now()
    fingerprint, expires = table_header(state.submit_table) or ("", 0)
    state.agent_fetched_at = now
    state.agent_fetch = {
        "host": _clean(host),
        "address": _clean(address),
        "plugin_version": _clean(plugin_version),
        "status": status,
        "fingerprint": fingerprint,
        "expires": expires,
        "etag": table_etag(state.submit_table),
    }
    state.save(update_fields=["agent_fetched_at", "agent_fetch"])
    return state


def submit_table_expiry_check(
    *, cluster: Cluster, status: dict[str, Any], now: float | None = None
) -> bool:
    """Alert ops (once) while the table in force on the controller has expired, and close
    the alert when a current one is there. ``status``: the plugin's status as just checked
    (its table's expiry read from the file, or from the agent's last fetch). A table never
    delivered raises nothing (the cluster page says it is missing). Returns: expired."""
    now = time.time() if now is None else now
    expires = int(status.get("table_expires", 0) or 0)
    key = f"cluster:{cluster.pk}"
    if not expires or expires > now:
        alert_close(kind=AlertKind.SUBMIT_TABLE_EXPIRED, key=key)
        return False
    state = ClusterSyncState.objects.filter(cluster=cluster).first()
    fetched_at = state.agent_fetched_at if state else None
    alert_raise(
        kind=AlertKind.SUBMIT_TABLE_EXPIRED,
        key=key,
        recipients=User.objects.filter(is_active=True, site_role=SiteRole.OPS),
        cluster=cluster,
        details={
            "cluster": cluster.name,
            "expired_at": datetime.fromtimestamp(expires, tz=UTC).isoformat(),
            "delivery": cluster.submit_table_delivery,
            "on_expiry": cluster.submit_table_lapse,
            "fetched_at": fetched_at.isoformat() if fetched_at else "",
        },
    )
    return True
