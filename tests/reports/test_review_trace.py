"""A review built from a real trace: the Alibaba openb sample (``tests/fixtures/traces``), imported
through ``import_trace``, builds without errors, and its per-tier waits are the trace's own
``scheduled_time − creation_time`` (pods deleted while pending count with their wait up to the
deletion, as the metrics count jobs cancelled while pending)."""

import csv
import math
from collections import defaultdict
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from reports import services
from reports.models import ReviewStatus

OPENB = Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "openb_sample.csv"
TIER_MAP = "LS=production,Burstable=key,BE=exploratory,Guaranteed=regular"
START = datetime(2026, 1, 1, tzinfo=UTC)
END = datetime(2026, 6, 1, tzinfo=UTC)  # the sample's 300 pods span 117 days


def percentile(values: list[float], fraction: float) -> float:
    """Continuous interpolation, as PostgreSQL's ``percentile_cont``."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def trace_waits() -> dict[str, list[float]]:
    waits: dict[str, list[float]] = defaultdict(list)
    with OPENB.open(newline="") as handle:
        for row in csv.DictReader(handle):
            created = float(row["creation_time"])
            ended = row["scheduled_time"] or row["deletion_time"]
            waits[row["qos"]].append(float(ended) - created)
    return waits


def test_the_openb_sample_builds_a_review_with_the_traces_own_waits(ops, world):
    call_command(
        "import_trace",
        "--format",
        "alibaba-openb",
        str(OPENB),
        "--tier-map",
        TIER_MAP,
        "--project-map",
        "*=vision",
        "--start",
        START.isoformat(),
        "--allow-unmapped",
        stdout=StringIO(),
    )
    review = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )
    assert review.status == ReviewStatus.DONE, review.error
    tiers = dict(item.split("=") for item in TIER_MAP.split(","))
    by_tier = {row["tier"]: row for row in review.metrics["waits"]["by_tier"]}
    for qos, waits in trace_waits().items():
        row = by_tier[tiers[qos]]
        assert row["jobs"] == len(waits), qos
        assert row["waiting_at_end"] == 0, qos
        for key, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            assert row[key] == pytest.approx(percentile(waits, fraction), abs=1), (qos, key)
        assert row["max"] == pytest.approx(max(waits), abs=1), qos
    jobs = sum(len(waits) for waits in trace_waits().values())
    assert review.metrics["waits"]["overall"]["jobs"] == jobs == 300
    # The lead's view of the one project holds the same waits.
    assert review.project_metrics["vision"]["waits"]["overall"]["jobs"] == jobs
