"""The one mapping between the replay's keys and the rules' ids, and the rules a replay ran
under as a typed value.

The engine names everything by key (``queues.replay.rules``): a project, tier or preemption
class by its slug, a flavor by ``"<pool slug>/<flavor slug>"`` (``flavor_key``). The adapter
turns the rules' rows into keys; the replay's rows (``ReplayWait``, ``ReplayHour``,
``ReplayPreemption``) and the review's tables turn keys back into ids, through ``ReplayIds``
alone. What a side of a replay ran under is stored with the run (``RulesRan.as_json``) and
read back by the review (``RulesRan.from_json``): one place knows its layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from governance.models import GpuFlavor, Pool, PreemptionClass, PriorityTier, Project

from .rules import Rules


def flavor_key(pool_slug: str, flavor_slug: str) -> str:
    """The replay's name of a flavor in a pool (``training/a100-80g``)."""
    return f"{pool_slug}/{flavor_slug}"


def flavor_key_split(key: str) -> tuple[str, str]:
    """``training/a100-80g`` → ``("training", "a100-80g")``."""
    pool, _sep, flavor = key.rpartition("/")
    return pool, flavor


def _by_slug(items: Iterable[Any]) -> dict[str, int]:
    return {item.slug: item.pk for item in items if item is not None}


# The rules' models whose ids the replay's keys stand for, by ``ReplayIds`` field.
MODELS: dict[str, type[Any]] = {
    "projects": Project,
    "tiers": PriorityTier,
    "pools": Pool,
    "flavors": GpuFlavor,
    "classes": PreemptionClass,
}


@dataclass(frozen=True)
class ReplayIds:
    """The rules' ids by the replay's keys (``None`` for a key no row has, any more)."""

    projects: Mapping[str, int]
    tiers: Mapping[str, int]
    pools: Mapping[str, int]
    flavors: Mapping[str, int]
    classes: Mapping[str, int]

    @classmethod
    def load(cls) -> ReplayIds:
        """From the database (five small queries)."""
        return cls.of(**{name: model.objects.all() for name, model in MODELS.items()})

    @classmethod
    def of(cls, **rows: Iterable[Any]) -> ReplayIds:
        """From rows already read (anything with ``slug`` and ``pk``), one iterable per field
        (``projects=``, ``tiers=``, ``pools=``, ``flavors=``, ``classes=``)."""
        return cls(**{name: _by_slug(rows[name]) for name in MODELS})

    def project(self, key: str | None) -> int | None:
        return self.projects.get(key or "")

    def tier(self, key: str | None) -> int | None:
        return self.tiers.get(key or "")

    def preemption_class(self, key: str | None) -> int | None:
        return self.classes.get(key or "")

    def pool(self, key: str) -> int | None:
        """The pool of a flavor key."""
        return self.pools.get(flavor_key_split(key)[0])

    def flavor(self, key: str) -> tuple[int | None, int | None]:
        """The pool and the flavor of a flavor key."""
        pool, flavor = flavor_key_split(key)
        return self.pools.get(pool), self.flavors.get(flavor)


@dataclass(frozen=True)
class QuotaRan:
    """A quota as a replay ran under it (keys, GPUs)."""

    project: str
    flavor: str  # a flavor key
    guarantee: float
    lending_limit: float | None
    preemption_class: str


@dataclass(frozen=True)
class RulesRan:
    """What the review reads of the rules one side of a replay ran under: the capacity of each
    period (from a moment on, a period only where it changed) and the quotas of the first."""

    capacity: tuple[tuple[float, dict[str, float]], ...]
    quotas: tuple[QuotaRan, ...]

    @classmethod
    def of(cls, timeline: list[tuple[float, Rules]]) -> RulesRan:
        capacity: list[tuple[float, dict[str, float]]] = []
        for at, rules in timeline:
            if not capacity or capacity[-1][1] != rules.capacity:
                capacity.append((at, dict(sorted(rules.capacity.items()))))
        quotas = tuple(
            QuotaRan(q.project, q.flavor, q.guarantee, q.lending_limit, q.preemption_class)
            for q in timeline[0][1].quotas
        )
        return cls(capacity=tuple(capacity), quotas=quotas)

    def as_json(self) -> dict[str, Any]:
        """As a run's result stores it: ``{"capacity": [[from, {"pool/flavor": GPUs}], ...],
        "quotas": [[project, "pool/flavor", guarantee, lending limit, class], ...]}``."""
        return {
            "capacity": [[at, capacity] for at, capacity in self.capacity],
            "quotas": [
                [q.project, q.flavor, q.guarantee, q.lending_limit, q.preemption_class]
                for q in self.quotas
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RulesRan:
        return cls(
            capacity=tuple((float(at), dict(capacity)) for at, capacity in data["capacity"]),
            quotas=tuple(QuotaRan(*row) for row in data["quotas"]),
        )
