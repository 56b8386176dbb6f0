"""The scheduler side's models, one module per concern: clusters (``cluster``), syncs
(``sync``), alerts (``alerts``), workload evidence (``workload``, ``rollup``) and replays
(``replay``). Everything is importable from ``queues.models``; the connection-setting
validators stay reachable here because migrations name them by this path.

Clusters Arbiter syncs its rules to, and the record of every sync.

``Cluster`` is governed configuration (ops edit it through the services, with a reason, and
it keeps its history). ``ClusterSyncState`` is what the sync itself maintains per cluster:
the revision and the desired state last applied (the baseline for drift), the latest drift
check, and the lease that lets one sync at a time run. ``SyncRun`` records each sync or dry
run: trigger, plan, result, error, timing and progress.
"""

from .agent import ClusterAgentToken
from .alerts import (
    Alert,
    AlertKind,
    AlertRecipient,
)
from .cluster import (
    CA_BUNDLE_MAX_LENGTH,
    COMMAND_TIMEOUT_MAX,
    CREDENTIALS_FILE_NAME,
    DNS_LABEL,
    NAMESPACE_PLACEHOLDERS,
    PATH_MAX_LENGTH,
    PEM_CERTIFICATE,
    Cluster,
    ClusterBackend,
    SubmitTableDelivery,
    SubmitTableLapse,
    kube_credentials_dir,
    namespace_placeholders,
    render_namespace,
    slurm_bin_dirs,
    slurm_name_validator,
    slurm_partition_validator,
    validate_absolute_path,
    validate_credentials_file_name,
    validate_kube_api_server,
    validate_namespace_template,
    validate_pem_bundle,
    validate_slurm_bin_dir,
)
from .replay import (
    ChangeReplay,
    ReplayHour,
    ReplayPreemption,
    ReplaySide,
    ReplayStatus,
    ReplayWait,
)
from .rollup import ROLLUP_NAME, RollupState, WorkloadHour, WorkloadJobRollup, WorkloadWait
from .sync import (
    FINISHED_STATUSES,
    ClusterSyncState,
    Enforcement,
    SyncDueReason,
    SyncRun,
    SyncStatus,
    SyncTrigger,
)
from .workload import (
    ACTIVE_STATES,
    FINISHED_STATES,
    CollectorState,
    EventKind,
    JobState,
    WaitCategory,
    WorkloadEvent,
    WorkloadJob,
)

__all__ = [
    "ACTIVE_STATES",
    "CA_BUNDLE_MAX_LENGTH",
    "COMMAND_TIMEOUT_MAX",
    "CREDENTIALS_FILE_NAME",
    "DNS_LABEL",
    "FINISHED_STATES",
    "FINISHED_STATUSES",
    "NAMESPACE_PLACEHOLDERS",
    "PATH_MAX_LENGTH",
    "PEM_CERTIFICATE",
    "ROLLUP_NAME",
    "Alert",
    "AlertKind",
    "AlertRecipient",
    "ChangeReplay",
    "Cluster",
    "ClusterAgentToken",
    "ClusterBackend",
    "ClusterSyncState",
    "CollectorState",
    "Enforcement",
    "EventKind",
    "JobState",
    "ReplayHour",
    "ReplayPreemption",
    "ReplaySide",
    "ReplayStatus",
    "ReplayWait",
    "RollupState",
    "SubmitTableDelivery",
    "SubmitTableLapse",
    "SyncDueReason",
    "SyncRun",
    "SyncStatus",
    "SyncTrigger",
    "WaitCategory",
    "WorkloadEvent",
    "WorkloadHour",
    "WorkloadJob",
    "WorkloadJobRollup",
    "WorkloadWait",
    "kube_credentials_dir",
    "namespace_placeholders",
    "render_namespace",
    "slurm_bin_dirs",
    "slurm_name_validator",
    "slurm_partition_validator",
    "validate_absolute_path",
    "validate_credentials_file_name",
    "validate_kube_api_server",
    "validate_namespace_template",
    "validate_pem_bundle",
    "validate_slurm_bin_dir",
]
