"""Periodic checks on the workload evidence: long waits, and rules the scheduler did not hold.

``wait_alerts_check``: a pending job whose *current wait* (since it last became pending,
``queues.selectors.definitions.current_wait_seconds``) is longer than its tier's
``wait_alert_minutes`` opens one alert (to the tier owner and ops), refreshed while it
waits and closed, with that wait's length, once it starts or ends. ``rules_check``
compares what runs with the effective rules: a project running more GPUs of a flavor than
its maximum in the cluster's pools, a job running in a QOS its project may not use, a job
of a never-preempt class that was preempted. Each finding is a ``rule_not_enforced`` alert
to ops, closed when the finding is gone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from governance.models import Pool, PreemptionKind, SiteRole, User
from governance.selectors import EffectiveProject, EffectiveRules, effective_rules
from queues.models import Alert, AlertKind, Cluster, JobState, WaitCategory, WorkloadJob
from queues.schedulers.slurm.values import borrow_qos, guarantee_qos, tier_qos
from queues.selectors import definitions
from queues.selectors.definitions import current_wait_seconds

from ..alerts import alert_close, alert_raise

PREEMPTION_LOOKBACK = timedelta(days=1)


def _ops() -> list[User]:
    return list(
        User.objects.filter(is_active=True).filter(Q(site_role=SiteRole.OPS) | Q(is_superuser=True))
    )


def job_alert_key(job: WorkloadJob) -> str:
    return f"job:{job.cluster_id or job.source}:{job.key}"


def _minutes(seconds: float) -> int:
    return int(max(0, seconds) // 60)


def wait_alerts_check(*, now: datetime | None = None) -> dict[str, int]:
    """Raise, refresh and close the long-wait alerts; return how many of each."""
    now = now or timezone.now()
    ops = _ops()
    waiting = (
        WorkloadJob.objects.filter(
            state=JobState.PENDING,
            tier__wait_alert_minutes__isnull=False,
            pending_since__isnull=False,
        )
        .select_related("tier", "tier__owner", "project", "cluster")
        .order_by("pending_since")
    )
    raised: set[str] = set()
    for job in waiting.iterator():
        tier, since = job.tier, job.pending_since
        waited = current_wait_seconds(job, now=now)
        if tier is None or tier.wait_alert_minutes is None or since is None or waited is None:
            continue
        threshold = tier.wait_alert_minutes
        if waited < threshold * 60:
            continue
        key = job_alert_key(job)
        raised.add(key)
        alert_raise(
            kind=AlertKind.LONG_WAIT,
            key=key,
            recipients=[tier.owner, *ops],
            cluster=job.cluster,
            now=now,
            details={
                "job": job.job_id,
                "key": job.key,
                "source": job.source,
                "project": job.project.name if job.project else job.account,
                "tier": tier.name,
                "minutes": _minutes(waited),
                "threshold": threshold,
                "category": str(WaitCategory(job.category).label) if job.category else "",
                "reason": job.reason,
                "pending_since": since.isoformat(),
            },
        )
    closed = _long_waits_close(raised=raised, now=now)
    return {"open": len(raised), "closed": closed}


def _long_waits_close(*, raised: set[str], now: datetime) -> int:
    """Close the open long-wait alerts whose job no longer waits (their jobs read in one
    query, not one per alert); return how many were closed."""
    alerts = list(
        Alert.objects.filter(kind=AlertKind.LONG_WAIT, closed_at=None).exclude(key__in=raised)
    )

    def job_of(alert: Alert) -> tuple[str, str]:
        return alert.details.get("source", ""), alert.details.get("key") or alert.details.get(
            "job", ""
        )

    jobs: dict[tuple[str, str], WorkloadJob] = {}
    keys = {job_of(alert)[1] for alert in alerts}
    if keys:
        for job in (
            WorkloadJob.objects.filter(key__in=keys)
            .only("source", "key", "state", "started_at", "ended_at", "pending_since", "tier_id")
            .order_by("pk")
        ):
            jobs.setdefault((job.source, job.key), job)
    closed = 0
    for alert in alerts:
        found = jobs.get(job_of(alert))
        if found is not None and found.state == JobState.PENDING and found.pending_since:
            continue  # still waiting: the threshold was raised, or it is not due yet
        since = alert.details.get("pending_since")
        end = (found.started_at or found.ended_at) if found else None
        total = (end or now) - datetime.fromisoformat(since) if since else timedelta(0)
        alert_close(
            kind=AlertKind.LONG_WAIT,
            key=alert.key,
            now=now,
            details={
                "minutes": _minutes(total.total_seconds()),
                "ended": found.state if found else "",
            },
        )
        closed += 1
    return closed


# Each gap found: its alert key → the cluster and the alert's details.
Found = dict[str, tuple[Cluster | None, dict[str, object]]]


def rules_check(*, now: datetime | None = None) -> dict[str, int]:
    """Compare what runs on every cluster with the effective rules; alert ops on each gap."""
    now = now or timezone.now()
    rules = effective_rules(at=now)
    clusters = {c.pk: c for c in Cluster.objects.prefetch_related("pools")}
    ops = _ops()
    found: Found = {}
    found.update(_over_maximum(rules, clusters))
    found.update(_job_gaps(rules, clusters, now=now))
    for key, (cluster, details) in found.items():
        alert_raise(
            kind=AlertKind.RULE_NOT_ENFORCED,
            key=key,
            recipients=ops,
            cluster=cluster,
            details=details,
            now=now,
        )
    closed = 0
    for alert in Alert.objects.filter(kind=AlertKind.RULE_NOT_ENFORCED, closed_at=None).exclude(
        key__in=list(found)
    ):
        alert_close(kind=AlertKind.RULE_NOT_ENFORCED, key=alert.key, now=now)
        closed += 1
    return {"open": len(found), "closed": closed}


def _over_maximum(rules: EffectiveRules, clusters: dict[int, Cluster]) -> Found:
    """1. More GPUs running than the maximum (per cluster, project and flavor)."""
    found: Found = {}
    running = definitions.running_gpus(
        WorkloadJob.objects.filter(project__isnull=False, cluster__isnull=False),
        by=("cluster_id", "project__slug", "flavor_id", "flavor__name"),
    )
    for (cluster_id, slug, flavor_id, flavor_name), total in running.items():
        project = rules.projects.get(slug)
        cluster = clusters.get(cluster_id)
        if project is None or cluster is None:
            continue
        pools = {pool.pk for pool in cluster.pools.all()}
        quotas = [
            q
            for q in project.quotas
            if q.quota.pool_id in pools and (flavor_id is None or q.quota.flavor_id == flavor_id)
        ]
        if not quotas or any(q.maximum is None for q in quotas):
            maximum = None if quotas else 0
        else:
            maximum = sum(q.maximum or 0 for q in quotas)
        if maximum is not None and total > maximum:
            key = f"max:{cluster_id}:{slug}:{flavor_id or '-'}"
            found[key] = (
                cluster,
                {
                    "cluster": cluster.name,
                    "project": project.project.name,
                    "rule": "over_maximum",
                    "flavor": flavor_name or "",
                    "allowed": maximum,
                    "seen": total,
                },
            )
    return found


def _job_gaps(rules: EffectiveRules, clusters: dict[int, Cluster], *, now: datetime) -> Found:
    """2. A job in a QOS its project may not use; 3. a never-preempt job that was preempted."""
    found: Found = {}
    suspects = (
        WorkloadJob.objects.filter(project__isnull=False, cluster__isnull=False)
        .filter(
            Q(state=JobState.RUNNING)
            | Q(preemptions__gt=0, last_event_at__gte=now - PREEMPTION_LOOKBACK)
        )
        .select_related("project")
    )
    for job in suspects.iterator():
        project = rules.projects.get(job.project.slug) if job.project else None
        cluster = clusters.get(job.cluster_id or 0)
        if project is None or cluster is None:
            continue
        pool_list = list(cluster.pools.all())
        if job.state == JobState.RUNNING and job.qos:
            found.update(_qos_gap(job, project, cluster, pool_list))
        if job.preemptions:
            found.update(_preempted_gap(job, project, cluster, pool_list))
    return found


def _qos_gap(
    job: WorkloadJob, project: EffectiveProject, cluster: Cluster, pool_list: list[Pool]
) -> Found:
    """2. A running job in a QOS that none of its project's tiers, pools or grants gives."""
    found: Found = {}
    allowed = {tier_qos(t) for t in project.allowed_tiers}
    allowed |= {tier_qos(t, protected=True) for t in project.allowed_tiers}
    allowed |= {guarantee_qos(pool, project.project.slug) for pool in pool_list}
    allowed |= {borrow_qos(pool) for pool in pool_list}
    granted = project.job_tiers.get(job.job_id)
    if granted is not None:
        allowed |= {tier_qos(granted), tier_qos(granted, protected=True)}
    if job.qos not in allowed:
        found[f"qos:{job.cluster_id}:{job.job_id}"] = (
            cluster,
            {
                "cluster": cluster.name,
                "project": project.project.name,
                "rule": "qos_not_allowed",
                "job": job.job_id,
                "allowed": ", ".join(sorted(allowed)),
                "seen": job.qos,
            },
        )
    return found


def _preempted_gap(
    job: WorkloadJob, project: EffectiveProject, cluster: Cluster, pool_list: list[Pool]
) -> Found:
    """3. A preempted job whose class (its own, or its quotas') is never to be preempted."""
    found: Found = {}
    klass = project.job_preemption_classes.get(job.job_id)
    kinds = (
        {klass.kind}
        if klass
        else {
            q.preemption_class.kind
            for q in project.quotas
            if q.quota.pool_id in {p.pk for p in pool_list}
            and (job.flavor_id is None or q.quota.flavor_id == job.flavor_id)
        }
    )
    if PreemptionKind.FORBIDDEN in kinds:
        found[f"preempted:{job.cluster_id}:{job.job_id}"] = (
            cluster,
            {
                "cluster": cluster.name,
                "project": project.project.name,
                "rule": "forbidden_preempted",
                "job": job.job_id,
                "allowed": 0,
                "seen": job.preemptions,
            },
        )
    return found
