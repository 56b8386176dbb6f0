"""Workload evidence: classify why jobs wait, record their events, collect them from Slurm."""

from governance.services import task_enqueue
from queues.schedulers.classify import QuotaPosition, Verdict, classify

from .ingest import IngestResult, JobEvent, events_ingest

__all__ = ["IngestResult", "JobEvent", "QuotaPosition", "Verdict", "classify", "events_ingest"]

from .slurm import CollectorBusy, CollectResult, collect_cluster


def collect_run(*, cluster_id: int) -> dict[str, object]:
    """Collect one cluster (for the Celery task): the counts, or why not."""
    from queues.models import Cluster

    cluster = Cluster.objects.filter(pk=cluster_id, enabled=True).first()
    if cluster is None:
        return {"ok": False, "error": "no such enabled cluster"}
    try:
        return collect_cluster(cluster=cluster).as_dict()
    except CollectorBusy:
        return {"ok": False, "error": "busy"}


def collect_enqueue_all() -> list[int]:
    """Queue one collection task per enabled cluster, after the transaction commits."""
    from queues.models import Cluster

    ids = list(Cluster.objects.filter(enabled=True).values_list("pk", flat=True))
    for cluster_id in ids:
        task_enqueue(task="queues.tasks.collect_cluster_workload", args=(cluster_id,))
    return ids


__all__ += [
    "CollectResult",
    "CollectorBusy",
    "collect_cluster",
    "collect_enqueue_all",
    "collect_run",
]

from .checks import rules_check, wait_alerts_check  # noqa: E402

__all__ += ["rules_check", "wait_alerts_check"]
