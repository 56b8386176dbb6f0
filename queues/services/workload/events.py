"""Turning validated API items into ``JobEvent``s: names resolved in a few queries."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from governance.models import GpuFlavor, PriorityTier, Project
from queues.models import Cluster, EventKind, JobState

from .ingest import JobEvent


class EventItemsInvalid(Exception):
    """Some items name what does not exist; ``errors`` has one dict per item ({} if good)."""

    def __init__(self, errors: list[dict[str, list[str]]]) -> None:
        super().__init__("invalid workload events")
        self.errors = errors


def _lookup(model: Any, field: str, values: set[str]) -> dict[str, Any]:
    if not values:
        return {}
    return {getattr(row, field): row for row in model.objects.filter(**{f"{field}__in": values})}


def job_events_from_items(items: list[dict[str, Any]]) -> list[JobEvent]:
    """Resolve the project, tier, flavor and cluster names of every item (four queries).

    Raises ``EventItemsInvalid`` listing, per item, what it names that does not exist:
    nothing is stored unless every item is good.
    """
    names = {
        key: {item[key] for item in items if item.get(key)}
        for key in ("project", "tier", "flavor", "cluster")
    }
    projects = _lookup(Project, "slug", names["project"])
    tiers = _lookup(PriorityTier, "slug", names["tier"])
    flavors = _lookup(GpuFlavor, "slug", names["flavor"])
    clusters = _lookup(Cluster, "name", names["cluster"])
    errors: list[dict[str, list[str]]] = []
    events = []
    for item in items:
        problems: dict[str, list[str]] = {}
        for key, known, text in (
            ("project", projects, _("No project “%(name)s”.")),
            ("tier", tiers, _("No tier “%(name)s”.")),
            ("flavor", flavors, _("No flavor “%(name)s”.")),
            ("cluster", clusters, _("No cluster “%(name)s”.")),
        ):
            if item.get(key) and item[key] not in known:
                problems[key] = [text % {"name": item[key]}]
        errors.append(problems)
        if problems:
            continue
        cluster = clusters.get(item.get("cluster") or "")
        events.append(
            JobEvent(
                source=item.get("source") or (cluster.name if cluster else ""),
                event_id=item["event_id"],
                job_id=item["job_id"],
                time=item["time"],
                kind=EventKind(item["kind"]),
                scheduler=item["scheduler"],
                state=JobState(item["state"]) if item.get("state") else None,
                reason=item.get("reason", ""),
                message=item.get("message", ""),
                cluster=cluster,
                project=projects.get(item.get("project") or ""),
                tier=tiers.get(item.get("tier") or ""),
                flavor=flavors.get(item.get("flavor") or ""),
                gpus=float(item["gpus"]) if item.get("gpus") is not None else None,
                name=item.get("name", ""),
                user_name=item.get("user", ""),
                queue=item.get("queue", ""),
                qos=item.get("qos", ""),
                account=item.get("account", ""),
                constraints=item.get("constraints", ""),
                submitted_at=item.get("submitted_at"),
                eligible_at=item.get("eligible_at"),
                exit_code=item.get("exit_code", ""),
            )
        )
    if any(errors):
        raise EventItemsInvalid(errors)
    return events
