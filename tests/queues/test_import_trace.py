"""``import_trace``: the repository's trace samples (``tests/fixtures/traces``, rows of the
public traces, provenance in its ``PROVENANCE.md``) imported through the ingest path."""

import csv
from collections import defaultdict
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from queues.models import JobState, WorkloadEvent, WorkloadJob
from queues.selectors.definitions import job_wait

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
OPENB = TRACES / "openb_sample.csv"
TIER_MAP = "LS=production,Burstable=key,BE=exploratory,Guaranteed=regular"


def rows(path: Path) -> int:
    with path.open(newline="") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def run(*args):
    out = StringIO()
    call_command("import_trace", *args, "--allow-unmapped", stdout=out)
    return out.getvalue()


def test_openb_per_tier_waits_equal_the_traces_own(world):
    run(
        "--format", "alibaba-openb", str(OPENB), "--tier-map", TIER_MAP, "--project-map", "*=vision"
    )
    expected: dict[str, list[float]] = defaultdict(list)
    pending = 0
    with OPENB.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["scheduled_time"]:
                expected[row["qos"]].append(
                    float(row["scheduled_time"]) - float(row["creation_time"])
                )
            else:
                pending += 1
    tiers = dict(item.split("=") for item in TIER_MAP.split(","))
    for qos, waits in expected.items():
        # Each job's wait as docs/definitions.md defines it (submit to first start).
        stored = [
            wait.seconds
            for job in WorkloadJob.objects.filter(
                source="trace:alibaba-openb", tier__slug=tiers[qos], started_at__isnull=False
            )
            if (wait := job_wait(job, now=timezone.now())) is not None
        ]
        assert len(stored) == len(waits), qos
        assert sorted(stored) == sorted(int(w) for w in waits), qos
        assert sum(stored) / len(stored) == pytest.approx(sum(waits) / len(waits), abs=1), qos
    never_started = WorkloadJob.objects.filter(source="trace:alibaba-openb", started_at=None)
    assert never_started.count() == pending
    assert WorkloadJob.objects.filter(project__slug="vision").count() == rows(OPENB)
    # Importing again stores nothing twice.
    events = WorkloadEvent.objects.count()
    assert "0 stored" in run("--format", "alibaba-openb", str(OPENB), "--tier-map", TIER_MAP)
    assert WorkloadEvent.objects.count() == events


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("v2025_sample.csv", "alibaba-v2025"),
        ("philly_sample.csv", "philly"),
        ("itp_sample.csv", "itp"),
    ],
)
def test_other_formats_import_without_inventing_waits(world, name, fmt):
    path = TRACES / name
    jobs = rows(path)
    run("--format", fmt, str(path), "--project-map", "*=speech")
    imported = WorkloadJob.objects.filter(source=f"trace:{fmt}")
    assert imported.count() == jobs
    assert not imported.exclude(project__slug="speech").exists()
    if fmt in ("philly", "itp"):  # no start times: no wait is made up
        assert all(job_wait(job, now=timezone.now()) is None for job in imported)
        assert imported.filter(state=JobState.COMPLETED).count() == jobs


def test_a_philly_time_with_an_offset_is_converted_not_relabelled(world, tmp_path):
    """Philly's times carry no offset and read as UTC; a time written with one keeps its
    instant (07:00 at +08:00 is 23:00 UTC the day before), it is not relabelled UTC."""
    path = tmp_path / "philly.csv"
    path.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:00:00+08:00,60.0,1,60.0,vc1\n"
        "2017-10-09 07:00:00,60.0,1,60.0,vc1\n"
    )
    run("--format", "philly", str(path), "--project-map", "*=speech")
    submitted = sorted(
        WorkloadJob.objects.filter(source="trace:philly").values_list("submitted_at", flat=True)
    )
    assert [moment.isoformat() for moment in submitted] == [
        "2017-10-08T23:00:00+00:00",
        "2017-10-09T07:00:00+00:00",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "philly", "no-such-file.csv"], "No file"),
        (["--format", "alibaba-openb", "{openb}", "--project-map", "LS"], "not KEY=SLUG"),
        (["--format", "alibaba-openb", "{openb}", "--tier-map", "LS=gold"], "gold"),
        (["--format", "alibaba-openb", "{openb}", "--start", "yesterday"], "ISO 8601"),
        (["--format", "philly", "{openb}"], "missing columns"),
    ],
)
def test_bad_input_is_a_clear_error_and_stores_nothing(world, args, message):
    args = [arg.replace("{openb}", str(OPENB)) for arg in args]
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert WorkloadEvent.objects.count() == 0


def test_a_bad_row_stores_nothing(world, tmp_path):
    bad = tmp_path / "itp.csv"
    bad.write_text(
        "cluster,job_id,submission_time,duration,num_gpu\n"
        "cluster01,a,10,600,1\n"
        "cluster01,b,ten,600,1\n"
    )
    with pytest.raises(CommandError, match="line 3"):
        run("--format", "itp", str(bad))
    assert WorkloadEvent.objects.count() == 0


@pytest.mark.parametrize(
    "line",
    [
        ",,,,,surplus\n",  # one field more than the header names (csv keys it None)
        "cluster01,b,20,600,1,surplus\n",
        "cluster01,b,20,600,1e400\n",  # GPUs no number holds
        "cluster01,b,20,1e400,1\n",  # a run time no date holds
        'cluster01,"' + "b" * 200_000 + '",20,600,1\n',  # a field past csv's size limit
    ],
    ids=["surplus-only", "surplus", "gpus-overflow", "duration-overflow", "huge-field"],
)
def test_a_malformed_row_is_a_clear_error_with_its_line(world, tmp_path, line):
    bad = tmp_path / "itp.csv"
    bad.write_text("cluster,job_id,submission_time,duration,num_gpu\ncluster01,a,10,600,1\n" + line)
    with pytest.raises(CommandError, match="line 3"):
        run("--format", "itp", str(bad))
    assert WorkloadEvent.objects.count() == 0


@pytest.mark.parametrize(
    "fmt, header, rows",
    [
        (
            "alibaba-openb",
            "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n",
            "a,1,1000,LS,Running,0,600,10\n ,1,1000,LS,Running,0,600,10\n",
        ),
        (
            "itp",
            "cluster,job_id,submission_time,duration,num_gpu\n",
            "cluster01,a,10,600,1\ncluster01,,20,600,1\n",
        ),
    ],
)
def test_a_row_without_a_job_id_is_refused_not_left_out(world, tmp_path, fmt, header, rows):
    """The ingest rejects an event without a job id; the import said nothing of it, stored
    the other rows and exited 0."""
    trace = tmp_path / "trace.csv"
    trace.write_text(header + rows)
    with pytest.raises(CommandError, match="line 3: no job id"):
        run("--format", fmt, str(trace))
    assert WorkloadEvent.objects.count() == 0


def test_a_job_named_twice_is_refused_with_both_lines(world, tmp_path):
    """One pod named twice: two rows would merge into one job (its second row would start it
    after its first ended it). The scan refuses the file with both lines; nothing is stored."""
    trace = tmp_path / "openb.csv"
    trace.write_text(
        "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "b,1,1000,LS,Running,0,600,10\n"
        "a,1,1000,LS,Pending,0,600,\n"
        "a,1,1000,LS,Running,0,2000,1000\n"
    )
    with pytest.raises(CommandError, match="line 4: job id 'a' repeats line 3"):
        run("--format", "alibaba-openb", str(trace))
    assert WorkloadEvent.objects.count() == 0
