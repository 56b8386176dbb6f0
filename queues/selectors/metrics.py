"""Prometheus metrics of the workload evidence, sync and alerts (read fresh on each scrape)."""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from governance.models import Grant, grant_in_force_q
from queues.models import Alert, Cluster, CollectorState, JobState, SyncRun, SyncStatus, WorkloadJob


def metrics_allowed(*, authorization: str, address: str) -> bool:
    """A matching bearer token, or a client address in an allowed network."""
    token = getattr(settings, "ARBITER_METRICS_TOKEN", "")
    if token and secrets.compare_digest(authorization, f"Bearer {token}"):
        return True
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    for network in getattr(settings, "ARBITER_METRICS_ALLOWED_NETWORKS", []):
        try:
            if client in ipaddress.ip_network(network, strict=False):
                return True
        except ValueError:
            continue
    return False


def _ts(moment: datetime | None) -> float:
    return moment.timestamp() if moment else 0.0


class WorkloadCollector(Collector):
    def collect(self) -> Iterator[Any]:
        now = timezone.now()
        pending = GaugeMetricFamily(
            "arbiter_pending_jobs",
            "Pending jobs by cluster, tier, project and wait category.",
            labels=["cluster", "tier", "project", "category"],
        )
        rows = (
            WorkloadJob.objects.filter(state=JobState.PENDING)
            .values_list("source", "tier__slug", "project__slug", "category")
            .annotate(n=Count("pk"))
        )
        for source, tier, project, category, n in rows:
            pending.add_metric([source, tier or "", project or "", category or "unclassified"], n)
        yield pending
        oldest = GaugeMetricFamily(
            "arbiter_oldest_pending_seconds",
            "Age of the oldest pending job per tier.",
            labels=["tier"],
        )
        for tier, since in (
            WorkloadJob.objects.filter(state=JobState.PENDING, pending_since__isnull=False)
            .values_list("tier__slug")
            .annotate(since=Min("pending_since"))
        ):
            oldest.add_metric([tier or ""], max(0.0, (now - since).total_seconds()))
        yield oldest
        alerts = GaugeMetricFamily("arbiter_open_alerts", "Open alerts by kind.", labels=["kind"])
        for kind, n in (
            Alert.objects.filter(closed_at=None).values_list("kind").annotate(n=Count("pk"))
        ):
            alerts.add_metric([kind], n)
        yield alerts
        grants = GaugeMetricFamily(
            "arbiter_active_grants", "Grants in force now, by kind.", labels=["kind"]
        )
        active = Grant.objects.filter(grant_in_force_q(now))
        for kind, n in active.values_list("kind").annotate(n=Count("pk")):
            grants.add_metric([kind], n)
        yield grants
        sync = GaugeMetricFamily(
            "arbiter_last_sync_success_timestamp_seconds",
            "When each cluster's last sync succeeded (0: never).",
            labels=["cluster"],
        )
        collected = GaugeMetricFamily(
            "arbiter_last_collection_success_timestamp_seconds",
            "When each cluster's jobs were last collected (0: never).",
            labels=["cluster"],
        )
        synced = dict(
            SyncRun.objects.filter(status=SyncStatus.SUCCEEDED)
            .exclude(trigger="dry_run")
            .values_list("cluster_id")
            .annotate(at=Max("finished_at"))
        )
        collections = dict(CollectorState.objects.values_list("cluster_id", "last_success_at"))
        for cluster_id, name in Cluster.objects.values_list("pk", "name"):
            sync.add_metric([name], _ts(synced.get(cluster_id)))
            collected.add_metric([name], _ts(collections.get(cluster_id)))
        yield sync
        yield collected


def metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkloadCollector())
    return registry
