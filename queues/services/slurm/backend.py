"""The Slurm ``SchedulerBackend``: reads, compiles, settles, plans, applies and verifies."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext as _

from governance.models import Pool
from governance.selectors import EffectiveRules
from queues.schedulers.backends import (
    JOB,
    Ability,
    Action,
    ApplyResult,
    Change,
    DriftItem,
    FieldChange,
    LiveState,
    Progress,
    SchedulerBackend,
    State,
    plan_changes,
)
from queues.schedulers.slurm.config import slurm_conf_lines
from queues.schedulers.slurm.desired import desired_state
from queues.schedulers.slurm.values import KINDS, PENDING, QOS, values_equal

from .apply import apply_plan
from .commands import SlurmCommands
from .drift import slurm_drift
from .guard import guard_apply
from .jobs import job_order, settle
from .live import read_live
from .submit import plugin_status, table_render, table_write
from .tiercap import normalize_live, rebalance


def _split_read_as_cap(desired: State, live: LiveState) -> LiveState:
    """The live state with each capped tier's split cap read as the cap (``tiercap``)."""
    qos = {name: dict(fields) for name, fields in live.objects.get(QOS, {}).items()}
    normalize_live(desired.get(QOS, {}), qos)
    return dataclasses.replace(live, objects={**live.objects, QOS: qos})


class SlurmBackend(SchedulerBackend):
    kinds: tuple[str, ...] = KINDS
    abilities = frozenset(
        {
            Ability.PREFLIGHT,
            Ability.SCHEDULER_CONFIG,
            Ability.PRIORITY_CONFIG,
            Ability.SUBMIT_TABLE,
            Ability.GUARD,
            Ability.REBALANCE,
        }
    )

    def __init__(
        self,
        *,
        cluster_name: str,
        commands: SlurmCommands,
        table_pulled: bool = False,
        on_expiry: str = "refuse",
    ) -> None:
        self.cluster_name = cluster_name
        # The submit table: pulled by the agent on the controller (rendered, not written
        # here), and what the plugin does once it expires (Cluster.submit_table_*).
        self.table_pulled = table_pulled
        self.on_expiry = on_expiry
        self.commands = commands

    @property
    def calls(self) -> int:
        return self.commands.calls

    # -- read --

    def check_connection(self) -> tuple[str, list[str]]:
        """Two read calls: the Slurm version and the TRES the accounting database tracks."""
        return self.commands.version(), self.commands.tracked_resources()

    def read_live(self, *, jobs: Iterable[str] = ()) -> LiveState:
        """Two read calls (QOS; accounts with their associations), and one ``squeue`` for
        the named jobs when there are any."""
        return read_live(self.commands, cluster_name=self.cluster_name, jobs=jobs)

    # -- desired --

    def desired_state(
        self,
        *,
        rules: EffectiveRules,
        pools: Iterable[Pool],
        capacities: dict[tuple[int, int], int],
        gres_types: dict[int, list[str]] | None = None,
    ) -> State:
        return desired_state(rules=rules, pools=pools, capacities=capacities, gres_types=gres_types)

    # -- named jobs --

    def settle(
        self, *, desired: State, live: LiveState, applied: State
    ) -> tuple[State, list[Change]]:
        """Resolve the named jobs against the live queue (see ``jobs.settle``)."""
        return settle(desired=desired, live=live, applied=applied)

    # -- plan, drift --

    def plan(self, *, desired: State, live: LiveState) -> list[Change]:
        """The object changes, then a ``job`` update per pending job to move."""
        live = _split_read_as_cap(desired, live)
        changes = plan_changes(kinds=KINDS, desired=desired, live=live, equal=values_equal)
        found_jobs = live.objects.get(JOB, {})
        for job, fields in sorted(desired.get(JOB, {}).items(), key=job_order):
            found = found_jobs.get(job)
            target = fields.get("qos", "")
            if not target or not found or found["state"] != PENDING or found["qos"] == target:
                continue
            back = target == fields.get("restore")
            changes.append(
                Change(
                    kind=JOB,
                    name=job,
                    action=Action.UPDATE,
                    fields=(FieldChange(field="qos", live=found["qos"], desired=target),),
                    note=str(_("moved back: its grant ended") if back else _("named by a grant")),
                )
            )
        return changes

    def drift(self, *, applied: State, live: LiveState) -> list[DriftItem]:
        """Differences from the last applied state, and objects made by hand where Arbiter's
        are: an association under an Arbiter account, an account under an Arbiter pool
        account, a QOS that Arbiter's associations or Preempt lists name or that sits in
        Arbiter's name space (``<pool>.…``). Hand-made objects are shown, never deleted."""
        return slurm_drift(applied=applied, live=_split_read_as_cap(applied, live))

    # -- guard --

    def guard(self, *, applied: State) -> list[dict[str, str]]:
        """Requeue and hold untyped GPU jobs over their project's quota (see ``guard``)."""
        return guard_apply(self.commands, applied=applied)

    def rebalance(self, *, applied: State) -> list[dict[str, Any]]:
        """Split each capped tier's GPU cap over its QOS where jobs wait (see ``tiercap``)."""
        return rebalance(self.commands, qos=applied.get(QOS, {}))

    # -- submit-time checks (job_submit plugin) --

    def submit_table(self, *, applied: State) -> dict[str, Any]:
        """Write the job_submit plugin's table from the applied state (see ``submit``); for a
        pulled table, render it only (its ``text`` is kept for the pull agent)."""
        if self.table_pulled:
            return table_render(
                state=applied, cluster_name=self.cluster_name, on_expiry=self.on_expiry
            )
        return table_write(
            commands=self.commands,
            state=applied,
            cluster_name=self.cluster_name,
            on_expiry=self.on_expiry,
        )

    def submit_status(
        self,
        *,
        applied: State,
        plugins: str | None = None,
        agent: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Whether the plugin is installed and current, and its table (one ``scontrol``
        unless ``plugins``, JobSubmitPlugins as just read, is given). ``agent``: what the
        pull agent last reported, for a pulled table (no file here to read)."""
        return plugin_status(
            commands=self.commands,
            state=applied,
            cluster_name=self.cluster_name,
            plugins=plugins,
            on_expiry=self.on_expiry,
            agent=agent if self.table_pulled else None,
        )

    # -- preflight --

    def tracked_tres(self) -> set[str]:
        """The TRES the cluster's accounting tracks (``gres/gpu``, ``gres/gpu:a100``, …)."""
        return {
            f"{kind}/{name}" if name else kind
            for kind, name, *_rest in (
                [*row, "", ""]
                for row in self.commands.sacctmgr_read("show", "tres", "format=type,name")
            )
        }

    def node_gres(self) -> dict[str, str]:
        """Each node's GRES as ``sinfo`` shows it (``gpu:a100:4,gpu:h100:4``): one call."""
        out = self.commands.run(["sinfo", "-h", "-N", "-o", "%N|%G"])
        found: dict[str, str] = {}
        for line in out.splitlines():
            node, _sep, gres = line.strip().partition("|")
            if node:
                found[node] = "" if gres in ("(null)", "N/A") else gres
        return found

    def scheduler_config(self) -> dict[str, str]:
        """Every setting slurmctld runs with (``scontrol show config``): one call."""
        out = self.commands.run(["scontrol", "show", "config"])
        found = {}
        for line in out.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                found[key.strip()] = value.strip()
        return found

    def priority_config(self, *, config: dict[str, str] | None = None) -> dict[str, str]:
        """The multifactor settings slurmctld runs with (``config``: ``scheduler_config()``
        as just read; else one ``scontrol show config``)."""
        config = self.scheduler_config() if config is None else config
        wanted = {"PriorityWeightAge", "PriorityMaxAge", "PriorityWeightQOS", "PriorityType"}
        return {key: value for key, value in config.items() if key in wanted}

    # -- apply --

    def apply(self, *, plan: list[Change], desired: State, progress: Progress) -> ApplyResult:
        """Write the plan in as few calls as Slurm allows (see ``apply.apply_plan``)."""
        return apply_plan(
            self.commands,
            cluster_name=self.cluster_name,
            plan=plan,
            desired=desired,
            progress=progress,
        )

    def verify(self, *, desired: State) -> list[Change]:
        """Read back: the changes that remain (empty when the scheduler holds the plan)."""
        live = self.read_live(jobs=desired.get(JOB, {}))
        return [
            change
            for change in self.plan(desired=desired, live=live)
            if change.action not in (Action.CONFLICT, Action.SKIP)
        ]

    # -- slurm.conf --

    def config_lines(self, *, rules: EffectiveRules) -> list[str]:
        return slurm_conf_lines(rules.tiers)
