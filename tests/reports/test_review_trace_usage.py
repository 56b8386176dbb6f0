"""Per trace format, the review's GPU-hours and waits equal an independent recomputation from
the file (docs/definitions.md: GPUs × seconds run, clipped to the window; a job open at an
Alibaba trace's end runs up to that end; a Philly or ITP job runs its duration from its submit,
its wait unknown). Two consecutive windows per format, so a run across their boundary is split
between them, and neither loses nor doubles an hour.

The files are the committed samples of ``tests/fixtures/traces`` (provenance there)."""

import csv
import itertools
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from reports import services
from reports.models import ReviewStatus

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
TIERS = {"LS": "production", "Burstable": "key", "BE": "exploratory", "Guaranteed": "regular"}
TRACE_START = datetime(2026, 1, 1, tzinfo=UTC)


def number(value):
    return float(value) if (value or "").strip() else None


def runs(fmt, rows):
    """Each job's (GPUs, run start, run end, its wait or None) in epoch seconds, read from
    the file alone; the wait is (tier, submit, end of the wait, how it ended: "started",
    "never" or "open" at the trace's end)."""
    origin = TRACE_START.timestamp()
    if fmt in ("philly", "itp"):  # no start time: the run from the submit, no wait
        for row in rows:
            if fmt == "philly":
                at = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC).timestamp()
            else:
                at = origin + float(row["submission_time"])
            gpus = float(row["num_gpus" if fmt == "philly" else "num_gpu"])
            yield gpus, at, at + float(row["duration"]), None
        return
    times = ("creation_time", "scheduled_time", "deletion_time")
    end = max(number(row[name]) for row in rows for name in times if number(row[name]))
    for row in rows:
        created, scheduled, deleted = (number(row[name]) for name in times)
        if fmt == "alibaba-openb":
            milli = number(row["gpu_milli"])
            gpus = float(row["num_gpu"]) * (1.0 if milli is None else milli / 1000)
            tier = TIERS[row["qos"]]
        else:
            gpus, tier = float(row["gpu_request"] or 0), "production"
        stop = deleted if deleted is not None else end
        wait = None
        if created is None:  # a v2025 instance that existed before the trace: no wait
            scheduled = scheduled if scheduled is not None else 0.0
        elif scheduled is not None:
            wait = (tier, origin + created, origin + scheduled, "started")
        else:
            wait = (tier, origin + created, origin + stop, "never" if deleted else "open")
        if scheduled is None:
            yield gpus, 0.0, 0.0, wait
        else:
            yield gpus, origin + scheduled, origin + stop, wait


def recompute(fmt, path, start, end):
    """GPU-hours run inside [start, end), and per tier the waits of the jobs submitted inside
    it: (seconds, how the wait ended), a job still waiting censored at the window's end or
    the trace's, whichever is sooner."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    lo, hi = start.timestamp(), end.timestamp()
    seconds = 0.0
    waits = defaultdict(list)
    for gpus, run_from, run_to, wait in runs(fmt, rows):
        seconds += gpus * max(0.0, min(run_to, hi) - max(run_from, lo))
        if wait is not None and lo <= wait[1] < hi:
            tier, submit, until, how = wait
            if how == "open" or until > hi:
                until, how = min(until, hi), "open"
            waits[tier].append((until - submit, how))
    return seconds / 3600, waits


def build(ops, start, end):
    review = services.review_build(
        review_id=services.review_request(user=ops, start=start, end=end).pk
    )
    assert review.status == ReviewStatus.DONE, review.error
    return review


@pytest.mark.parametrize(
    "fmt, name, tier_map, first_window",
    [
        ("alibaba-openb", "openb_sample.csv", ",".join(f"{k}={v}" for k, v in TIERS.items()), 60),
        ("alibaba-v2025", "v2025_sample.csv", "LS=production", 14),
        ("philly", "philly_sample.csv", "*=key", None),
        ("itp", "itp_sample.csv", "*=key", 25),
    ],
)
def test_the_reviews_gpu_hours_and_waits_equal_the_files_own(
    ops, world, fmt, name, tier_map, first_window
):
    call_command(
        "import_trace",
        "--format",
        fmt,
        str(SAMPLES / name),
        "--tier-map",
        tier_map,
        "--project-map",
        "*=vision",
        "--pool-map",
        "*=training",
        "--flavor-map",
        "*=a100-80g",
        "--start",
        TRACE_START.isoformat(),
        stdout=StringIO(),
    )
    if fmt == "philly":  # the sample's submits: 29 September to October 2017
        windows = [datetime(2017, 9, 1, tzinfo=UTC), datetime(2017, 10, 8, tzinfo=UTC)]
        windows.append(datetime(2017, 12, 1, tzinfo=UTC))
    else:
        middle = TRACE_START + timedelta(days=first_window)
        windows = [TRACE_START, middle, TRACE_START + timedelta(days=200)]
    total = 0.0
    for start, end in itertools.pairwise(windows):
        review = build(ops, start, end)
        expected, waits = recompute(fmt, SAMPLES / name, start, end)
        assert expected > 10, (fmt, start)  # each window holds real usage
        used = sum(row["gpu_hours"] for row in review.metrics["service"]["by_project"])
        assert used == pytest.approx(
            expected, abs=0.01 * len(review.metrics["service"]["by_project"])
        )
        assert review.metrics["capacity"]["total"]["allocated_gpu_hours"] == pytest.approx(
            expected, abs=0.05
        )
        total += used
        by_tier = {row["tier"]: row for row in review.metrics["waits"]["by_tier"]}
        if fmt in ("philly", "itp"):  # no start times in the file: no wait is recorded
            assert review.metrics["waits"]["overall"]["jobs"] == 0
            continue
        assert set(by_tier) == set(waits), fmt
        for tier, values in waits.items():
            row = by_tier[tier]
            assert row["jobs"] == len(values), (fmt, tier)
            assert row["never_started"] == sum(how == "never" for _s, how in values), (fmt, tier)
            assert row["waiting_at_end"] == sum(how == "open" for _s, how in values), (fmt, tier)
            mean = sum(wait for wait, _how in values) / len(values)
            assert row["mean"] == pytest.approx(mean, abs=1), (fmt, tier)
            assert row["max"] == pytest.approx(max(wait for wait, _h in values), abs=1)
    everything, _waits = recompute(fmt, SAMPLES / name, windows[0], windows[-1])
    assert total == pytest.approx(everything, abs=0.05)


def test_a_reimport_gives_philly_jobs_stored_without_a_start_their_run(ops, world):
    """Jobs imported before a start was recorded (as the file has none) get it when the file
    is imported again, and the next rollup moves their GPU-hours in."""
    from queues.models import WorkloadJob
    from queues.services.workload.rollup import workload_hours_roll_up

    arguments = ["import_trace", "--format", "philly", str(SAMPLES / "philly_sample.csv")]
    arguments += ["--project-map", "*=vision", "--tier-map", "*=key", "--pool-map", "*=training"]
    arguments += ["--flavor-map", "*=a100-80g"]
    call_command(*arguments, stdout=StringIO())
    start, end = datetime(2017, 9, 1, tzinfo=UTC), datetime(2017, 12, 1, tzinfo=UTC)
    workload_hours_roll_up(until=end)
    WorkloadJob.objects.update(started_at=None)  # as an import before this fix stored them
    call_command(*arguments, stdout=StringIO())
    assert not WorkloadJob.objects.filter(started_at__isnull=True).exists()
    expected, _waits = recompute("philly", SAMPLES / "philly_sample.csv", start, end)
    review = build(ops, start, end)
    assert review.metrics["capacity"]["total"]["allocated_gpu_hours"] == pytest.approx(
        expected, abs=0.05
    )
