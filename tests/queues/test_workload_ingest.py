"""Ingesting workload events: the service (batched, idempotent) and the bulk API."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from rest_framework.test import APIClient

from queues.models import EventKind, JobState, WaitCategory, WorkloadEvent, WorkloadJob
from queues.selectors.definitions import job_wait
from queues.services.workload import JobEvent, events_ingest
from tests.conftest import token_for

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
URL = "/api/v1/workload-events/"


def event(n, job, kind, minutes, **extra):
    return JobEvent(
        source="lab",
        event_id=f"e{n}",
        job_id=job,
        time=T0 + timedelta(minutes=minutes),
        kind=kind,
        **extra,
    )


def lifecycle(world):
    return [
        event(1, "100", EventKind.SUBMITTED, 0, project=world.vision, gpus=4, flavor=world.a100),
        event(2, "100", EventKind.PENDING, 1, reason="QOSGrpGRES"),
        event(3, "100", EventKind.STARTED, 30),
        event(4, "100", EventKind.PREEMPTED, 90),
        event(5, "100", EventKind.REQUEUED, 90),
        event(6, "100", EventKind.PENDING, 91, reason="Resources"),
        event(7, "100", EventKind.STARTED, 100),
        event(8, "100", EventKind.ENDED, 160, state=JobState.COMPLETED, exit_code="0:0"),
        # Cancelled while pending: kept, with its wait and the reason it waited for.
        event(9, "101", EventKind.SUBMITTED, 0, project=world.vision, gpus=1),
        event(10, "101", EventKind.PENDING, 1, reason="Dependency"),
        event(11, "101", EventKind.ENDED, 45, state=JobState.CANCELLED),
    ]


def test_a_job_lifecycle_gives_waits_preemptions_and_requeues(world):
    result = events_ingest(events=lifecycle(world))
    assert (result.stored, result.jobs_created, result.duplicates) == (11, 2, 0)
    job = WorkloadJob.objects.get(job_id="100")
    assert job.state == JobState.COMPLETED
    assert (job.preemptions, job.requeues) == (1, 1)
    assert job.gpu_seconds_lost == 4 * 60 * 60  # 4 GPUs for the hour it ran before preemption
    # Its wait is the first one, submit to first start (the requeue's wait does not add).
    wait = job_wait(job, now=job.last_event_at)
    assert wait is not None and wait.seconds == 30 * 60 and wait.started
    assert job.category == WaitCategory.RESOURCE  # why it waited last
    cancelled = WorkloadJob.objects.get(job_id="101")
    assert cancelled.state == JobState.CANCELLED and cancelled.started_at is None
    wait = job_wait(cancelled, now=cancelled.last_event_at)
    assert wait is not None and wait.seconds == 45 * 60 and wait.never_started
    assert cancelled.category == WaitCategory.DEPENDENCY
    assert WorkloadEvent.objects.filter(job=job).count() == 8


def test_ingest_is_idempotent_and_order_free(world):
    events = lifecycle(world)
    events_ingest(events=list(reversed(events)), batch=3)
    first = list(WorkloadJob.objects.values().order_by("job_id"))
    again = events_ingest(events=events)
    assert (again.stored, again.duplicates) == (0, len(events))
    assert WorkloadEvent.objects.count() == len(events)
    assert list(WorkloadJob.objects.values().order_by("job_id")) == first


KINDS = [EventKind.SUBMITTED, EventKind.PENDING, EventKind.STARTED]


def test_batches_take_few_queries(world, django_assert_max_num_queries):
    events = [event(i, str(1000 + i // 3), KINDS[i % 3], i, reason="Priority") for i in range(3000)]
    # Per batch: read stored ids, read jobs, upsert jobs, insert events. SQLite splits the
    # statements at 999 parameters, PostgreSQL does not; either way a few dozen, not 3000.
    with django_assert_max_num_queries(100):
        result = events_ingest(events=events, batch=1000)
    assert result.stored == 3000 and result.jobs_created == 1000


def post(client, events):
    return client.post(URL, {"events": events}, format="json")


def item(**extra):
    return {
        "event_id": "k1",
        "source": "gke-1",
        "scheduler": "kueue",
        "job_id": "ns/train-1",
        "time": "2026-11-01T08:00:00Z",
        "kind": "pending",
        "project": "vision",
        "flavor": "a100-80g",
        "gpus": 8,
        "reason": "WaitingForQuota",
        "message": "couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor a100-80g, 8 more needed",
        **extra,
    }


@pytest.fixture
def ops_api(ops):
    client = APIClient()
    client.force_authenticate(ops)
    return client


def test_api_ingests_and_classifies_kueue_waiting_for_quota(world, ops_api):
    # Vision runs 36 of its 40-GPU maximum (guarantee 24): 8 more cannot be borrowed.
    running = item(event_id="r1", job_id="ns/big", kind="started", gpus=36, reason="", message="")
    assert post(ops_api, [running]).status_code == 200
    response = post(ops_api, [item()])
    assert response.status_code == 200, response.json()
    assert response.json()["by_category"] == {"quota": 1}
    assert WorkloadJob.objects.get(job_id="ns/train-1").category == WaitCategory.QUOTA
    # Under its guarantee, the same Kueue reason means the cohort lent the GPUs out.
    post(ops_api, [item(event_id="e2", job_id="ns/big", kind="ended", state="completed")])
    response = post(ops_api, [item(event_id="k2", job_id="ns/train-2")])
    assert response.json()["by_category"] == {"resource": 1}
    # The same batch again: nothing stored twice.
    again = post(ops_api, [item(event_id="k2", job_id="ns/train-2")]).json()
    assert (again["stored"], again["duplicates"]) == (0, 1)


def test_the_counts_add_up_with_repeats_inside_one_batch(world, ops_api):
    first = item(event_id="d1", job_id="ns/dup")
    answer = post(ops_api, [first, dict(first), item(event_id="d2", job_id="ns/dup")]).json()
    assert (answer["received"], answer["stored"], answer["duplicates"]) == (3, 2, 1)
    assert answer["received"] == answer["stored"] + answer["duplicates"] + answer["rejected"]


@pytest.mark.parametrize(
    "body",
    [
        "not json at all",
        {"events": []},
        {"events": "nope"},
        {"nothing": 1},
        [{"event_id": "x"}],
    ],
)
def test_api_rejects_malformed_bodies_whole(world, ops_api, body):
    response = ops_api.post(URL, body, format="json")
    assert response.status_code == 400
    assert WorkloadEvent.objects.count() == 0


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"time": "yesterday"}, "time"),
        ({"kind": "exploded"}, "kind"),
        ({"scheduler": "pbs"}, "scheduler"),
        ({"gpus": -1}, "gpus"),
        ({"project": "nope"}, "project"),
        ({"flavor": "tpu"}, "flavor"),
        ({"tier": "gold"}, "tier"),
        ({"cluster": "nowhere"}, "cluster"),
        ({"kind": "ended", "state": ""}, "state"),
        ({"source": "", "cluster": ""}, "source"),
        ({"event_id": ""}, "event_id"),
    ],
)
def test_api_reports_errors_per_item_and_stores_nothing(world, ops_api, bad, field):
    good = item(event_id="ok")
    response = post(ops_api, [good, item(**{"event_id": "bad", **bad})])
    assert response.status_code == 400, response.json()
    errors = response.json()["fields"]["events"]
    assert errors[0] == {} and field in errors[1]
    assert WorkloadEvent.objects.count() == 0


def test_api_access(world, api_client, member, ci_user, ci_token):
    assert api_client.post(URL, {"events": [item()]}, format="json").status_code == 401
    api_client.force_authenticate(member)
    assert post(api_client, [item()]).status_code == 403
    ci_user.user_permissions.add(Permission.objects.get(codename="add_workloadevent"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    assert post(client, [item()]).status_code == 200


def test_events_of_the_same_second_replay_in_life_order(world):
    events = [
        event(1, "7", EventKind.ENDED, 5, state=JobState.CANCELLED),
        event(2, "7", EventKind.STARTED, 5),
        event(3, "7", EventKind.SUBMITTED, 0, project=world.vision, gpus=1),
    ]
    events_ingest(events=events)
    assert WorkloadJob.objects.get(job_id="7").state == JobState.CANCELLED


def test_api_rejects_a_contradictory_event_alone_and_says_why(world, ops_api):
    events = [
        item(event_id="a1", job_id="ns/x", kind="started", time="2026-11-01T08:00:00Z"),
        item(
            event_id="a2",
            job_id="ns/x",
            kind="ended",
            state="completed",
            time="2026-11-01T09:00:00Z",
        ),
        item(event_id="a3", job_id="ns/x", kind="started", time="2026-11-01T10:00:00Z"),
    ]
    response = post(ops_api, events)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["stored"], body["rejected"]) == (2, 1)
    assert body["errors"][0]["event_id"] == "a3" and "ended" in body["errors"][0]["error"]
    assert WorkloadJob.objects.get(job_id="ns/x").state == JobState.COMPLETED


def test_the_documented_ten_thousand_events_fit_and_a_larger_body_names_the_limit(
    world, ops, settings
):
    """10,000 realistic events (about 3.9 MB, over the site's 2.5 MB body limit) are taken;
    a body over the endpoint's own limit is the API's JSON 413, naming the limit."""
    from queues.apis.workload import MAX_BODY_BYTES

    events = [
        item(event_id=f"big-{n}", job_id=f"ns/big-{n % 500}", message="m" * 160)
        for n in range(10_000)
    ]
    body = json.dumps({"events": events})
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE < len(body) < MAX_BODY_BYTES
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=token_for(ops))
    response = client.post(reverse("api_workload_events"), body, content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["received"] == 10_000
    too_big = client.post(
        reverse("api_workload_events"),
        b"x" * (MAX_BODY_BYTES + 1),
        content_type="application/json",
    )
    assert too_big.status_code == 413 and too_big["Content-Type"] == "application/json"
    assert too_big.json()["error"] == "body_too_large"
    assert f"{MAX_BODY_BYTES:,} bytes" in too_big.json()["detail"]
    # Elsewhere the site's limit holds, with the same JSON answer.
    elsewhere = client.post(
        reverse("api_change_propose"),
        b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1),
        content_type="application/json",
    )
    assert elsewhere.status_code == 413 and elsewhere.json()["error"] == "body_too_large"
