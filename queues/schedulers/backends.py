"""The interface every scheduler backend implements, and the plan it produces.

A sync is: read the live state, compute the desired state from the effective rules, plan
(the diff of the objects Arbiter manages), apply the plan, and verify by reading back. A
state is plain data, ``{kind: {name: {field: value}}}`` with string values normalised by the
backend, so that it can be stored (the last applied state is the baseline for drift) and
compared field by field.

Named jobs are the one part that depends on the live scheduler: grants that raise or
protect specific jobs move them while they are still pending. ``desired_state`` lists the
requests under ``JOB``; ``settle`` resolves them against the jobs read live (which QOS each
pending job moves to, and which association must allow it) and reports the named jobs it
leaves alone. The settled ``JOB`` entries are what Arbiter moved, kept in the last applied
state so that a job still pending when its grant ends is moved back.
"""

from __future__ import annotations

import gc
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

from django.utils.translation import gettext_lazy as _

from governance.models import Pool
from governance.selectors import EffectiveRules

State = dict[str, dict[str, dict[str, str]]]
JOB = "job"
Progress = Callable[[str], None]


class SchedulerError(Exception):
    """A scheduler command failed; the message says which and why."""


class SchedulerUnavailable(SchedulerError):
    """The scheduler did not answer (daemon down, timeout): worth retrying later."""


class Action:
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    # The object exists but Arbiter does not manage it: never touched, shown to ops.
    CONFLICT = "conflict"
    # A named job that cannot be moved (running, gone, another project's): left alone.
    SKIP = "skip"


ACTION_LABELS = {
    Action.CREATE: _("create"),
    Action.UPDATE: _("update"),
    Action.DELETE: _("delete"),
    Action.CONFLICT: _("conflict"),
    Action.SKIP: _("skipped"),
}
WRITE_ACTIONS = (Action.CREATE, Action.UPDATE, Action.DELETE)


class FieldChange(NamedTuple):
    """One field of a planned change (a named tuple: a first sync plans 300,000 of them at
    10,000 projects, three times cheaper to make than a frozen dataclass)."""

    field: str
    live: str
    desired: str


@dataclass(frozen=True)
class Change:
    kind: str
    name: str
    action: str
    fields: tuple[FieldChange, ...] = ()
    note: str = ""

    @property
    def is_write(self) -> bool:
        return self.action in WRITE_ACTIONS

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "action": self.action,
            "fields": [
                {"field": f.field, "live": f.live, "desired": f.desired} for f in self.fields
            ],
            "note": self.note,
        }


@dataclass
class LiveState:
    """What the scheduler holds: every object read, and which of them Arbiter manages."""

    objects: State
    managed: dict[str, set[str]]
    extra: dict[str, Any] = field(default_factory=dict)

    def managed_objects(self) -> State:
        return {
            kind: {
                name: fields
                for name, fields in objects.items()
                if name in self.managed.get(kind, set())
            }
            for kind, objects in self.objects.items()
        }


@dataclass(frozen=True)
class DriftItem:
    kind: str
    name: str
    field: str
    applied: str
    live: str
    note: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "name": self.name,
            "field": self.field,
            "applied": self.applied,
            "live": self.live,
            "note": self.note,
        }


@dataclass
class ApplyResult:
    calls: int = 0
    writes: int = 0
    warnings: list[str] = field(default_factory=list)


class Ability(StrEnum):
    """An ability a backend may offer beyond the sync's core (read, compile, settle, plan,
    apply, verify, drift). A backend lists its own in ``SchedulerBackend.abilities``; the sync
    asks ``backend.offers(ability)`` and, without one, does what each member's comment says."""

    # ``tracked_tres()`` and ``node_gres()``: the GPU types the accounting tracks and the
    # nodes offer, read before writing. Without: no preflight; the backend's own validation
    # (Kueue's server dry run) refuses what the cluster cannot hold.
    PREFLIGHT = "preflight"
    # ``scheduler_config()``: every setting the scheduler runs with, in one call. Without:
    # each check that needs a setting reads it for itself (or has none to read).
    SCHEDULER_CONFIG = "scheduler_config"
    # ``priority_config(config=)``: the priority settings the sync's enforcement rows read
    # (Slurm's multifactor weights). Without (and without ``RULE_ENFORCEMENT``): no rows.
    PRIORITY_CONFIG = "priority_config"
    # ``rule_enforcement(rules=, pools=)``: the backend says itself how each rule is
    # enforced (Kueue: natively or not). Without: rows from ``PRIORITY_CONFIG``, or none.
    RULE_ENFORCEMENT = "rule_enforcement"
    # ``submit_table(applied=)`` and ``submit_status(applied=, plugins=, agent=)``: the
    # job_submit plugin's table and whether the plugin is installed. Without: no table,
    # no plugin status (the scheduler checks jobs at submission itself).
    SUBMIT_TABLE = "submit_table"
    # ``guard(applied=)``: hold untyped GPU jobs that got past the plugin. Without: the
    # periodic guard skips the cluster (the scheduler holds every limit itself).
    GUARD = "guard"
    # ``rebalance(applied=)``: split each capped tier's cap over its QOS where jobs wait.
    # Without: nothing to rebalance (a tier's cap is one object).
    REBALANCE = "rebalance"
    # ``held``: deleted objects a finalizer still holds (name → why), filled by plan and
    # apply. Without: none are held; every deletion is done when the apply returns.
    HELD_DELETES = "held_deletes"
    # ``flag_ungoverned_jobs(live=)``: tell jobs waiting where Arbiter governs nothing why.
    # Without: the drift check flags none.
    FLAG_UNGOVERNED_JOBS = "flag_ungoverned_jobs"


class SchedulerBackend(ABC):
    """What the sync needs from a scheduler (``SlurmBackend``, ``KueueBackend``).

    The abstract methods are what every backend offers; ``abilities`` declares which of the
    optional ones (``Ability``) this backend offers as well. An optional method a backend
    does not declare is never called: its default here raises ``NotImplementedError``.
    """

    kinds: tuple[str, ...]
    abilities: ClassVar[frozenset[Ability]] = frozenset()
    # ``Ability.HELD_DELETES``: deleted objects a finalizer still holds, and why.
    held: dict[tuple[str, str], str]

    def offers(self, ability: Ability) -> bool:
        return ability in self.abilities

    @abstractmethod
    def read_live(self, *, jobs: Iterable[str] = ()) -> LiveState: ...

    @abstractmethod
    def desired_state(
        self,
        *,
        rules: EffectiveRules,
        pools: Iterable[Pool],
        capacities: dict[tuple[int, int], int],
        gres_types: dict[int, list[str]] | None = None,
    ) -> State: ...

    @abstractmethod
    def settle(
        self, *, desired: State, live: LiveState, applied: State
    ) -> tuple[State, list[Change]]: ...

    @abstractmethod
    def plan(self, *, desired: State, live: LiveState) -> list[Change]: ...

    @abstractmethod
    def apply(self, *, plan: list[Change], desired: State, progress: Progress) -> ApplyResult: ...

    @abstractmethod
    def verify(self, *, desired: State) -> list[Change]: ...

    @abstractmethod
    def drift(self, *, applied: State, live: LiveState) -> list[DriftItem]: ...

    @abstractmethod
    def config_lines(self, *, rules: EffectiveRules) -> list[str]: ...

    @abstractmethod
    def check_connection(self) -> tuple[str, list[str]]:
        """ "Check now": the scheduler's version and the resources it tracks (Slurm's TRES,
        a Kubernetes server's resource names); raises ``SchedulerError`` when unreachable."""

    @property
    @abstractmethod
    def calls(self) -> int: ...

    # -- optional: each one is called only when ``abilities`` names it --

    def tracked_tres(self) -> set[str]:  # Ability.PREFLIGHT
        raise NotImplementedError(Ability.PREFLIGHT)

    def node_gres(self) -> dict[str, str]:  # Ability.PREFLIGHT
        raise NotImplementedError(Ability.PREFLIGHT)

    def scheduler_config(self) -> dict[str, str]:  # Ability.SCHEDULER_CONFIG
        raise NotImplementedError(Ability.SCHEDULER_CONFIG)

    def priority_config(  # Ability.PRIORITY_CONFIG
        self, *, config: dict[str, str] | None = None
    ) -> dict[str, str]:
        raise NotImplementedError(Ability.PRIORITY_CONFIG)

    def rule_enforcement(  # Ability.RULE_ENFORCEMENT
        self, *, rules: EffectiveRules, pools: Iterable[Pool]
    ) -> list[dict[str, str]]:
        raise NotImplementedError(Ability.RULE_ENFORCEMENT)

    def submit_table(self, *, applied: State) -> dict[str, Any]:  # Ability.SUBMIT_TABLE
        raise NotImplementedError(Ability.SUBMIT_TABLE)

    def submit_status(  # Ability.SUBMIT_TABLE
        self,
        *,
        applied: State,
        plugins: str | None = None,
        agent: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError(Ability.SUBMIT_TABLE)

    def guard(self, *, applied: State) -> list[dict[str, str]]:  # Ability.GUARD
        raise NotImplementedError(Ability.GUARD)

    def rebalance(self, *, applied: State) -> list[dict[str, Any]]:  # Ability.REBALANCE
        raise NotImplementedError(Ability.REBALANCE)

    def flag_ungoverned_jobs(self, *, live: LiveState) -> int:  # Ability.FLAG_UNGOVERNED_JOBS
        raise NotImplementedError(Ability.FLAG_UNGOVERNED_JOBS)


def named_jobs(*, desired: State, applied: State) -> list[str]:
    """The jobs a sync reads: those the rules name, and those Arbiter moved before."""
    return sorted(set(desired.get(JOB, {})) | set(applied.get(JOB, {})))


def own_objects(*, live: LiveState, desired: State, ledger: dict[str, list[str]]) -> LiveState:
    """Narrow ``live.managed`` to Arbiter's own objects: marked ones it wants or created.

    The mark (or an Arbiter account) says an object *may* be Arbiter's; the ledger of the
    names it created in this cluster says it *is*. A marked object that is neither wanted
    nor in the ledger was made by hand: it is shown as drift and never deleted; a wanted
    one is adopted (a sync that stopped halfway created it).
    """
    managed = {
        kind: {
            name
            for name in names
            if name in desired.get(kind, {}) or name in set(ledger.get(kind, []))
        }
        for kind, names in live.managed.items()
    }
    return LiveState(objects=live.objects, managed=managed, extra=live.extra)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a large state or plan is built.

    The desired state and plan of 10,000 projects allocate some 500,000 small objects that
    all survive (model rows, fields, changes) and hold no reference cycles; every burst of
    allocations set off collections that rescanned all of them — about two thirds of the time
    of a plan (measured). Reference counting still frees everything as usual; the collector
    resumes at the end if it was running, and its next pass finds any cycle made meanwhile.
    """
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def ledger_of(state: State) -> dict[str, list[str]]:
    """The names of the objects of a state, per kind (jobs are not objects)."""
    return {kind: sorted(names) for kind, names in state.items() if kind != JOB}


def diff_fields(
    desired: dict[str, str], live: dict[str, str], equal: Callable[[str, str, str], bool]
) -> tuple[FieldChange, ...]:
    # Equal text is an equal value (``equal`` is reflexive): only differing text is compared.
    return tuple(
        FieldChange(name, found, value)
        for name, value in desired.items()
        if (found := live.get(name, "")) != value and not equal(name, found, value)
    )


@gc_paused()
def plan_changes(
    *,
    kinds: Iterable[str],
    desired: State,
    live: LiveState,
    equal: Callable[[str, str, str], bool],
) -> list[Change]:
    """Creates, updates and deletes of managed objects, and conflicts with unmanaged ones."""
    changes: list[Change] = []
    for kind in kinds:
        wanted = desired.get(kind, {})
        present = live.objects.get(kind, {})
        managed = live.managed.get(kind, set())
        for name in sorted(wanted):
            fields = wanted[name]
            if name not in present:
                changes.append(
                    Change(
                        kind=kind,
                        name=name,
                        action=Action.CREATE,
                        fields=tuple(FieldChange(f, "", v) for f, v in fields.items()),
                    )
                )
            elif name not in managed:
                changes.append(
                    Change(
                        kind=kind,
                        name=name,
                        action=Action.CONFLICT,
                        note=str(_("exists but was not made by Arbiter; left alone")),
                    )
                )
            else:
                found = present[name]
                # Most objects are unchanged: equal maps (one comparison in C) have no diff,
                # as ``equal`` is reflexive; only the others are compared field by field.
                diff = () if fields == found else diff_fields(fields, found, equal)
                if diff:
                    changes.append(Change(kind=kind, name=name, action=Action.UPDATE, fields=diff))
        for name in sorted(managed - set(wanted)):
            changes.append(
                Change(
                    kind=kind,
                    name=name,
                    action=Action.DELETE,
                    fields=tuple(FieldChange(f, v, "") for f, v in present[name].items()),
                )
            )
    return changes


def drift_items(
    *,
    kinds: Iterable[str],
    applied: State,
    live: LiveState,
    equal: Callable[[str, str, str], bool],
) -> list[DriftItem]:
    """Live values that differ from what Arbiter last applied (a hand-made change)."""
    items: list[DriftItem] = []
    missing = str(_("(missing)"))
    for kind in kinds:
        present = live.objects.get(kind, {})
        for name, fields in sorted(applied.get(kind, {}).items()):
            if name not in present:
                items.append(DriftItem(kind, name, "", str(_("(present)")), missing))
                continue
            for change in diff_fields(fields, present[name], equal):
                items.append(DriftItem(kind, name, change.field, change.desired, change.live))
        for name in sorted(live.managed.get(kind, set()) - set(applied.get(kind, {}))):
            items.append(DriftItem(kind, name, "", missing, str(_("(present)"))))
    return items
