"""The Slurm collector: ``squeue`` (pending and running, with reasons) and ``sacct`` (finished
jobs since a watermark, with their requeues) read as text, mapped back to projects and tiers
through the names the sync compiles, recorded as events.

Text, not ``--json``: on a large queue ``squeue --json`` has been measured at minutes where the
text form takes seconds. Commands run as argument lists through ``SlurmCommands`` (no shell).
Every event id is derived from the job and the time of the change, so reading the same queue
twice stores nothing twice; one lease per cluster keeps two collections of it from
overlapping, and a cluster that does not answer is recorded (and retried by the next beat)
without touching any other cluster.

The package re-exports every public name it held as one module.
"""

from .collect import collect_cluster
from .events import sacct_events, squeue_events
from .values import (
    ACTIVE,
    EPOCH,
    FINAL,
    FIRST_LOOKBACK,
    GRES,
    LEASE,
    OVERLAP,
    RUNNING_LIKE,
    SACCT_COUNT,
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    SQUEUE_FORMAT,
    TRES_GPU,
    CollectorBusy,
    CollectResult,
    JobKeys,
    Names,
    gpus_of,
    slurm_time,
)

__all__ = [
    "ACTIVE",
    "EPOCH",
    "FINAL",
    "FIRST_LOOKBACK",
    "GRES",
    "LEASE",
    "OVERLAP",
    "RUNNING_LIKE",
    "SACCT_COUNT",
    "SACCT_FIELDS",
    "SQUEUE_FIELDS",
    "SQUEUE_FORMAT",
    "TRES_GPU",
    "CollectResult",
    "CollectorBusy",
    "JobKeys",
    "Names",
    "collect_cluster",
    "gpus_of",
    "sacct_events",
    "slurm_time",
    "squeue_events",
]
