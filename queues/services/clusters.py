"""Clusters: which scheduler enforces which pools, and how Arbiter reaches it.

A cluster is a governed rule. Pages and the API *propose* its creation, its changes and its
deletion (``cluster_propose_*``): a rule change that someone else (ops) approves and that is
applied, with history and rollback, like every other rule. Applying calls the services
below (``cluster_create``, ``cluster_update``, ``cluster_delete``), through the rule kind
that ``QueuesConfig.ready()`` registers with the change machinery (``cluster_rule_kind``).

Connection settings are structured values, never commands: see ``queues.models`` for how
each is checked, and ``queues.services.slurm.commands`` for how commands are run.
"""

import datetime as dt
import os
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import EditKind, Pool, Project, RuleChange, User
from governance.services import (
    RuleKind,
    governed_delete,
    governed_save,
    rule_object_propose_create,
    rule_object_propose_delete,
    rule_object_propose_update,
    task_enqueue,
)
from queues.models import (
    DNS_LABEL,
    Cluster,
    ClusterBackend,
    ClusterSyncState,
    kube_credentials_dir,
    namespace_placeholders,
    render_namespace,
)
from queues.schedulers.backends import SchedulerBackend, SchedulerError

CLUSTER_EDITABLE = (
    "slurm_cluster",
    "slurm_partition",
    "slurm_conf",
    "slurm_bin_dir",
    "command_timeout",
    "kube_api_server",
    "kube_ca_bundle",
    "kube_credentials_file",
    "kube_namespace_template",
    "submit_table_delivery",
    "submit_table_lapse",
    "enabled",
    "pools",
)
# What a creation (or a deletion) records: enough to create the cluster again.
CLUSTER_SNAPSHOT = ("name", "backend", *CLUSTER_EDITABLE)


def _require_ops(user: User) -> None:
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may configure clusters."))


def _check_kube(cluster: Cluster) -> None:
    """What a Kueue cluster needs when it is applied: its credentials file exists in the
    deployer's directory, and its namespace rule names every project validly."""
    if cluster.backend != ClusterBackend.KUEUE:
        return
    errors: dict[str, str] = {}
    directory = kube_credentials_dir()
    if cluster.kube_credentials_file:
        path = os.path.join(directory, cluster.kube_credentials_file) if directory else ""
        if not directory:
            errors["kube_credentials_file"] = _(
                "The deployer has not set ARBITER_KUBE_CREDENTIALS_DIR: no credentials file "
                "can be used."
            )
        elif os.path.realpath(os.path.dirname(path)) != os.path.realpath(directory) or not (
            os.path.isfile(path)
        ):
            errors["kube_credentials_file"] = _(
                "There is no file “%(name)s” in the credentials directory."
            ) % {"name": cluster.kube_credentials_file}
    problem = namespace_problem(cluster.kube_namespace_template)
    if problem:
        errors["kube_namespace_template"] = problem
    if errors:
        raise ValidationError(errors)


def namespace_problem(template: str) -> str | None:
    """Why ``template`` does not give a valid DNS-1123 label for some project (and pool)."""
    try:
        names = namespace_placeholders(template)
    except ValidationError as error:
        return str(error.messages[0])
    pools = list(Pool.objects.values_list("slug", flat=True)) if "pool" in names else [""]
    for project in Project.objects.values_list("slug", flat=True).iterator():
        for pool in pools:
            namespace = render_namespace(template, project=project, pool=pool)
            if len(namespace) > 63 or not DNS_LABEL.match(namespace):
                return _(
                    "For project “%(project)s” the namespace would be “%(namespace)s”, which "
                    "is not a DNS-1123 label (lowercase letters, digits and “-”, at most 63)."
                ) % {"project": project, "namespace": namespace}
    return None


def _save(cluster: Cluster, *, user: User, reason: str, pools: Iterable[Pool] | None) -> None:
    _check_kube(cluster)
    governed_save(cluster, user=user, reason=reason)
    if pools is not None:
        cluster.pools.set(pools)


@transaction.atomic
def cluster_create(
    *,
    user: User,
    reason: str,
    name: str,
    slurm_cluster: str = "",
    pools: Iterable[Pool] = (),
    backend: str = ClusterBackend.SLURM,
    **settings: Any,
) -> Cluster:
    """Create a cluster (what applying an approved creation does; seeds call it too)."""
    _require_ops(user)
    unknown = set(settings) - set(CLUSTER_EDITABLE)
    if unknown:
        raise ValidationError(
            {name: _("This field cannot be changed here.") for name in sorted(unknown)}
        )
    cluster = Cluster(name=name, backend=backend, slurm_cluster=slurm_cluster, **settings)
    _save(cluster, user=user, reason=reason, pools=list(pools))
    ClusterSyncState.objects.create(cluster=cluster)
    return cluster


@transaction.atomic
def cluster_update(*, cluster: Cluster, user: User, reason: str, data: dict[str, Any]) -> Cluster:
    """Change a cluster's settings (what applying an approved change does)."""
    _require_ops(user)
    unknown = set(data) - set(CLUSTER_EDITABLE)
    if unknown:
        raise ValidationError(
            {name: _("This field cannot be changed here.") for name in sorted(unknown)}
        )
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    pools = data.get("pools")
    changed = pools is not None and {p.pk for p in pools} != set(
        cluster.pools.values_list("pk", flat=True)
    )
    for name, value in data.items():
        if name != "pools" and getattr(cluster, name) != value:
            setattr(cluster, name, value)
            changed = True
    if changed:
        _save(cluster, user=user, reason=reason, pools=list(pools) if pools is not None else None)
    return cluster


@transaction.atomic
def cluster_delete(*, cluster: Cluster, user: User, reason: str) -> None:
    """Delete a cluster (what applying an approved deletion does). Its history stays; its
    sync runs go with it. Arbiter's objects in the scheduler are left as they are."""
    _require_ops(user)
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    governed_delete(cluster, user=user, reason=reason)


# --- the rule kind ---------------------------------------------------------------------------


def _update_from_change(*, obj: Cluster, user: User, reason: str, data: dict[str, Any]) -> None:
    cluster_update(cluster=obj, user=user, reason=reason, data=data)


def _create_from_change(*, user: User, reason: str, data: dict[str, Any]) -> Cluster:
    data = dict(data)
    return cluster_create(
        user=user,
        reason=reason,
        name=data.pop("name"),
        backend=data.pop("backend", ClusterBackend.SLURM),
        slurm_cluster=data.pop("slurm_cluster", ""),
        pools=data.pop("pools", None) or (),
        **data,
    )


def _delete_from_change(*, obj: Cluster, user: User, reason: str) -> None:
    cluster_delete(cluster=obj, user=user, reason=reason)


def _check_settings(cluster: Cluster) -> None:
    """Every field message before a proposal is recorded (the dry run checks again)."""
    cluster.full_clean()
    _check_kube(cluster)


def cluster_rule_kind() -> RuleKind:
    """Clusters as a rule kind of the change machinery (registered in ``apps.ready``)."""
    return RuleKind(
        model=Cluster,
        object_type="cluster",
        fields=dict.fromkeys(CLUSTER_EDITABLE, EditKind.SCHEDULER),
        update=_update_from_change,
        create=_create_from_change,
        delete=_delete_from_change,
        snapshot_fields=CLUSTER_SNAPSHOT,
        required_fields=("name",),
        key_field="name",
        exists_kind=EditKind.SCHEDULER,
        check=_check_settings,
    )


# --- proposals ---------------------------------------------------------------------------------
# Through the one path of every rule kind (``governance.services.rule_object_propose_*``);
# these add only that ops alone configure clusters, the defaults a creation records and the
# titles.


def cluster_propose_create(
    *,
    user: User,
    reason: str,
    data: dict[str, Any],
    **change: Any,
) -> RuleChange:
    """Propose a new cluster: a rule change that creates it once someone else approves it.

    ``data`` holds ``name``, ``backend`` and the settings of ``CLUSTER_EDITABLE`` (``pools``
    as pools); ``change`` the change's title, ticket, observation window, rollback
    condition and confirmation.
    """
    _require_ops(user)
    unknown = set(data) - set(CLUSTER_SNAPSHOT)
    if unknown:
        raise ValidationError(
            {name: _("This field cannot be changed here.") for name in sorted(unknown)}
        )
    # The creation records every setting, the model's defaults included.
    cluster = Cluster(**{name: value for name, value in data.items() if name != "pools"})
    full = {name: getattr(cluster, name) for name in CLUSTER_SNAPSHOT if name != "pools"}
    full["pools"] = list(data.get("pools") or [])
    return rule_object_propose_create(
        user=user,
        reason=reason,
        model=Cluster,
        data=full,
        title=change.pop("title", "") or _("New cluster “%(name)s”") % {"name": cluster.name},
        **change,
    )


def cluster_propose_update(
    *, cluster: Cluster, user: User, reason: str, data: dict[str, Any], **change: Any
) -> RuleChange:
    """Propose a change of a cluster's settings, pools or enabled state."""
    _require_ops(user)
    return rule_object_propose_update(obj=cluster, user=user, reason=reason, data=data, **change)


def cluster_propose_delete(
    *, cluster: Cluster, user: User, reason: str, **change: Any
) -> RuleChange:
    """Propose deleting a cluster (a rollback of the change creates it again)."""
    _require_ops(user)
    return rule_object_propose_delete(
        obj=cluster,
        user=user,
        reason=reason,
        title=change.pop("title", "") or _("Delete cluster “%(name)s”") % {"name": cluster.name},
        **change,
    )


# --- connection checks -----------------------------------------------------------------------


def cluster_check_enqueue(*, cluster: Cluster, now: dt.datetime | None = None) -> bool:
    """Ask a worker to check the cluster's connection (after commit). A check already
    asked for in the last minute and not done yet covers this one: returns ``False``."""
    now = now or timezone.now()
    with transaction.atomic():
        state, _created = ClusterSyncState.objects.get_or_create(cluster=cluster)
        state = ClusterSyncState.objects.select_for_update().get(pk=state.pk)
        pending = state.check_requested_at is not None and (
            state.checked_at is None or state.checked_at < state.check_requested_at
        )
        if pending and state.check_requested_at > now - dt.timedelta(minutes=1):  # type: ignore[operator]
            return False
        state.check_requested_at = now
        state.save(update_fields=["check_requested_at"])
        cluster_id = cluster.pk
        task_enqueue(task="queues.tasks.check_cluster", args=(cluster_id,))
    return True


def cluster_check(*, cluster: Cluster, backend: SchedulerBackend | None = None) -> ClusterSyncState:
    """Check the connection now (a worker does this): reachable or not, the scheduler's
    version and what it tracks, and the drift against the last sync; store it all."""
    from .sync import backend_for, drift_check

    state, _created = ClusterSyncState.objects.get_or_create(cluster=cluster)
    backend = backend or backend_for(cluster)
    version, error = "", ""
    tracked: list[str] = []
    try:
        version, tracked = backend.check_connection()
    except SchedulerError as failure:
        error = str(failure)
    state.checked_at = timezone.now()
    state.check_ok = not error
    state.check_error = error
    if not error:
        state.scheduler_version = version[:100]
        state.tracked_resources = list(tracked)
    state.save(
        update_fields=[
            "checked_at",
            "check_ok",
            "check_error",
            "scheduler_version",
            "tracked_resources",
        ]
    )
    if not error and state.applied_at is not None:
        state = drift_check(cluster=cluster, backend=backend)
    return state
