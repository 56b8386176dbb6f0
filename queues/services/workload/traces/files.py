"""A trace file read: its formats and columns, the mapping of its keys to Arbiter's projects,
tiers, pools and flavors (``TraceMapping``), what an import found (``TraceSummary``), its
rows (``trace_rows``) and where it ends (``trace_end``)."""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from governance.models import GpuFlavor, Pool, PriorityTier, Project

from ..ingest import IngestResult

FORMATS = ("alibaba-openb", "alibaba-v2025", "philly", "itp")
COLUMNS = {
    "alibaba-openb": {"name", "num_gpu", "gpu_milli", "qos", "pod_phase", "creation_time"},
    "alibaba-v2025": {"instance_sn", "app_name", "gpu_request", "creation_time"},
    "philly": {"timestamp", "duration", "num_gpus", "cluster"},
    "itp": {"cluster", "job_id", "submission_time", "duration", "num_gpu"},
}
DEFAULT = "*"


class TraceError(Exception):
    """The file cannot be read as the format says (the message says where)."""


DIMENSIONS = ("project", "tier", "pool", "flavor")


class TraceUnmapped(TraceError):
    """Jobs the maps do not cover, refused unless the import allows them (``summary`` says
    which and how many)."""

    def __init__(self, summary: TraceSummary) -> None:
        super().__init__("jobs the maps do not cover")
        self.summary = summary


@dataclass
class TraceMapping:
    """The trace's keys onto Arbiter's objects, per dimension; ``*`` is the default."""

    projects: dict[str, Project] = field(default_factory=dict)
    tiers: dict[str, PriorityTier] = field(default_factory=dict)
    pools: dict[str, Pool] = field(default_factory=dict)
    flavors: dict[str, GpuFlavor] = field(default_factory=dict)

    def find(self, dimension: str, key: str) -> Any:
        table: dict[str, Any] = getattr(self, dimension + "s")
        return table.get(key) or table.get(DEFAULT)

    def project(self, key: str) -> Project | None:
        return self.find("project", key)  # type: ignore[no-any-return]

    def tier(self, key: str) -> PriorityTier | None:
        return self.find("tier", key)  # type: ignore[no-any-return]


@dataclass
class TraceSummary:
    """What an import read, before it writes, and what it wrote."""

    jobs: int = 0
    censored: int = 0  # closed at the trace's end
    waits_not_recorded: int = 0
    end: datetime | None = None
    # Per dimension, the trace's keys no map covers and their jobs ("" when the trace has
    # none: only * maps it).
    unmapped: dict[str, Counter[str]] = field(
        default_factory=lambda: {dimension: Counter() for dimension in DIMENSIONS}
    )
    written: bool = False
    ingest: IngestResult = field(default_factory=IngestResult)
    remapped: int = 0  # stored jobs whose project, tier, pool, flavor or GPUs changed

    def unmapped_jobs(self, dimension: str) -> int:
        return sum(self.unmapped[dimension].values())

    @property
    def complete(self) -> bool:
        return not any(self.unmapped_jobs(dimension) for dimension in DIMENSIONS)


def row_keys(fmt: str, row: dict[str, str]) -> dict[str, str]:
    """The trace's own key of each dimension for one row (what the maps are keyed by):
    openb the QoS class (project and tier) and the GPU model asked for (flavor); v2025 the
    app (project) and LS (tier); Philly the virtual cluster, ITP the cluster (project and
    pool). A key the format has not is empty: only ``*`` maps it."""
    if fmt == "alibaba-openb":
        qos = row["qos"]
        return {"project": qos, "tier": qos, "pool": "", "flavor": row.get("gpu_spec") or ""}
    if fmt == "alibaba-v2025":
        return {"project": row["app_name"], "tier": "LS", "pool": "", "flavor": ""}
    return {"project": row["cluster"], "tier": "", "pool": row["cluster"], "flavor": ""}


def _open(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _number(value: str) -> float | None:
    value = (value or "").strip()
    if not value:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def trace_rows(path: Path, fmt: str) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = _open(path)
    except OSError as error:
        raise TraceError(f"cannot open {path}: {error.strerror}") from error
    line = 1  # the header's
    with handle:
        try:
            reader = csv.DictReader(handle)
            missing = COLUMNS[fmt] - set(reader.fieldnames or [])
            if missing:
                columns = ", ".join(sorted(missing))
                raise TraceError(f"{path.name} is not a {fmt} trace: missing columns {columns}")
            for line, row in enumerate(reader, start=2):
                if None in row:  # csv puts the fields past the header's under None
                    raise TraceError(
                        f"{path.name} line {line}: {len(row[None])} more fields than the "
                        "header names"
                    )
                if any((value or "").strip() for value in row.values()):
                    yield line, row
        except (UnicodeDecodeError, OSError, gzip.BadGzipFile, EOFError) as error:
            raise TraceError(f"{path.name}: unreadable ({error})") from error
        except csv.Error as error:  # a field past the size limit: in the row after the last
            raise TraceError(f"{path.name} line {line + 1}: {error}") from error


OPEN_ENDED = ("alibaba-openb", "alibaba-v2025")  # formats whose jobs may have no end
TIMES = ("creation_time", "scheduled_time", "deletion_time")
# How far a trace's times and run times may reach: the published traces span 31 to 149 days
# (a Philly run 54 days). A time before the trace's start, or past two years after it, is a
# broken row, not a job (an ITP submit in year 5194).
SPAN = timedelta(days=730)
# Philly's times are absolute: a submit before 2000 or after now is no Philly job.
PHILLY_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)


def _offset(name: str, value: float | None) -> float | None:
    """A time in seconds from the trace's start, checked: not before the start (``--start``)
    and not past ``SPAN`` after it."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise ValueError(f"{name} {value:g} is not a time")
    if value < 0:
        raise ValueError(
            f"{name} {value:g} s is before the trace's start (--start): times count from it"
        )
    if value > SPAN.total_seconds():
        raise ValueError(
            f"{name} {value:g} s is {value / 86400:.0f} days after the trace's start: "
            f"more than the {SPAN.days} days a trace can span"
        )
    return value


def _run_time(value: str) -> float:
    """A Philly or ITP run time in seconds, checked: at least 0, at most ``SPAN``."""
    duration = float(value)
    if not math.isfinite(duration) or duration < 0:
        raise ValueError(f"duration {duration:g} s is negative: a run cannot end before it starts")
    if duration > SPAN.total_seconds():
        raise ValueError(f"duration {duration:g} s is longer than the {SPAN.days} days of a trace")
    return duration


def trace_end(path: Path, fmt: str, start: datetime) -> float | None:
    """The latest time in an Alibaba trace, in seconds from its start (``None`` for a format
    whose every job has an end, or a file without times): where the observation ends, as far
    as the file shows. A time that falls outside the calendar after ``start`` (infinite, or
    past the year 9999) is refused with its line."""
    if fmt not in OPEN_ENDED:
        return None
    latest: float | None = None
    for line, row in trace_rows(path, fmt):
        for name in TIMES:
            try:
                value = _offset(name, _number(row.get(name, "")))
            except ValueError as error:
                raise TraceError(f"{path.name} line {line}: {error}") from error
            try:
                if value is not None:
                    start + timedelta(seconds=value)  # raises when no date holds it
            except OverflowError:
                raise TraceError(
                    f"{path.name} line {line}: {name} {value:g} s is out of range after --start"
                ) from None
            if value is not None and (latest is None or value > latest):
                latest = value
    return latest
