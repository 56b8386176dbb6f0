"""Trace rows that cannot be a job are refused with their line: the import exits 1 and writes
nothing, not even the good rows before the bad one (docs/definitions.md, "What a trace import
refuses")."""

import pytest
from django.core.management import CommandError, call_command

from queues.models import WorkloadEvent, WorkloadJob

OPENB = "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
OPENB_GOOD = "good,1,1000,LS,Running,0,600,10\n"
V2025 = "instance_sn,app_name,gpu_request,creation_time,scheduled_time,deletion_time\n"
V2025_GOOD = "good,app_1,1,10,20,600\n"
PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
PHILLY_GOOD = "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
ITP = "cluster,job_id,submission_time,duration,num_gpu\n"
ITP_GOOD = "cluster01,good,1932025,2429,8\n"

BAD_ROWS = [
    # negative durations
    ("philly", PHILLY + PHILLY_GOOD + "2017-10-09 08:00:00,-3600,4,-14400,11cb48\n", "negative"),
    ("itp", ITP + ITP_GOOD + "cluster01,bad,1932025,-600,1\n", "negative"),
    # scheduled before created
    ("alibaba-openb", OPENB + OPENB_GOOD + "bad,1,1000,LS,Running,500,900,100\n", "before its"),
    ("alibaba-v2025", V2025 + V2025_GOOD + "bad,app_1,1,500,100,900\n", "before its"),
    # a job id twice in one file
    ("itp", ITP + ITP_GOOD + "cluster02,good,1932100,60,1\n", "repeats line 2"),
    ("alibaba-openb", OPENB + OPENB_GOOD + "good,1,1000,LS,Running,0,700,10\n", "repeats line 2"),
    ("alibaba-v2025", V2025 + V2025_GOOD + "good,app_1,1,10,20,700\n", "repeats line 2"),
    # times far outside the trace's window, absurd years
    ("itp", ITP + ITP_GOOD + "cluster01,far,99792000000,600,1\n", "days after the trace's start"),
    ("alibaba-openb", OPENB + OPENB_GOOD + "early,1,1000,LS,Running,-86400000,0,0\n", "before"),
    ("alibaba-v2025", V2025 + V2025_GOOD + "late,app_1,1,10,20,1e12\n", "days after"),
    ("philly", PHILLY + PHILLY_GOOD + "5194-01-01 00:00:00,60,1,60,11cb48\n", "from 2000 to now"),
    ("philly", PHILLY + PHILLY_GOOD + "1970-01-01 00:00:00,60,1,60,11cb48\n", "from 2000 to now"),
    ("itp", ITP + ITP_GOOD + "cluster01,long,1932025,1e10,1\n", "longer than"),
    # more than one GPU per GPU
    ("alibaba-openb", OPENB + OPENB_GOOD + "shared,1,5000,LS,Running,0,600,10\n", "gpu_milli 5000"),
    ("alibaba-openb", OPENB + OPENB_GOOD + "minus,1,-10,LS,Running,0,600,10\n", "gpu_milli -10"),
]


@pytest.mark.parametrize("fmt, text, says", BAD_ROWS)
def test_an_impossible_row_is_refused_with_its_line_and_nothing_is_written(
    world, tmp_path, fmt, text, says
):
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    with pytest.raises(CommandError) as refused:
        call_command("import_trace", "--format", fmt, str(trace), "--allow-unmapped")
    assert refused.value.returncode == 1
    message = str(refused.value)
    assert "trace.csv line 3:" in message and says in message, message
    assert not WorkloadJob.objects.exists() and not WorkloadEvent.objects.exists()


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("philly", PHILLY + PHILLY_GOOD + "2017-10-09 08:00:00,0,1,0,11cb48\n"),
        ("itp", ITP + ITP_GOOD + "cluster01,zero,0,600,1\n"),
        ("alibaba-openb", OPENB + OPENB_GOOD + "edge,1,1000,LS,Running,0,600,0\n"),
    ],
)
def test_the_edges_of_the_window_are_accepted(world, tmp_path, fmt, text):
    """A run of 0 s, a time at the trace's very start and a whole GPU are real rows."""
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    call_command("import_trace", "--format", fmt, str(trace), "--allow-unmapped")
    assert WorkloadJob.objects.count() == 2
