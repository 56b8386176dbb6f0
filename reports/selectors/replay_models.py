"""Which scheduler model replayed which cluster's jobs in a change's replay, for its page and
API (``queues.replay.by_cluster``; stored in the run's result under ``models``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from queues.models import ChangeReplay, ClusterBackend
from queues.replay.by_cluster import (
    ENGINE,
    FALLBACK_LABELS,
    MODEL_EDIT_LABELS,
    MODEL_LABELS,
    not_modelled_label,
)


@dataclass
class ReplayModel:
    """One cluster's group of jobs and the model that replayed it, in words."""

    cluster: str  # the cluster's name; "" for jobs of no cluster
    scheduler: str  # the cluster's backend; ""
    model: str  # slurm, kueue or engine
    model_label: str
    jobs: int
    fallback: str  # why the engine ran; "" when the cluster's model did
    fallback_text: str
    fallback_fields: list[str] = field(default_factory=list)  # the rules, in words
    not_modelled: list[str] = field(default_factory=list)  # rules in use, in words
    model_edits: list[str] = field(default_factory=list)  # edits only this model reads

    @property
    def cluster_text(self) -> str:
        return self.cluster or _("(no cluster)")

    @property
    def scheduler_label(self) -> str:
        labels = dict(ClusterBackend.choices)
        return str(labels.get(self.scheduler, self.scheduler))

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "scheduler": self.scheduler,
            "model": self.model,
            "model_label": self.model_label,
            "jobs": self.jobs,
            "fallback": self.fallback,
            "fallback_reason": self.fallback_text,
            "fallback_rules": self.fallback_fields,
            "not_modelled": self.not_modelled,
            "model_edits": self.model_edits,
        }


def _labels(model: str, keys: list[str]) -> list[str]:
    """The rules ``keys`` name, in words, each once (aging's three fields are one rule)."""
    labels: list[str] = []
    for key in keys:
        label = str(not_modelled_label(model, key))
        if label not in labels:
            labels.append(label)
    return labels


def replay_models(*, run: ChangeReplay | None) -> list[ReplayModel]:
    """The models ``run`` replayed its clusters' jobs with (empty for a run stored before
    the models were picked per cluster, or not finished)."""
    if run is None or not run.result:
        return []
    shown = []
    for group in run.result.get("models") or []:
        model = str(group.get("model", ENGINE))
        fallback = str(group.get("fallback", ""))
        # The rules a fallback names are the cluster's model's (the scheduler's kind).
        lacking = str(group.get("scheduler", ""))
        shown.append(
            ReplayModel(
                cluster=str(group.get("cluster", "")),
                scheduler=lacking,
                model=model,
                model_label=str(MODEL_LABELS.get(model, model)),
                jobs=int(group.get("jobs", 0)),
                fallback=fallback,
                fallback_text=str(FALLBACK_LABELS.get(fallback, "")) if fallback else "",
                fallback_fields=_labels(lacking, list(group.get("fallback_fields", []))),
                not_modelled=_labels(model, list(group.get("not_modelled", []))),
                model_edits=[
                    str(MODEL_EDIT_LABELS.get(key, key)) for key in group.get("model_edits", [])
                ],
            )
        )
    return shown
