"""``import_trace`` maps: ``--pool-map`` and ``--flavor-map`` beside the project and tier maps;
re-importing with new maps updates what was stored (and the rollup moves the hours); before
it writes, the importer says how many jobs each map leaves out, and refuses them unless
``--allow-unmapped`` (``--dry-run`` writes nothing); bad maps are clear errors."""

import csv
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum

from queues.models import WorkloadEvent, WorkloadHour, WorkloadJob, WorkloadWait
from queues.selectors.definitions import job_pool_id, pool_maps
from queues.services.workload.rollup import workload_hours_roll_up

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
OPENB = TRACES / "openb_sample.csv"
ITP = TRACES / "itp_sample.csv"
START = datetime(2026, 1, 1, tzinfo=UTC)
TIER_MAP = "LS=production,Burstable=key,BE=exploratory,Guaranteed=regular"


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_trace", *args, "--start", START.isoformat(), stdout=out)
    return out.getvalue()


def qos_counts() -> Counter[str]:
    with OPENB.open(newline="") as handle:
        return Counter(row["qos"] for row in csv.DictReader(handle))


def test_pool_and_flavor_maps_key_by_the_traces_cluster(world):
    out = run(
        "--format", "itp", str(ITP), "--project-map", "*=vision", "--tier-map", "*=regular",
        "--pool-map", "*=inference", "--flavor-map", "*=a100-80g",
    )  # fmt: skip
    assert "Every job has a project, tier, pool and flavor." in out
    jobs = WorkloadJob.objects.filter(source="trace:itp")
    assert jobs.count() == 200
    assert set(jobs.values_list("pool__slug", "flavor__slug")) == {("inference", "a100-80g")}
    # The pool a source names wins over the project's quota pool (training).
    maps = pool_maps()
    assert {job_pool_id(job=job, maps=maps) for job in jobs} == {world.inference.pk}
    # Per cluster: ITP's cluster is the pool map's key.
    out = run(
        "--format", "itp", str(ITP), "--project-map", "*=vision", "--tier-map", "*=regular",
        "--pool-map", "cluster01=training,*=inference", "--flavor-map", "*=a100-80g",
    )  # fmt: skip
    assert "200 stored jobs remapped" in out
    assert set(jobs.values_list("pool__slug", flat=True)) == {"training"}  # all of cluster01


def test_a_flavor_map_gives_the_quotas_pool(world):
    out = run(
        "--format", "alibaba-openb", str(OPENB), "--project-map", "*=vision",
        "--tier-map", TIER_MAP, "--flavor-map", "*=a100-80g",
    )  # fmt: skip
    # No --pool-map: vision's A100 quota is in training, so every job has a pool.
    assert "Every job has a project, tier, pool and flavor." in out
    workload_hours_roll_up(until=START + timedelta(days=200))
    assert set(WorkloadWait.objects.values_list("pool__slug", flat=True)) == {"training"}


def test_reimporting_with_new_maps_updates_the_stored_jobs_and_moves_the_hours(world):
    run("--format", "alibaba-openb", str(OPENB), "--project-map", "*=speech", "--allow-unmapped")
    jobs = WorkloadJob.objects.filter(source="trace:alibaba-openb")
    assert not jobs.filter(tier__isnull=False).exists()
    until = START + timedelta(days=200)
    workload_hours_roll_up(until=until)
    total = WorkloadHour.objects.aggregate(s=Sum("gpu_seconds"))["s"]
    events = WorkloadEvent.objects.count()

    out = run(
        "--format", "alibaba-openb", str(OPENB), "--project-map", "*=vision",
        "--tier-map", TIER_MAP, "--pool-map", "*=inference", "--flavor-map", "*=h100-80g",
    )  # fmt: skip
    assert "0 stored" in out and "300 stored jobs remapped" in out
    assert WorkloadEvent.objects.count() == events
    tiers = dict(item.split("=") for item in TIER_MAP.split(","))
    expected = Counter(tiers[qos] for qos, n in qos_counts().items() for _ in range(n))
    assert Counter(jobs.values_list("tier__slug", flat=True)) == expected
    assert set(jobs.values_list("project__slug", "pool__slug", "flavor__slug")) == {
        ("vision", "inference", "h100-80g")
    }
    # The next rollup rereads the remapped jobs once and moves their hours and waits.
    counts = workload_hours_roll_up(until=until)
    assert counts["jobs"] == 300
    hours = WorkloadHour.objects.values_list("project__slug", "pool__slug", "flavor__slug")
    assert set(hours) == {("vision", "inference", "h100-80g")}
    # The same GPU-seconds (each hour row is rounded to whole seconds).
    assert WorkloadHour.objects.aggregate(s=Sum("gpu_seconds"))["s"] == pytest.approx(total, abs=50)
    assert Counter(WorkloadWait.objects.values_list("tier__slug", flat=True)) == expected
    # The same maps again change nothing, and nothing is reread.
    assert "0 stored jobs remapped" in run(
        "--format", "alibaba-openb", str(OPENB), "--project-map", "*=vision",
        "--tier-map", TIER_MAP, "--pool-map", "*=inference", "--flavor-map", "*=h100-80g",
    )  # fmt: skip
    assert workload_hours_roll_up(until=until)["jobs"] == 0


def test_unmapped_jobs_are_counted_before_anything_is_written_and_refused(world):
    out = StringIO()
    with pytest.raises(CommandError, match="Nothing written: the maps leave jobs unmapped"):
        call_command(
            "import_trace", "--format", "alibaba-openb", str(OPENB),
            "--project-map", "*=vision", "--tier-map", "LS=production", stdout=out,
        )  # fmt: skip
    said = out.getvalue()
    counts = qos_counts()
    assert "Read 300 jobs" in said
    others = sum(n for qos, n in counts.items() if qos != "LS")
    assert f"no tier for {others} jobs" in said
    for qos in ("BE", "Burstable", "Guaranteed"):
        assert counts[qos], qos  # the sample holds each class, so each key must be named
        assert f"{qos} ({counts[qos]})" in said
    assert "no pool for 300 jobs; their keys: (none) (300)" in said
    assert "no flavor for 300 jobs" in said and "--flavor-map KEY=SLUG" in said
    assert not WorkloadJob.objects.exists() and not WorkloadEvent.objects.exists()


def test_a_dry_run_says_what_it_would_store_and_writes_nothing(world):
    out = run("--format", "alibaba-v2025", str(TRACES / "v2025_sample.csv"), "--dry-run")
    assert "Read 238 jobs: 83 still open at the trace's end" in out
    assert "72 without a recorded wait" in out
    assert "no project for 238 jobs" in out
    assert "Dry run: nothing written." in out
    assert not WorkloadJob.objects.exists() and not WorkloadEvent.objects.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--pool-map", "*=nowhere"], "--pool-map: no pool 'nowhere'"),
        (["--flavor-map", "*=tpu"], "--flavor-map: no flavor 'tpu'"),
        (["--flavor-map", "a100-80g"], "--flavor-map: 'a100-80g' is not KEY=SLUG"),
        (["--pool-map", "*=training,*=inference"], "--pool-map: '\\*' is mapped twice"),
        (["--project-map", "*=nope", "--tier-map", "*=gold"], "no project 'nope'; --tier-map"),
    ],
)
def test_a_bad_map_is_a_clear_error_and_writes_nothing(world, args, message):
    with pytest.raises(CommandError, match=message):
        run("--format", "alibaba-openb", str(OPENB), "--allow-unmapped", *args)
    assert not WorkloadJob.objects.exists() and not WorkloadEvent.objects.exists()


def test_a_bad_map_exits_non_zero_from_the_shell(world, capsys):
    with pytest.raises(SystemExit) as exit_:
        from django.core.management import ManagementUtility

        ManagementUtility(
            ["manage.py", "import_trace", "--format", "itp", str(ITP), "--pool-map", "*=nowhere"]
        ).execute()
    assert exit_.value.code == 1
    assert "--pool-map: no pool 'nowhere'" in capsys.readouterr().err
