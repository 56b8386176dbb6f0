"""A rule change replayed against the rules in force: the service, the task, the API, the
page (English and Chinese) and the links to it."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse

from governance import services
from governance.celery import app
from governance.models import RevisionTrigger, TokenScope
from governance.services.changes.spec import EditSpec
from queues import tasks
from queues.models import ChangeReplay, EventKind, JobState, ReplayPreemption, ReplayStatus
from queues.replay.results import delta
from queues.services import change_replay_start, change_replay_window
from queues.services.replay import fingerprint
from queues.services.workload.ingest import JobEvent, events_ingest
from queues.services.workload.rollup import workload_hours_roll_up
from reports.selectors.change_replay import (
    replay_metrics,
    replay_waits,
    side_figures,
)
from reports.selectors.review import review_metrics
from reports.selectors.review._common import Names
from tests.conftest import login, token_for

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
T0 = datetime(2026, 11, 2, 8, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture
def eager():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def _record(world, jobs: int = 4, *, one_at_a_time: bool = False) -> None:
    """``jobs`` exploratory jobs of speech, 8 A100s each, all submitted at T0 and run 2 h at
    once (64 A100s in the training pool: nothing waited) — or ``one_at_a_time``, as they
    would under a cap of 8 GPUs (waits 0, 2, 4, 6 h, held by the cap)."""
    events = []
    for n in range(jobs):
        began = T0 + (2 * n * HOUR if one_at_a_time else 0 * HOUR)
        common = {
            "source": "test",
            "job_id": str(n),
            "project": world.speech,
            "flavor": world.a100,
            "gpus": 8,
            "tier": world.exploratory,
            "user_name": f"user{n}",
        }
        events += [
            JobEvent(
                event_id=f"{n}:s",
                time=T0,
                kind=EventKind.SUBMITTED,
                state=JobState.PENDING,
                submitted_at=T0,
                # Held by the tier's cap (a quota wait), as the replay under the cap says.
                reason="QOSGrpGRES" if one_at_a_time and n else "",
                **common,
            ),
            JobEvent(
                event_id=f"{n}:r",
                time=began,
                kind=EventKind.STARTED,
                state=JobState.RUNNING,
                **common,
            ),
            JobEvent(
                event_id=f"{n}:e",
                time=began + 2 * HOUR,
                kind=EventKind.ENDED,
                state=JobState.COMPLETED,
                **common,
            ),
        ]
    assert events_ingest(events=events).stored == len(events)


def _cap_change(world):
    """Cap the exploratory tier at 8 GPUs: its jobs then run one at a time."""
    return services.rule_change_create(
        user=world.ops,
        reason="Keep sweeps small",
        edits=[EditSpec(target=world.exploratory, field="max_gpus_total", value=8)],
        title="Cap exploratory",
        submit=False,
    )


def _replayed(world, django_capture_on_commit_callbacks) -> ChangeReplay:
    _record(world)
    change = _cap_change(world)
    with django_capture_on_commit_callbacks(execute=True):
        run, queued = change_replay_start(change=change, user=world.ops, now=NOW)
    assert queued
    run.refresh_from_db()
    return run


def test_a_replay_shows_what_the_change_would_do(world, eager, django_capture_on_commit_callbacks):
    run = _replayed(world, django_capture_on_commit_callbacks)
    assert (run.status, run.progress, run.error) == (ReplayStatus.DONE, 100, "")
    start, end = change_replay_window(now=NOW)
    assert (end - start).days == 30 and end == datetime(2026, 11, 20, tzinfo=UTC)
    assert run.inputs["start"] == start.isoformat()
    assert run.inputs["edits"] == [
        ["prioritytier", world.exploratory.pk, "max_gpus_total", None, 8]
    ]
    result = run.result
    assert result["jobs"] == 4 and result["not_modelled"] == []
    # The waits: the review's queries over the run's replayed waits.
    before, after = (
        {row["tier"]: row for row in replay_waits(run=run, side=side)["by_tier"]}["exploratory"]
        for side in ("in_force", "with_change")
    )
    # In force all four start at once; capped at 8 GPUs they run one after another:
    # waits 0, 2, 4 and 6 h.
    assert (before["jobs"], before["p50"], before["p90"], before["max"]) == (4, 0.0, 0.0, 0.0)
    assert after["max"] == 6 * 3600 and after["p50"] == 3 * 3600
    assert after["p90"] == pytest.approx(3600 * (4 + 0.7 * 2))
    assert before["waiting_at_end"] == after["waiting_at_end"] == 0
    assert run.waits.filter(side="with_change", category="quota").count() == 3
    # The service, idle and preemption figures: the review's queries over the run's hours
    # and preemptions, against the capacity and quotas each side ran under.
    assert result["in_force"]["capacity"] == result["with_change"]["capacity"]
    figures = {
        side: side_figures(replay_metrics(run=run, side=side, names=names), names)
        for side, names in (("in_force", Names.load()), ("with_change", Names.load()))
    }
    speech = figures["with_change"]["projects"]["speech"]
    assert speech["gpu_hours"] == figures["in_force"]["projects"]["speech"]["gpu_hours"] == 64.0
    assert speech["guarantee_gpus"] == 16 and speech["borrowed_gpu_hours"] == 0.0
    assert speech["share"] == 1.0 and speech["preemptions"] == 0
    # The pool's idle GPU-hours: capacity × 30 days less what ran.
    assert figures["in_force"]["all"]["idle_gpu_hours"] == (64 + 32 + 16) * 720 - 64
    # The hours waiting on quota: 2 + 4 + 6 job-hours, all under the tier's cap (quota).
    hours = run.hours.filter(side="with_change")
    assert sum(hours.values_list("quota_wait_seconds", flat=True)) == 12 * 3600
    assert sum(hours.values_list("gpu_seconds", flat=True)) == 4 * 8 * 2 * 3600
    assert not run.hours.filter(side="in_force", quota_wait_seconds__gt=0).exists()


def test_the_replays_waits_are_the_reviews_of_the_same_jobs(
    world, eager, django_capture_on_commit_callbacks
):
    """Jobs recorded as a cap of 8 GPUs runs them, replayed with that cap: the replay starts
    them when they started, and the review's figures of the evidence and of the replay
    agree, figure by figure (the same queries read both)."""
    _record(world, one_at_a_time=True)
    workload_hours_roll_up(until=NOW)
    change = _cap_change(world)
    with django_capture_on_commit_callbacks(execute=True):
        run, _queued = change_replay_start(change=change, user=world.ops, now=NOW)
    run.refresh_from_db()
    start, end = change_replay_window(now=NOW)
    metrics = review_metrics(start=start, end=end)
    review = metrics["waits"]
    replayed = replay_waits(run=run, side="with_change")
    assert review["overall"] == replayed["overall"]
    assert review["by_tier"] == replayed["by_tier"] and review["by_tier"][0]["jobs"] == 4
    assert review["by_project"] == replayed["by_project"]
    assert replayed["overall"]["p90"] == pytest.approx(3600 * (4 + 0.7 * 2))
    # In force (no cap) the same jobs would all have started at once.
    assert replay_waits(run=run, side="in_force")["overall"]["max"] == 0.0
    # The service, capacity (idle) and preemption figures too: the review's queries over the
    # run's hours and preemptions, against the capacity and quotas the replay ran under.
    figures = replay_metrics(run=run, side="with_change")
    assert metrics["capacity"] == figures["capacity"]
    assert metrics["capacity"]["total"]["idle_gpu_hours"] == (64 + 32 + 16) * 720 - 64
    service = {row["project"]: row for row in metrics["service"]["by_project"]}
    assert service == {row["project"]: row for row in figures["service"]["by_project"]}
    assert service["speech"]["gpu_hours"] == 64.0 and service["speech"]["share"] == 1.0
    by_project = figures["preemptions"].pop("by_project")
    assert metrics["preemptions"] == figures["preemptions"] and by_project == {}


def _job_events(world, job_id: str, project, tier, gpus: int, *steps) -> list[JobEvent]:
    common = {
        "source": "test",
        "job_id": job_id,
        "project": project,
        "tier": tier,
        "flavor": world.a100,
    }
    events = []
    for n, (at, kind, state) in enumerate(steps):
        extra = {"submitted_at": at} if kind == EventKind.SUBMITTED else {}
        events.append(
            JobEvent(
                event_id=f"{job_id}:{n}", time=at, kind=kind, state=state, gpus=gpus,
                user_name=job_id, **common, **extra,
            )
        )  # fmt: skip
    return events


def test_the_replays_preemptions_are_the_reviews_of_the_same_jobs(
    world, eager, django_capture_on_commit_callbacks
):
    """Speech runs 48 A100s borrowed beyond its guarantee of 16; Vision's 24 within its
    guarantee reclaim them an hour later; Speech starts again when Vision ends. Recorded so,
    and replayed: the review's preemption figures of both agree (the same query reads the
    events and the run's rows)."""
    S, R, P, E = EventKind.SUBMITTED, EventKind.STARTED, EventKind.PREEMPTED, EventKind.ENDED
    pending, running, done = JobState.PENDING, JobState.RUNNING, JobState.COMPLETED
    events = _job_events(
        world, "borrower", world.speech, world.regular, 48,
        (T0, S, pending), (T0, R, running), (T0 + HOUR, P, pending),
        (T0 + 3 * HOUR, R, running), (T0 + 8 * HOUR, E, done),
    ) + _job_events(
        world, "owner", world.vision, world.key, 24,
        (T0 + HOUR, S, pending), (T0 + HOUR, R, running), (T0 + 3 * HOUR, E, done),
    )  # fmt: skip
    assert events_ingest(events=events).stored == len(events)
    with django_capture_on_commit_callbacks(execute=True):
        run, _queued = change_replay_start(change=_cap_change(world), user=world.ops, now=NOW)
    run.refresh_from_db()
    assert run.preemptions.filter(side="in_force").count() == 1
    start, end = change_replay_window(now=NOW)
    review = review_metrics(start=start, end=end)["preemptions"]
    replayed = replay_metrics(run=run, side="in_force")["preemptions"]
    replayed.pop("by_project")
    assert review["total"]["count"] == 1 and review["total"]["gpu_hours_lost"] == 48.0
    assert review["total"]["restart_p50_seconds"] == 2 * 3600
    assert review == replayed


def test_the_task_run_twice_changes_nothing(world, django_capture_on_commit_callbacks):
    _record(world)
    run, _queued = change_replay_start(change=_cap_change(world), user=world.ops, now=NOW)
    assert run.status == ReplayStatus.QUEUED and run.progress == 0
    assert tasks.change_replay(run.pk) == ReplayStatus.DONE
    run.refresh_from_db()
    first = (run.result, run.finished_at)
    assert tasks.change_replay(run.pk) == ReplayStatus.DONE
    run.refresh_from_db()
    assert (run.result, run.finished_at) == first
    assert tasks.change_replay(run.pk + 1000) is None  # a run that is gone


def test_the_same_inputs_reuse_their_run(world, django_capture_on_commit_callbacks):
    change = _cap_change(world)
    with django_capture_on_commit_callbacks() as queued_tasks:
        first, queued = change_replay_start(change=change, user=world.ops, now=NOW)
        again, queued_again = change_replay_start(change=change, user=world.ops, now=NOW + HOUR)
    assert queued and not queued_again and again.pk == first.pk
    assert len(queued_tasks) == 1
    # Another day is another window; a new rules revision is other rules: new runs.
    next_day, queued = change_replay_start(change=change, user=world.ops, now=NOW + 24 * HOUR)
    assert queued and next_day.pk != first.pk
    services.rules_revision_create(trigger=RevisionTrigger.MANUAL, user=world.ops)
    revised, queued = change_replay_start(change=change, user=world.ops, now=NOW)
    assert queued and revised.pk not in (first.pk, next_day.pk)
    assert len({first.fingerprint, next_day.fingerprint, revised.fingerprint}) == 3


def test_a_failed_run_is_queued_again(world, django_capture_on_commit_callbacks):
    change = _cap_change(world)
    run, _queued = change_replay_start(change=change, user=world.ops, now=NOW)
    run.status, run.error = ReplayStatus.FAILED, "KeyError: 3"
    run.save()
    again, queued = change_replay_start(change=change, user=world.ops, now=NOW)
    assert queued and again.pk == run.pk
    assert (again.status, again.error, again.progress) == (ReplayStatus.QUEUED, "", 0)


def test_only_a_draft_or_proposed_change_is_replayed(world):
    change = _cap_change(world)
    services.rule_change_propose(change=change, user=world.ops)
    services.rule_change_withdraw(change=change, user=world.ops)
    with pytest.raises(ValidationError) as error:
        change_replay_start(change=change, user=world.ops, now=NOW)
    assert "draft or proposed" in str(error.value)
    assert not ChangeReplay.objects.exists()


def test_the_database_keeps_a_run_consistent(world):
    change = _cap_change(world)
    bad = ChangeReplay(change=change, fingerprint="x", status=ReplayStatus.DONE, progress=100)
    with pytest.raises(ValidationError):
        bad.full_clean()
    bad = ChangeReplay(change=change, fingerprint="x", progress=101)
    with pytest.raises(ValidationError):
        bad.full_clean()


def test_deltas_say_better_or_worse():
    assert delta("wait", 10.0, 20.0) == {"value": 10.0, "verdict": "worse"}
    assert delta("gpu_hours", 10.0, 20.0) == {"value": 10.0, "verdict": "better"}
    assert delta("share", 10.0, 20.0)["verdict"] == "neutral"
    assert delta("jobs", 10.0, 20.0)["verdict"] == "neutral"
    assert delta("wait", 5, 5)["verdict"] == "same"
    assert delta("wait", None, 5)["verdict"] == "unknown"


# --- the API ---------------------------------------------------------------------------------


def _url(pk: int) -> str:
    return reverse("api_change_replay", args=[pk])


def test_the_api_starts_a_replay_and_reads_it(
    world, api_client, eager, django_capture_on_commit_callbacks
):
    change = _cap_change(world)
    api_client.credentials(HTTP_AUTHORIZATION=token_for(world.ops))
    assert api_client.get(_url(change.pk)).status_code == 404  # never replayed
    with django_capture_on_commit_callbacks(execute=True):
        answer = api_client.post(_url(change.pk), {}, format="json")
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert body["change"] == change.pk and body["status"] == "queued"
    assert body["page"] == reverse("change_replay", args=[change.pk])
    read = api_client.get(_url(change.pk))
    assert read.status_code == 200
    assert read.json()["id"] == body["id"] and read.json()["status"] == "done"
    assert set(read.json()["result"]) >= {"in_force", "with_change", "jobs", "not_modelled"}
    # Again: the same inputs, the same run.
    assert api_client.post(_url(change.pk), {}, format="json").json()["id"] == body["id"]
    # Its figures, as the page shows them: the review's waits of both sides and the deltas.
    figures = api_client.get(reverse("api_change_replay_figures", args=[change.pk]))
    assert figures.status_code == 200, figures.content
    data = figures.json()
    assert data["replay"] == body["id"] and set(data["waits"]) == {"in_force", "with_change"}
    labels = [cell["label"] for cell in data["groups"]["all"][0]["cells"]]
    assert {"p90 wait (min)", "Preemptions", "Idle GPU-hours"} <= set(labels)
    assert set(data["groups"]) == {"all", "tiers", "projects"}


def test_the_api_refuses_bad_input_unknown_changes_and_tokens_without_the_scope(world, api_client):
    change = _cap_change(world)
    api_client.credentials(HTTP_AUTHORIZATION=token_for(world.ops))
    assert api_client.post(_url(change.pk + 99), {}, format="json").status_code == 404
    assert api_client.get(_url(change.pk + 99)).status_code == 404
    figures = reverse("api_change_replay_figures", args=[change.pk])
    assert api_client.get(figures).status_code == 404  # no finished replay
    bad = api_client.post(_url(change.pk), "{not json", content_type="application/json")
    assert bad.status_code == 400
    services.rule_change_propose(change=change, user=world.ops)
    services.rule_change_withdraw(change=change, user=world.ops)
    refused = api_client.post(_url(change.pk), {}, format="json")
    assert refused.status_code == 400
    assert "draft or proposed" in str(refused.json()["fields"]["change"])
    api_client.credentials(HTTP_AUTHORIZATION=token_for(world.ops, TokenScope.READ))
    assert api_client.post(_url(_cap_change(world).pk), {}, format="json").status_code == 403
    api_client.credentials()
    assert api_client.get(_url(change.pk)).status_code in (401, 403)
    assert not ChangeReplay.objects.exists()


def test_only_the_author_ops_and_deciders_start_a_replay_and_every_reader_reads_it(
    world, member, ops2, api_client, eager, django_capture_on_commit_callbacks
):
    run = _replayed(world, django_capture_on_commit_callbacks)
    change = run.change
    # A member of a project reads the stored run but starts none (403 naming who may).
    api_client.credentials(HTTP_AUTHORIZATION=token_for(member))
    assert api_client.get(_url(change.pk)).json()["id"] == run.pk
    refused = api_client.post(_url(change.pk), {}, format="json")
    assert refused.status_code == 403
    assert "author, ops and the people who may decide" in refused.json()["detail"]
    page = login(member).get(reverse("change_replay", args=[change.pk])).content.decode()
    assert "Replay this change" not in page and "In force" in page
    assert login(member).post(reverse("change_replay", args=[change.pk])).status_code == 403
    # Another ops person may decide it, so may start it.
    api_client.credentials(HTTP_AUTHORIZATION=token_for(ops2))
    assert api_client.post(_url(change.pk), {}, format="json").status_code == 202


# --- the page --------------------------------------------------------------------------------


def test_the_page_shows_both_side_by_side_with_deltas(
    world, eager, django_capture_on_commit_callbacks, django_assert_num_queries
):
    run = _replayed(world, django_capture_on_commit_callbacks)
    client = login(world.ops)
    url = reverse("change_replay", args=[run.change_id])
    client.get(url)  # warm the session and the caches
    # The change, the run, the rules' names (5) and per side the review's wait query (one
    # sort for every set; on PostgreSQL it checks its plan first), its service query and its
    # preemption query.
    # The rules revision (is the run outdated?) and the change's edits and their objects (its
    # own tiers and projects lead the page): 3 more.
    with django_assert_num_queries(21 if connection.vendor == "postgresql" else 19):
        page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200
    assert "Replay this change" in html and "In force" in html and "With the change" in html
    assert 'id="figure-replay-waits"' in html and 'id="figure-replay-service"' in html
    assert "Exploratory" in html and "Speech" in html
    # Tiers highest first, whatever order their rows come in: a preemption of each of two
    # more tiers (the review's preemption query reads the run's rows).
    for tier in (world.regular, world.production):
        ReplayPreemption.objects.create(
            replay=run,
            side="in_force",
            time=T0 + HOUR,
            gpus=8,
            project=world.speech,
            tier=tier,
            run_from=T0,
        )
    html = client.get(url).content.decode()
    # The change's own tier leads; the others follow, highest first.
    assert (
        html.index(">Exploratory<") < html.index(">Production service<") < html.index(">Regular<")
    )
    assert 'class="delta--worse"' in html and "worse" in html
    assert 'http-equiv="refresh"' not in html  # finished: no refresh


def test_a_run_stored_before_its_figures_were_rows_is_replayed_again(
    world, eager, django_capture_on_commit_callbacks
):
    run = _replayed(world, django_capture_on_commit_callbacks)
    run.result = {key: value for key, value in run.result.items() if key != "format"}
    run.inputs = {key: value for key, value in run.inputs.items() if key != "format"}
    run.fingerprint = fingerprint(run.inputs)
    run.save()
    run.waits.all().delete()
    url = reverse("change_replay", args=[run.change_id])
    html = login(world.ops).get(url).content.decode()
    assert "replay the change again" in html and "Replay this change" in html
    # Format 2: its waits were rows, its service and preemptions figures of its own.
    run.result = {**run.result, "format": 2}
    run.save()
    assert "replay the change again" in login(world.ops).get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        again, queued = change_replay_start(change=run.change, user=world.ops, now=NOW)
    assert queued and again.pk != run.pk
    assert "replay the change again" not in login(world.ops).get(url).content.decode()


def test_the_page_button_queues_a_replay_and_shows_progress(
    world, django_capture_on_commit_callbacks
):
    change = _cap_change(world)
    client = login(world.ops)
    url = reverse("change_replay", args=[change.pk])
    assert "has not been replayed yet" in client.get(url).content.decode()
    with django_capture_on_commit_callbacks() as queued_tasks:
        answer = client.post(url)
    assert answer.status_code == 302 and answer["Location"] == url
    assert len(queued_tasks) == 1
    html = client.get(url).content.decode()
    assert 'http-equiv="refresh"' in html and 'aria-valuenow="0"' in html


def test_the_change_page_the_list_and_the_inbox_link_to_the_replay(world, ops2, approver):
    change = _cap_change(world)
    services.rule_change_propose(change=change, user=world.ops)
    replay_url = reverse("change_replay", args=[change.pk])
    client = login(ops2)  # the tier's owner (ops) proposed it: another ops person approves
    assert replay_url in client.get(reverse("change_detail", args=[change.pk])).content.decode()
    listed = client.get(reverse("change_list") + "?status=proposed").content.decode()
    assert replay_url in listed
    inbox = client.get(reverse("inbox")).content.decode()
    assert "Rule changes waiting for your approval" in inbox and replay_url in inbox
    assert "Nothing waits for your decision." not in inbox
    # Not the approver's to decide (the tier's owner or ops), nor the proposer's own.
    for other in (approver, world.ops):
        assert replay_url not in login(other).get(reverse("inbox")).content.decode()


def test_the_page_in_chinese(world, eager, django_capture_on_commit_callbacks):
    run = _replayed(world, django_capture_on_commit_callbacks)
    client = login(world.ops)
    html = client.get(
        reverse("change_replay", args=[run.change_id]), HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).content.decode()
    assert '<html lang="zh-hans">' in html
    for text in ("重放此变更", "现行规则", "采用此变更后", "更差", "假设重放"):
        assert text in html, text
    assert "Replay this change" not in html and "With the change" not in html


def test_the_page_says_why_a_replay_failed_and_refuses_unknown_changes(world, client):
    change = _cap_change(world)
    run, _queued = change_replay_start(change=change, user=world.ops, now=NOW)
    run.status, run.error = ReplayStatus.FAILED, "KeyError: 3"
    run.save()
    ops = login(world.ops)
    html = ops.get(reverse("change_replay", args=[change.pk])).content.decode()
    assert "The replay failed:" in html and "KeyError: 3" in html
    assert 'http-equiv="refresh"' not in html
    assert ops.get(reverse("change_replay", args=[change.pk + 99])).status_code == 404
    assert client.get(reverse("change_replay", args=[change.pk])).status_code == 302
    # A change no longer open cannot be replayed from the page either; nothing is lost.
    services.rule_change_propose(change=change, user=world.ops)
    services.rule_change_withdraw(change=change, user=world.ops)
    answer = ops.post(reverse("change_replay", args=[change.pk]), follow=True)
    assert "Only a draft or proposed change can be replayed." in answer.content.decode()
    assert ChangeReplay.objects.get().status == ReplayStatus.FAILED


def test_an_outdated_run_says_so_in_both_languages_and_offers_to_run_again(
    world, eager, django_capture_on_commit_callbacks
):
    services.rules_revision_create(trigger=RevisionTrigger.MANUAL, user=world.ops)
    run = _replayed(world, django_capture_on_commit_callbacks)
    client = login(world.ops)
    url = reverse("change_replay", args=[run.change_id])
    assert 'id="replay-outdated"' not in client.get(url).content.decode()
    then = run.inputs["rules_revision"]
    for _ in range(3):  # three more changes of the rules were applied since
        services.rules_revision_create(trigger=RevisionTrigger.MANUAL, user=world.ops)
    html = client.get(url).content.decode()
    assert 'id="replay-outdated"' in html
    assert "Outdated: the rules have changed since this replay ran." in html
    assert f"It replayed rules revision {then}; the rules are now at revision {then + 3}" in html
    assert "Replay again with the rules in force" in html
    chinese = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "已过期：此次重放运行后规则已更改。" in chinese
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url)
    assert response.status_code == 302
    assert 'id="replay-outdated"' not in client.get(url).content.decode()


def test_the_changes_own_tier_leads_and_the_rest_folds_away(
    world, eager, django_capture_on_commit_callbacks
):
    run = _replayed(world, django_capture_on_commit_callbacks)
    ReplayPreemption.objects.create(
        replay=run,
        side="in_force",
        time=T0 + HOUR,
        gpus=8,
        project=world.speech,
        tier=world.production,
        run_from=T0,
    )
    html = login(world.ops).get(reverse("change_replay", args=[run.change_id])).content.decode()
    tiers = html.split("Tiers this change edits")[1].split("</section>")[0]
    lead, rest = tiers.split('<details class="replay-rest">')
    assert ">Exploratory<" in lead and ">Production service<" not in lead
    assert ">Production service<" in rest and ">Exploratory<" not in rest


def test_waits_read_in_hours_and_minutes():
    from reports.selectors.change_replay import hours_minutes

    assert hours_minutes(125) == "2 h 05 min"
    assert hours_minutes(7.2) == "7 min"
    assert hours_minutes(0.5) == "30 s"
    assert hours_minutes(-90, signed=True) == "−1 h 30 min"
    assert hours_minutes(61, signed=True) == "+1 h 01 min"


def test_the_page_shows_waits_in_hours_and_minutes_without_the_tables_unit(
    world, eager, django_capture_on_commit_callbacks
):
    run = _replayed(world, django_capture_on_commit_callbacks)
    response = login(world.ops).get(reverse("change_replay", args=[run.change_id]))
    cells = [cell for group in response.context["page"].tiers for cell in group.cells]
    p90 = next(cell for cell in cells if cell.label == "p90 wait (min)" and cell.after is not None)
    assert p90.wait and p90.label_text == "p90 wait"
    html = response.content.decode()
    assert f">{p90.after_text}<" in html and "p90 wait (min)" not in html.split("<table")[1]
    never = next(cell for cell in cells if cell.label == "Never started")
    assert not never.wait and never.after_text == never.after
