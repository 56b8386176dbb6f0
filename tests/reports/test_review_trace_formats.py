"""Per trace format, the review's per-tier waits equal an independent recomputation from the
file under the documented definition (docs/definitions.md: first wait, submit → first start,
a job that never started waits until its end, one still waiting is censored at the window's
end), and a source that cannot tell waits records none.

The files are the small committed samples of ``tests/fixtures/traces`` (provenance there), so
the test runs without the larger samples beside the repository."""

import csv
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from queues.models import WorkloadJob, WorkloadWait
from reports import services
from reports.models import ReviewStatus
from tests.conftest import login

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
TIER_MAP = "LS=production,Burstable=key,BE=exploratory,Guaranteed=regular"
TIERS = dict(item.split("=") for item in TIER_MAP.split(","))


def percentile(values, fraction):
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def number(value):
    return float(value) if (value or "").strip() else None


def recompute(path, tier_of, window_end_seconds):
    """Per tier: the waits in seconds and how many still wait at the window's end (a job
    still waiting at the trace's end is censored there, or at the window's end if sooner)."""
    waits, censored = defaultdict(list), defaultdict(int)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    times = ("creation_time", "scheduled_time", "deletion_time")
    trace_end = max(number(row[name]) for row in rows for name in times if number(row[name]))
    censor_at = min(window_end_seconds, trace_end)
    for row in rows:
        created = number(row["creation_time"])
        if created is None:  # existed before the trace: no wait
            continue
        end = number(row["scheduled_time"])
        if end is None:
            end = number(row["deletion_time"])
        if end is None:
            end, censored[tier_of(row)] = censor_at, censored[tier_of(row)] + 1
        waits[tier_of(row)].append(end - created)
    return waits, censored


def build(ops, start, end):
    review = services.review_build(
        review_id=services.review_request(user=ops, start=start, end=end).pk
    )
    assert review.status == ReviewStatus.DONE, review.error
    return review


def imported(fmt, name, *extra):
    call_command(
        "import_trace",
        "--format",
        fmt,
        str(SAMPLES / name),
        "--allow-unmapped",
        *extra,
        stdout=StringIO(),
    )


@pytest.mark.parametrize(
    "fmt, name, tier_map, tier_of, days",
    [
        ("alibaba-openb", "openb_sample.csv", TIER_MAP, lambda row: TIERS[row["qos"]], 150),
        ("alibaba-v2025", "v2025_sample.csv", "LS=production", lambda row: "production", 40),
    ],
)
def test_the_reviews_per_tier_waits_equal_the_files_own(
    ops, world, fmt, name, tier_map, tier_of, days
):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=days)
    imported(
        fmt, name, "--tier-map", tier_map, "--project-map", "*=vision", "--start", start.isoformat()
    )
    review = build(ops, start, end)
    waits, censored = recompute(SAMPLES / name, tier_of, (end - start).total_seconds())
    by_tier = {row["tier"]: row for row in review.metrics["waits"]["by_tier"]}
    assert set(by_tier) == set(waits)
    for tier, values in waits.items():
        row = by_tier[tier]
        assert row["jobs"] == len(values), tier
        assert row["waiting_at_end"] == censored[tier], tier
        for key, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            assert row[key] == pytest.approx(percentile(values, fraction), abs=1), (tier, key)
    assert review.metrics["waits"]["overall"]["jobs"] == sum(len(v) for v in waits.values())


def test_v2025_instances_that_existed_before_the_trace_are_not_new_waits(ops, world):
    imported("alibaba-v2025", "v2025_sample.csv", "--tier-map", "LS=production")
    before = WorkloadJob.objects.filter(waits_recorded=False).count()
    assert before == 72  # the sample's rows without a creation time
    assert WorkloadWait.objects.filter(job__waits_recorded=False).count() == 0


@pytest.mark.parametrize(
    "fmt, name, start, end",
    [
        (
            "philly",
            "philly_sample.csv",
            datetime(2017, 10, 1, tzinfo=UTC),
            datetime(2017, 11, 1, tzinfo=UTC),
        ),
        (
            "itp",
            "itp_sample.csv",
            datetime(2026, 1, 1, tzinfo=UTC),
            datetime(2026, 2, 15, tzinfo=UTC),
        ),
    ],
)
def test_a_source_without_start_times_records_no_waits(ops, world, fmt, name, start, end):
    imported(
        fmt, name, "--tier-map", "*=key", "--project-map", "*=vision", "--start", start.isoformat()
    )
    jobs = WorkloadJob.objects.filter(source=f"trace:{fmt}")
    assert jobs.count() == 200 and not jobs.filter(waits_recorded=True).exists()
    review = build(ops, start, end)
    # Run times are not waits: the review counts no wait at all for these jobs, and says so.
    assert review.metrics["waits"]["overall"]["jobs"] == 0
    assert not WorkloadWait.objects.exists()
    inside = jobs.filter(submitted_at__gte=start, submitted_at__lt=end).count()
    assert inside > 150
    assert review.metrics["waits"]["not_recorded"] == [{"source": f"trace:{fmt}", "jobs": inside}]
    assert review.project_metrics["vision"]["waits"]["not_recorded"] == [
        {"source": f"trace:{fmt}", "jobs": inside}
    ]
    page = login(ops).get(reverse("report_detail", args=[review.pk])).content.decode()
    assert "Waits not recorded for this source:" in page and f"trace:{fmt}" in page
    assert "every rule worked as intended" not in page
