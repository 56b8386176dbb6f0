"""Importing public GPU-cluster traces as workload events (through the same ingest path).

What each format gives and what it cannot:

* ``alibaba-openb`` (Alibaba GPU v2023, openb pod list): per pod the creation, scheduled and
  deletion times (seconds from the trace start), GPUs (``num_gpu`` × ``gpu_milli`` / 1000: a
  pod sharing one GPU, ``gpu_milli`` below 1000, asks for a fraction of it, kept) and a
  QoS class (LS, BE, Burstable, Guaranteed) that maps onto tiers. The wait is
  ``scheduled_time − creation_time``; pods still pending at the end have none. No project,
  user or pending reason.
* ``alibaba-v2025`` (disaggregated DLRM inference instances): creation, scheduled and
  deletion times where they fall in the 31-day window; ``app_name`` maps onto projects; all
  instances are latency-sensitive (tier key ``LS``). Instances that existed before the window
  have no wait (not counted). No pending reason.
* ``philly`` (Microsoft Philly via Pollux): submit time, run time and GPUs per job, and the
  virtual cluster (maps onto projects). **No start time: no wait can be derived**; a job is
  recorded as submitted, started at its submit (the earliest it can have run: its GPU-hours
  are the file's, GPUs × run time) and ended at submit + run time (a lower bound of its end).
* ``itp`` (Microsoft ITP via ElasticFlow): the same as Philly, with the cluster as the key and
  submit times in seconds from the collection start. No wait can be derived.

No format carries pending reasons, so imported jobs have no wait category.

**The trace's end.** An Alibaba job (openb pod, v2025 instance) without a deletion time was
still running, or still waiting, when the trace ended. It is closed at the trace's end (the
latest time in the file, or ``--end``) with the state ``censored`` (an ``ended`` event in its
log): its true end is unknown, it runs no GPU-second after the trace, and as a finished job
it leaves the set the rollup rereads on every run. One still waiting then keeps its wait up
to that end, counted as *still waiting*, not as never started. A time after ``--end`` is an
error. Philly and ITP jobs all have an end (submit + run time).

**Maps.** A trace names no Arbiter project, tier, pool or flavor; the maps give them, keyed by
``row_keys`` (docs/definitions.md has the table). ``trace_import`` reads the whole file
before it writes and says (``on_scanned``) how many jobs each map leaves out, under which
keys; it refuses them unless ``allow_unmapped``. A re-import stores no event twice and brings
the stored jobs to the maps given now (``_remap``), for the next rollup to move their hours.

Enforced, not only said: a job whose source cannot tell its wait (Philly and ITP jobs, and
v2025 instances that existed before the window) is stored with ``waits_recorded`` false, so
it has no wait anywhere (``queues.selectors.definitions.job_wait``; the review counts none).
An event after a job's end cannot reopen it: the ingest rejects and lists it.

The package re-exports every public name it held as one module.
"""

from .events import Times
from .files import (
    COLUMNS,
    DEFAULT,
    DIMENSIONS,
    FORMATS,
    OPEN_ENDED,
    PHILLY_EARLIEST,
    SPAN,
    TIMES,
    TraceError,
    TraceMapping,
    TraceSummary,
    TraceUnmapped,
    row_keys,
    trace_end,
    trace_rows,
)
from .load import KEEP, REMAPPED, Scanned, trace_import

__all__ = [
    "COLUMNS",
    "DEFAULT",
    "DIMENSIONS",
    "FORMATS",
    "KEEP",
    "OPEN_ENDED",
    "PHILLY_EARLIEST",
    "REMAPPED",
    "SPAN",
    "TIMES",
    "Scanned",
    "Times",
    "TraceError",
    "TraceMapping",
    "TraceSummary",
    "TraceUnmapped",
    "row_keys",
    "trace_end",
    "trace_import",
    "trace_rows",
]
