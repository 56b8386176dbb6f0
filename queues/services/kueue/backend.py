"""The Kueue ``SchedulerBackend``: reads, compiles, validates, plans, applies and verifies."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.utils.translation import gettext as _

from governance.models import Pool, RulesRevision
from governance.selectors import EffectiveRules
from queues.schedulers.backends import (
    Ability,
    Action,
    ApplyResult,
    Change,
    DriftItem,
    LiveState,
    Progress,
    SchedulerBackend,
    SchedulerError,
    State,
    drift_items,
    plan_changes,
)
from queues.schedulers.kueue.desired import DesiredObjects, Manifest, desired_objects
from queues.schedulers.kueue.values import (
    GROUP,
    KINDS,
    MUTATING_BINDING,
    MUTATING_POLICY,
    NAMESPACE,
    NEVER_PRUNED,
    PRIORITY_CLASS,
    VERSION,
    Memo,
    flatten,
    is_managed,
    manifest_key,
    object_key,
    values_equal,
)

from .client import ApplyConflict, KubeClient, KueueConnection, ServerRejected
from .compiled import gc_paused
from .enforcement import rule_enforcement
from .ownership import (
    check_default_priority,
    deletion_blocked,
    field_owners,
    leftovers,
    takeover_note,
)
from .schema import validate_or_raise
from .ungoverned import flag_ungoverned_jobs


class KueueBackend(SchedulerBackend):
    kinds: tuple[str, ...] = KINDS
    abilities = frozenset(
        {Ability.RULE_ENFORCEMENT, Ability.HELD_DELETES, Ability.FLAG_UNGOVERNED_JOBS}
    )

    def __init__(
        self,
        *,
        connection: KueueConnection,
        client: KubeClient | None = None,
        force_conflicts: bool = False,
        crds_dir: Path | None = None,
        mutating: bool | None = None,
    ) -> None:
        self.connection = connection
        # Whether the server serves MutatingAdmissionPolicy (None: ask it, once).
        self._mutating = mutating
        self.client = client or KubeClient(connection)
        self.force_conflicts = force_conflicts
        self.crds_dir = crds_dir
        self.objects: DesiredObjects | None = None
        # Objects the last plan left alone because another manager owns fields of them.
        self.conflicted: set[tuple[str, str]] = set()
        # Arbiter's objects whose fields another manager took over: applied with force, and
        # what was taken back from whom ({field: [manager, ...]}).
        self.takeovers: dict[tuple[str, str], dict[str, list[str]]] = {}
        # Values other managers added to lists and maps Arbiter sets (server-side apply
        # keeps them): removed by a merge patch after the apply.
        self.restores: dict[tuple[str, str], dict[str, Any]] = {}
        # Deleted objects a finalizer still holds (Kueue's resource-in-use), and why.
        self.held: dict[tuple[str, str], str] = {}

    @property
    def calls(self) -> int:
        return self.client.calls

    # -- read --

    @property
    def mutating(self) -> bool:
        """Whether the API server serves MutatingAdmissionPolicy (discovery, asked once): then
        a Job without a tier gets its project's tier, else it is refused unless the project's
        tier is the cluster default (``desired.tier_policy``)."""
        if self._mutating is None:
            self._mutating = self.client.serves(MUTATING_POLICY, MUTATING_BINDING)
        return self._mutating

    def served(self, kind: str) -> bool:
        return kind not in (MUTATING_POLICY, MUTATING_BINDING) or self.mutating

    def check_connection(self) -> tuple[str, list[str]]:
        """ "Check now": the API server's version, and the Kueue resources it serves (an empty
        list when Kueue's CRDs are not installed). Raises ``SchedulerError`` when the server
        does not answer or refuses the credentials."""
        status, body = self.client.request("GET", "/version")
        if status != 200:
            raise SchedulerError(
                _("The Kubernetes API server answered %(status)s to /version: %(msg)s")
                % {"status": status, "msg": body.get("message", "")}
            )
        status, served = self.client.request("GET", f"/apis/{GROUP}/{VERSION}")
        resources = (
            sorted(
                f"{GROUP}/{item['name']}"
                for item in served.get("resources", [])
                if "/" not in item.get("name", "")
            )
            if status == 200
            else []
        )
        return str(body.get("gitVersion", "")), resources

    def read_live(self, *, jobs: Iterable[str] = ()) -> LiveState:
        """One list call per kind; ``extra["raw"]`` keeps the objects (owners, defaults)."""
        objects: State = {}
        managed: dict[str, set[str]] = {}
        raw: dict[str, dict[str, dict[str, Any]]] = {}
        memo = Memo()  # the objects of one kind share many values (``flatten_all``)
        for kind in KINDS:
            objects[kind] = {}
            managed[kind] = set()
            raw[kind] = {}
            if not self.served(kind):
                continue
            for item in self.client.list(kind):
                item.setdefault("kind", kind)
                meta = item.get("metadata") or {}
                key = object_key(kind, meta.get("name", ""), meta.get("namespace", ""))
                objects[kind][key] = flatten(item, memo)
                raw[kind][key] = item
                if is_managed(item):
                    managed[kind].add(key)
        return LiveState(objects=objects, managed=managed, extra={"raw": raw})

    # -- desired --

    def compile(
        self,
        *,
        rules: EffectiveRules,
        pools: Iterable[Pool],
        capacities: dict[tuple[int, int], int],
        revision: int | None,
    ) -> DesiredObjects:
        """The validated manifests (``KueueValidationError`` names each broken rule).

        Validated before the server is asked anything: rendered first as for a server that
        serves MutatingAdmissionPolicy, then, if discovery says it does not, again with the
        fallback tier policies (they differ in those only)."""

        def render(mutating: bool) -> DesiredObjects:
            objects = desired_objects(
                rules=rules,
                pools=pools,
                capacities=capacities,
                namespace_template=self.connection.namespace_template,
                revision=revision,
                mutating=mutating,
            )
            validate_or_raise(objects, self.crds_dir)
            return objects

        with gc_paused():
            objects = render(self._mutating is not False)
        if not self.mutating:
            with gc_paused():
                objects = render(False)
        self.objects = objects
        return objects

    def desired_state(
        self,
        *,
        rules: EffectiveRules,
        pools: Iterable[Pool],
        capacities: dict[tuple[int, int], int],
        gres_types: dict[int, list[str]] | None = None,
    ) -> State:
        """The flattened desired objects. ``gres_types`` (Slurm's typed GPU names) is not
        used: Kueue tells GPU kinds apart by ResourceFlavor."""
        revision = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
        objects = self.compile(rules=rules, pools=pools, capacities=capacities, revision=revision)
        # ``flatten_all(objects.manifests)``, most objects' fields made as they were generated.
        return objects.state()

    def manifest(self, kind: str, key: str) -> Manifest:
        if self.objects is not None:
            for manifest in self.objects.manifests:
                if manifest["kind"] == kind and manifest_key(manifest) == key:
                    return manifest
        raise SchedulerError(_("No desired %(kind)s %(name)s.") % {"kind": kind, "name": key})

    def _manifests(self) -> dict[tuple[str, str], Manifest]:
        if self.objects is None:
            return {}
        return {(m["kind"], manifest_key(m)): m for m in self.objects.manifests}

    # -- named jobs: Kueue has none to move; the grants that name jobs are reported --

    def settle(
        self, *, desired: State, live: LiveState, applied: State
    ) -> tuple[State, list[Change]]:
        notes = self.objects.notes if self.objects is not None else []
        return desired, [
            Change(kind=kind, name=name, action=Action.SKIP, note=note)
            for kind, name, note in notes
        ]

    # -- plan, drift --

    def plan(self, *, desired: State, live: LiveState) -> list[Change]:
        """The diff, checked by the API server: each create and update is applied as a
        server dry run first; a field another manager owns makes the change a conflict
        (unless conflicts are forced) and a rejection stops the sync naming its rule."""
        changes = []
        for change in plan_changes(kinds=KINDS, desired=desired, live=live, equal=values_equal):
            if change.kind in NEVER_PRUNED and change.action in (Action.DELETE, Action.CONFLICT):
                continue  # namespaces are never deleted; an existing one is simply used
            blocked = deletion_blocked(live, change.kind, change.name)
            if change.action == Action.DELETE and blocked:
                # Deleted already, held by a finalizer (Kueue's resource-in-use while
                # workloads use the queue): deleting again changes nothing; say what blocks.
                self.held[(change.kind, change.name)] = blocked
                change = Change(
                    kind=change.kind, name=change.name, action=Action.CONFLICT, note=blocked
                )
            if (
                change.kind == PRIORITY_CLASS
                and change.action == Action.UPDATE
                and any(f.field == "value" for f in change.fields)
            ):
                change = Change(
                    kind=change.kind,
                    name=change.name,
                    action=change.action,
                    fields=change.fields,
                    note=str(_("value cannot change in place: deleted and created again")),
                )
            changes.append(change)
        check_default_priority(desired=desired, live=live, objects=self.objects)
        return self._server_dry_run(changes)

    def _server_dry_run(self, changes: list[Change]) -> list[Change]:
        manifests = self._manifests()
        checked: list[Change] = []
        rejected: list[str] = []
        # The global default moves from one of Arbiter's classes to another.
        handover = any(
            c.kind == PRIORITY_CLASS
            and (
                c.action == Action.DELETE
                or any(f.field == "globalDefault" and f.desired == "false" for f in c.fields)
            )
            for c in changes
        )
        new_namespaces = {
            c.name for c in changes if c.kind == NAMESPACE and c.action == Action.CREATE
        }
        for change in changes:
            manifest = manifests.get((change.kind, change.name))
            if change.action not in (Action.CREATE, Action.UPDATE) or manifest is None:
                checked.append(change)
                continue
            if manifest["metadata"].get("namespace") in new_namespaces:
                # A dry run cannot create the namespace first: the server checks it on apply.
                checked.append(change)
                continue
            if any(f.field == "value" for f in change.fields) and change.action == Action.UPDATE:
                checked.append(change)  # recreated: the dry run of an update would refuse it
                continue
            if handover and change.kind == PRIORITY_CLASS and manifest.get("globalDefault"):
                checked.append(change)  # the old default gives way first when applied
                continue
            notes: list[str] = []
            try:
                try:
                    result = self.client.apply(manifest, dry_run=True, force=self.force_conflicts)
                except ApplyConflict as conflict:
                    # Arbiter's own object (a hand-made one is a conflict of the plan and
                    # never applied): every field of the manifest is Arbiter's, so the sync
                    # takes them back from whoever changed them.
                    result = self.client.apply(manifest, dry_run=True, force=True)
                    self.takeovers[(change.kind, change.name)] = conflict.owners
                    notes.append(takeover_note(conflict.owners))
            except ServerRejected as error:
                source = self.objects.source(change.kind, change.name) if self.objects else ""
                rejected.append(
                    _("%(error)s (from %(rule)s)") % {"error": error, "rule": source}
                    if source
                    else str(error)
                )
                continue
            patch, removed = leftovers(manifest, result)
            if patch:
                self.restores[(change.kind, change.name)] = patch
                notes.append(removed)
            if notes:
                change = Change(
                    kind=change.kind,
                    name=change.name,
                    action=change.action,
                    fields=change.fields,
                    note="; ".join(filter(None, [change.note, *notes])),
                )
            checked.append(change)
        if rejected:
            raise SchedulerError("; ".join(rejected[:10]))
        return checked

    def drift(self, *, applied: State, live: LiveState) -> list[DriftItem]:
        """Changed fields, each with the field managers (other than Arbiter) that own it."""
        raw = live.extra.get("raw", {})
        items = []
        for item in drift_items(kinds=KINDS, applied=applied, live=live, equal=values_equal):
            if item.kind in NEVER_PRUNED and item.name not in applied.get(item.kind, {}):
                continue  # a namespace Arbiter once made and keeps: not a change
            owners = field_owners(raw.get(item.kind, {}).get(item.name), item.field)
            if owners:
                item = DriftItem(
                    item.kind,
                    item.name,
                    _("%(field)s [owned by %(managers)s]")
                    % {"field": item.field, "managers": ", ".join(owners)},
                    item.applied,
                    item.live,
                )
            items.append(item)
        return items

    # -- apply --

    def apply(self, *, plan: list[Change], desired: State, progress: Progress) -> ApplyResult:
        """Server-side apply of creates and updates in dependency order, then deletes of
        the objects Arbiter manages that are no longer desired, in reverse order. Priority
        classes that stop being the global default go first (one default at a time)."""
        start = self.client.writes
        manifests = self._manifests()
        warnings: list[str] = []
        order = {kind: index for index, kind in enumerate(KINDS)}
        # First the classes that stop being the global default (one default at a time).
        for change in plan:
            if change.kind != PRIORITY_CLASS:
                continue
            if change.action == Action.DELETE:
                self.client.delete(change.kind, change.name)
            elif change.action == Action.UPDATE and any(
                f.field == "globalDefault" and f.desired == "false" for f in change.fields
            ):
                self._apply_one(change, manifests, warnings, progress)
        writes = sorted(
            (
                c
                for c in plan
                if c.action == Action.CREATE
                or (
                    c.action == Action.UPDATE
                    and not (
                        c.kind == PRIORITY_CLASS
                        and any(
                            f.field == "globalDefault" and f.desired == "false" for f in c.fields
                        )
                    )
                )
            ),
            key=lambda c: (order[c.kind], c.name),
        )
        for change in writes:
            self._apply_one(change, manifests, warnings, progress)
        deletes = sorted(
            (
                c
                for c in plan
                if c.action == Action.DELETE
                and c.kind not in NEVER_PRUNED
                and c.kind != PRIORITY_CLASS
            ),
            key=lambda c: (-order[c.kind], c.name),
        )
        for change in deletes:
            progress(_("deleting %(kind)s %(name)s") % {"kind": change.kind, "name": change.name})
            self.client.delete(change.kind, change.name)
            status, obj = self.client.request(
                "GET", self.client.object_path(change.kind, change.name)
            )
            if status == 200:
                one = LiveState(
                    objects={}, managed={}, extra={"raw": {change.kind: {change.name: obj}}}
                )
                blocked = deletion_blocked(one, change.kind, change.name)
                if blocked:
                    self.held[(change.kind, change.name)] = blocked
        return ApplyResult(
            calls=self.client.calls, writes=self.client.writes - start, warnings=warnings
        )

    def _apply_one(
        self,
        change: Change,
        manifests: dict[tuple[str, str], Manifest],
        warnings: list[str],
        progress: Progress,
    ) -> None:
        """Server-side apply of one desired object (a class whose value changes is deleted
        first: Kubernetes forbids changing it in place)."""
        manifest = manifests.get((change.kind, change.name))
        if manifest is None:
            raise SchedulerError(
                _("No desired %(kind)s %(name)s.") % {"kind": change.kind, "name": change.name}
            )
        progress(_("applying %(kind)s %(name)s") % {"kind": change.kind, "name": change.name})
        if (
            change.kind == PRIORITY_CLASS
            and change.action == Action.UPDATE
            and any(f.field == "value" for f in change.fields)
        ):
            self.client.delete(change.kind, change.name)
        key = (change.kind, change.name)
        try:
            self.client.apply(manifest, force=self.force_conflicts or key in self.takeovers)
        except ApplyConflict as conflict:
            warnings.append(str(conflict))
            return
        if key in self.restores:
            self.client.restore(change.kind, change.name, self.restores[key])

    def verify(self, *, desired: State) -> list[Change]:
        """Read back: the changes that remain (empty when the server holds the plan)."""
        live = self.read_live()
        return [
            change
            for change in plan_changes(kinds=KINDS, desired=desired, live=live, equal=values_equal)
            if change.action not in (Action.CONFLICT, Action.SKIP)
            and (change.kind, change.name) not in self.conflicted
            and not (change.kind in NEVER_PRUNED and change.action == Action.DELETE)
            # A delete the server accepted but a finalizer holds: the next plan says so.
            and not (
                change.action == Action.DELETE and deletion_blocked(live, change.kind, change.name)
            )
        ]

    def flag_ungoverned_jobs(self, *, live: LiveState) -> int:
        """See ``kueue.ungoverned.flag_ungoverned_jobs``."""
        return flag_ungoverned_jobs(client=self.client, live=live)

    def rule_enforcement(
        self, *, rules: EffectiveRules, pools: Iterable[Pool]
    ) -> list[dict[str, str]]:
        """Per rule, natively enforced by Kueue or not (``kueue.enforcement``)."""
        return rule_enforcement(rules=rules, pools=pools, mutating=self.mutating)

    def config_lines(self, *, rules: EffectiveRules) -> list[str]:
        return []
