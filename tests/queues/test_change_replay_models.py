"""A change's replay runs each cluster's jobs through the model of its scheduler: a Slurm
cluster's through the Slurm model (backfill), a Kueue cluster's through the Kueue model
(BestEffortFIFO); the generic engine (strict order) for jobs of no cluster and when the
change edits a rule the model does not model; the rules in use a model does not model are
named on the page (English and Chinese) and in the API."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from governance import services
from governance.services.changes.spec import EditSpec
from queues import services as queue_services
from queues.models import ChangeReplay, EventKind, JobState
from queues.services import change_replay_run, change_replay_start
from queues.services.workload.ingest import JobEvent, events_ingest
from tests.conftest import REASON, login, token_for

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
T0 = datetime(2026, 11, 2, 8, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)

# On the training pool's 32 H100s (no quota: no guarantee, no lending): a big exploratory
# job takes 28 at T0 for 2 h; a regular job of 8 arrives a minute later and does not fit; a
# small exploratory job of 4 arrives a minute after it and fits in the 4 left.
JOBS = (
    # name, tier, GPUs, submitted after T0, ran for
    ("big", "exploratory", 28, 0 * MINUTE, 2 * HOUR),
    ("blocked", "regular", 8, 1 * MINUTE, 1 * HOUR),
    ("small", "exploratory", 4, 2 * MINUTE, 30 * MINUTE),
)


def _record(world, cluster, jobs=JOBS, *, day: int = 0) -> None:
    tiers = {"exploratory": world.exploratory, "regular": world.regular}
    events = []
    for name, tier, gpus, after, ran in jobs:
        common = {
            "source": "test",
            "job_id": f"{name}@{day}",
            "cluster": cluster,
            "project": world.speech,
            "pool": world.training,
            "flavor": world.h100,
            "gpus": gpus,
            "tier": tiers[tier],
            "user_name": name,
        }
        submitted = T0 + timedelta(days=day) + after
        events += [
            JobEvent(
                event_id=f"{name}@{day}:s",
                time=submitted,
                kind=EventKind.SUBMITTED,
                state=JobState.PENDING,
                submitted_at=submitted,
                **common,
            ),
            JobEvent(
                event_id=f"{name}@{day}:r",
                time=submitted,
                kind=EventKind.STARTED,
                state=JobState.RUNNING,
                **common,
            ),
            JobEvent(
                event_id=f"{name}@{day}:e",
                time=submitted + ran,
                kind=EventKind.ENDED,
                state=JobState.COMPLETED,
                **common,
            ),
        ]
    assert events_ingest(events=events).stored == len(events)


def _slurm(world, name: str = "hpc", **settings):
    return queue_services.cluster_create(
        user=world.ops,
        reason=REASON,
        name=name,
        slurm_cluster=name,
        pools=[world.training],
        **settings,
    )


def _kueue(world, settings, tmp_path, name: str = "k8s"):
    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    (tmp_path / "token").write_text("t")
    return queue_services.cluster_create(
        user=world.ops,
        reason=REASON,
        name=name,
        backend="kueue",
        kube_api_server="https://127.0.0.1:9",
        kube_credentials_file="token",
        pools=[world.training],
    )


def _score_change(world):
    """A rule every model models: the production tier's score."""
    return services.rule_change_create(
        user=world.ops,
        reason="Production first",
        edits=[EditSpec(target=world.production, field="score", value=96)],
        title="Raise production",
        submit=False,
    )


def _lending_change(world):
    """A rule the Slurm model does not model: a lending limit of a training pool quota."""
    return services.rule_change_create(
        user=world.ops,
        reason="Lend less",
        edits=[EditSpec(target=world.speech_a100, field="lending_limit", value=4)],
        title="Speech lends 4",
        submit=False,
    )


def _replay(world, change, django_capture_on_commit_callbacks) -> ChangeReplay:
    with django_capture_on_commit_callbacks(execute=False):
        run, _queued = change_replay_start(change=change, user=world.ops, now=NOW)
    change_replay_run(replay_id=run.pk)  # what the task does
    run.refresh_from_db()
    assert run.status == "done", run.error
    return run


def _wait(run: ChangeReplay, submitted: datetime, side: str = "in_force") -> float:
    """The replayed wait of the job submitted at ``submitted`` (each job its own instant)."""
    row = run.waits.get(side=side, submitted_at=submitted)
    assert row.wait_end is not None
    return (row.wait_end - row.submitted_at).total_seconds()


def _small_wait(run: ChangeReplay, side: str = "in_force") -> float:
    """The replayed wait of the small exploratory job."""
    return _wait(run, T0 + 2 * MINUTE, side)


def test_a_slurm_clusters_jobs_run_through_the_slurm_model_and_backfill(
    world, django_capture_on_commit_callbacks
):
    _record(world, _slurm(world))
    run = _replay(world, _score_change(world), django_capture_on_commit_callbacks)
    [group] = run.result["models"]
    assert (group["cluster"], group["scheduler"], group["model"]) == ("hpc", "slurm", "slurm")
    assert group["jobs"] == 3 and group["fallback"] == ""
    # Backfill: the small job fits beside the big one and starts at the next backfill pass
    # (every 30 s), past the regular job that waits for 8 GPUs.
    for side in ("in_force", "with_change"):
        assert 0 <= _small_wait(run, side) <= 30
    # The rules of the training pool use guarantees, a lending limit, a tier's aging and a
    # class's daily maximum: none is in the Slurm model, and the result says so.
    assert group["not_modelled"] == [
        "preemptionclass.max_preemptions_per_day",
        "prioritytier.aging_after_minutes",
        "prioritytier.aging_cap",
        "prioritytier.aging_step",
        "quota.guarantee",
        "quota.lending_limit",
    ]


def test_a_kueue_clusters_jobs_run_through_the_kueue_model(
    world, settings, tmp_path, django_capture_on_commit_callbacks
):
    _record(world, _kueue(world, settings, tmp_path))
    run = _replay(world, _score_change(world), django_capture_on_commit_callbacks)
    [group] = run.result["models"]
    assert (group["cluster"], group["scheduler"], group["model"]) == ("k8s", "kueue", "kueue")
    assert group["fallback"] == "" and group["not_modelled"] == []
    # BestEffortFIFO: the regular job that does not fit is passed over, the small one is
    # admitted as it arrives.
    assert _small_wait(run) == 0


def test_jobs_of_no_cluster_run_through_the_engine_and_say_why(
    world, django_capture_on_commit_callbacks
):
    _record(world, None)
    run = _replay(world, _score_change(world), django_capture_on_commit_callbacks)
    [group] = run.result["models"]
    assert (group["cluster"], group["model"], group["fallback"]) == ("", "engine", "no_cluster")
    # Strict order, no backfill: the small job waits behind the regular one until the big
    # one ends.
    assert _small_wait(run) == (2 * HOUR - 2 * MINUTE).total_seconds()


def test_a_job_without_a_cluster_goes_to_the_one_cluster_serving_its_pool(
    world, django_capture_on_commit_callbacks
):
    _slurm(world)
    _record(world, None)
    run = _replay(world, _score_change(world), django_capture_on_commit_callbacks)
    assert [(g["cluster"], g["model"]) for g in run.result["models"]] == [("hpc", "slurm")]


def test_a_change_the_slurm_model_does_not_model_runs_through_the_engine(
    world, django_capture_on_commit_callbacks
):
    _record(world, _slurm(world))
    run = _replay(world, _lending_change(world), django_capture_on_commit_callbacks)
    [group] = run.result["models"]
    assert (group["cluster"], group["model"], group["fallback"]) == ("hpc", "engine", "lacks")
    assert group["fallback_fields"] == ["quota.lending_limit"]
    assert _small_wait(run) == (2 * HOUR - 2 * MINUTE).total_seconds()


def test_the_page_and_the_api_say_which_model_ran_and_what_it_does_not_model(
    world, api_client, django_capture_on_commit_callbacks
):
    _record(world, _slurm(world))
    change = _score_change(world)
    _replay(world, change, django_capture_on_commit_callbacks)
    url = reverse("change_replay", args=[change.pk])
    html = login(world.ops).get(url).content.decode()
    assert 'id="replay-models"' in html and 'data-model="slurm"' in html
    assert "Slurm model (main scheduler and backfill)" in html
    assert "Not modelled" in html and "lending limits" in html
    # The three aging fields are one rule, named once.
    assert html.count("a tier&#x27;s aging") == 1
    api_client.credentials(HTTP_AUTHORIZATION=token_for(world.ops))
    data = api_client.get(reverse("api_change_replay_figures", args=[change.pk])).json()
    [model] = data["models"]
    assert (model["cluster"], model["model"], model["fallback"]) == ("hpc", "slurm", "")
    assert "lending limits" in model["not_modelled"]


def test_the_page_says_why_the_engine_ran(world, django_capture_on_commit_callbacks):
    _record(world, _slurm(world))
    change = _lending_change(world)
    _replay(world, change, django_capture_on_commit_callbacks)
    html = login(world.ops).get(reverse("change_replay", args=[change.pk])).content.decode()
    assert 'data-model="engine"' in html and "generic engine" in html
    assert "Why the generic engine ran:" in html and "lending limits" in html


def test_the_models_in_chinese(world, django_capture_on_commit_callbacks):
    _record(world, _slurm(world))
    change = _lending_change(world)
    _replay(world, change, django_capture_on_commit_callbacks)
    client = login(world.ops)
    html = client.get(
        reverse("change_replay", args=[change.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).content.decode()
    for text in ("调度器模型", "通用引擎", "出借上限", "为何运行通用引擎"):
        assert text in html, text
    for text in ("Scheduler model", "generic engine", "lending limits", "Not modelled"):
        assert text not in html, text
    change = _score_change(world)
    _replay(world, change, django_capture_on_commit_callbacks)
    html = client.get(
        reverse("change_replay", args=[change.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).content.decode()
    assert "Slurm 模型" in html and "未模拟" in html and "抢占类别的每日上限" in html


# The 32 H100s full for an hour; an exploratory job asking for all of them, then a regular
# one a minute later: which goes first when the GPUs come back is the scheduler's order.
ORDER = (
    ("full", "exploratory", 32, 0 * MINUTE, HOUR),
    ("early", "exploratory", 32, 1 * MINUTE, HOUR),
    ("late", "regular", 32, 2 * MINUTE, HOUR),
)


def test_each_cluster_is_replayed_in_its_schedulers_order(
    world, settings, tmp_path, django_capture_on_commit_callbacks
):
    """Three clusters in one replay, each its own jobs (a day apart): a Slurm cluster without
    priority weights in its slurm.conf schedules first come, first served (Slurm's default);
    one whose slurm.conf weighs the QOS (the tier's scheduler value) and Kueue put the
    regular job first."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("PriorityType=priority/multifactor\nPriorityWeightQOS=10000\n")
    _record(world, _slurm(world, "fifo"), ORDER, day=0)
    _record(world, _slurm(world, "qos", slurm_conf=str(conf)), ORDER, day=1)
    _record(world, _kueue(world, settings, tmp_path), ORDER, day=2)
    run = _replay(world, _score_change(world), django_capture_on_commit_callbacks)
    assert [(g["cluster"], g["model"], g["jobs"]) for g in run.result["models"]] == [
        ("fifo", "slurm", 3),
        ("k8s", "kueue", 3),
        ("qos", "slurm", 3),
    ]
    early = {day: _wait(run, T0 + timedelta(days=day) + MINUTE) for day in range(3)}
    late = {day: _wait(run, T0 + timedelta(days=day) + 2 * MINUTE) for day in range(3)}
    assert (early[0], late[0]) == (59 * 60, 118 * 60)  # FIFO
    assert (early[1], late[1]) == (119 * 60, 58 * 60)  # the QOS weighs the tier
    # Kueue: the tier first; each head set aside waits for the requeue a second after an end.
    assert (early[2], late[2]) == (119 * 60 + 2, 58 * 60 + 1)


def _scheduler_value_replayed(world, scheduler, capture):
    """Exploratory's scheduler value raised to 500, above Regular's, replayed: the change,
    the run and its one model group, which replays the edit."""
    change = services.rule_change_create(
        user=world.ops,
        reason="Sweeps first",
        edits=[EditSpec(target=world.exploratory, field="scheduler_value", value=500)],
        title=f"Exploratory first in {scheduler}",
        submit=False,
    )
    run = _replay(world, change, capture)
    [group] = run.result["models"]
    assert group["model"] == scheduler.lower()
    assert group["model_edits"] == ["prioritytier.scheduler_value"]
    return change, run, group


def test_a_change_of_a_tiers_scheduler_value_reorders_the_slurm_model(
    world, tmp_path, django_capture_on_commit_callbacks
):
    """Slurm orders by the QOS priority the sync writes, the tier's scheduler value: raised
    above the regular tier's, the exploratory job goes first with the change."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("PriorityType=priority/multifactor\nPriorityWeightQOS=10000\n")
    _record(world, _slurm(world, "qos", slurm_conf=str(conf)), ORDER)
    change, run, _group = _scheduler_value_replayed(
        world, "Slurm", django_capture_on_commit_callbacks
    )
    # The engine does not read it: the result's edits not modelled still name it.
    assert run.result["not_modelled"] == ["prioritytier.scheduler_value"]
    early, late = T0 + MINUTE, T0 + 2 * MINUTE
    assert (_wait(run, early), _wait(run, late)) == (119 * 60, 58 * 60)
    assert (_wait(run, early, "with_change"), _wait(run, late, "with_change")) == (
        59 * 60,
        118 * 60,
    )
    html = login(world.ops).get(reverse("change_replay", args=[change.pk])).content.decode()
    assert "Edits this model replays (the generic engine does not):" in html


def test_a_change_of_a_tiers_scheduler_value_reorders_the_kueue_model(
    world, settings, tmp_path, django_capture_on_commit_callbacks
):
    """Kueue orders by the WorkloadPriorityClass value the sync writes, the tier's scheduler
    value: raised above the regular tier's, the exploratory job goes first with the change
    (the heads set aside wait for Kueue's requeue, a second after the end)."""
    _record(world, _kueue(world, settings, tmp_path), ORDER)
    change, run, group = _scheduler_value_replayed(
        world, "Kueue", django_capture_on_commit_callbacks
    )
    assert group["fallback"] == ""
    # The engine does not read it: the result's edits not modelled still name it.
    assert run.result["not_modelled"] == ["prioritytier.scheduler_value"]
    early, late = T0 + MINUTE, T0 + 2 * MINUTE
    assert (_wait(run, early), _wait(run, late)) == (119 * 60 + 2, 58 * 60 + 1)
    assert (_wait(run, early, "with_change"), _wait(run, late, "with_change")) == (
        59 * 60 + 1,
        118 * 60 + 2,
    )
    html = login(world.ops).get(reverse("change_replay", args=[change.pk])).content.decode()
    assert "Edits this model replays (the generic engine does not):" in html
    assert "its Kueue WorkloadPriorityClass value" in html


def test_an_edit_of_a_clusters_slurm_conf_alone_replays_again(
    world, tmp_path, django_capture_on_commit_callbacks
):
    """The Slurm model reads the cluster's slurm.conf: the run's inputs hold a digest of its
    content, so the same change after an edit of the file alone is replayed, not reused."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("PriorityType=priority/multifactor\nPriorityWeightQOS=10000\n")
    _record(world, _slurm(world, "qos", slurm_conf=str(conf)), ORDER)
    change = _score_change(world)
    first = _replay(world, change, django_capture_on_commit_callbacks)
    assert list(first.inputs["slurm_conf"]) == ["qos"]
    with django_capture_on_commit_callbacks(execute=False):
        again, queued = change_replay_start(change=change, user=world.ops, now=NOW)
    assert (again.pk, queued) == (first.pk, False)  # the same inputs reuse their run
    conf.write_text("PriorityType=priority/basic\n")  # first come, first served
    second = _replay(world, change, django_capture_on_commit_callbacks)
    assert second.pk != first.pk and second.fingerprint != first.fingerprint
    early, late = T0 + MINUTE, T0 + 2 * MINUTE
    assert (_wait(first, early), _wait(first, late)) == (119 * 60, 58 * 60)
    assert (_wait(second, early), _wait(second, late)) == (59 * 60, 118 * 60)  # FIFO
    conf.unlink()  # unreadable: a digest of its own, not an error
    with django_capture_on_commit_callbacks(execute=False):
        third, queued = change_replay_start(change=change, user=world.ops, now=NOW)
    assert queued and third.inputs["slurm_conf"] == {"qos": ""}
