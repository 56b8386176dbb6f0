"""A replay's input from the database: the effective rules (with grants as periods) and the
recorded jobs (the evidence), replayed end to end."""

from datetime import UTC, datetime, timedelta

import pytest

from governance import services
from governance.models import GrantKind, Terms
from governance.services.changes.spec import EditSpec
from queues.models import EventKind, JobState
from queues.replay import replay
from queues.replay.adapt import jobs_from_evidence, rules_at, rules_timeline, rules_with_change
from queues.services.workload.ingest import JobEvent, events_ingest

T0 = datetime(2026, 11, 2, 8, tzinfo=UTC)


@pytest.mark.django_db
def test_the_effective_rules_compile_as_the_sync_compiles_them(world):
    rules = rules_at(at=T0)
    assert rules.capacity == {
        "training/a100-80g": 64.0,
        "training/h100-80g": 32.0,
        "inference/a100-80g": 16.0,
    }
    production = rules.tier("production")
    assert production.may_preempt and production.preemptible == {"regular", "exploratory"}
    exploratory = rules.tier("exploratory")
    assert (exploratory.aging_after, exploratory.aging_step, exploratory.aging_cap) == (
        240 * 60,
        10,
        40,
    )
    vision = next(q for q in rules.quotas if q.project == "vision")
    assert (vision.guarantee, vision.maximum, vision.lending_limit) == (24, 40, 12)
    assert (vision.fair_share_weight, vision.preemption_class) == (3, "cautious")
    cautious = next(c for c in rules.classes if c.slug == "cautious")
    assert (cautious.min_runtime, cautious.max_per_day) == (120 * 60, 1)
    assert rules.project_tiers["vision"] == "key"
    assert rules.default_tier == "regular" and rules.default_class == "allowed"


@pytest.mark.django_db
def test_a_grant_is_a_period_of_the_timeline(world):
    services.grant_create(
        user=world.ops,
        reason="Deadline",
        project=world.speech,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            starts_at=T0 + timedelta(hours=2),
            ends_at=T0 + timedelta(hours=4),
            tier=world.key,
            job_ids=("777",),
        ),
        now=T0,
    )
    timeline = rules_timeline(start=T0, end=T0 + timedelta(days=1))
    assert [at for at, _ in timeline] == [
        T0.timestamp(),
        (T0 + timedelta(hours=2)).timestamp(),
        (T0 + timedelta(hours=4)).timestamp(),
    ]
    assert [rules.job_tiers for _, rules in timeline] == [{}, {"777": "key"}, {}]


def _job(job_id: str, submit: datetime, start: datetime | None, end: datetime | None, world):
    common = {
        "source": "test",
        "job_id": job_id,
        "project": world.speech,
        "flavor": world.a100,
        "gpus": 8,
        "tier": world.regular,
        "user_name": "ann",
    }
    events = [
        JobEvent(
            event_id=f"{job_id}:s",
            time=submit,
            kind=EventKind.SUBMITTED,
            state=JobState.PENDING,
            submitted_at=submit,
            reason="Resources",
            **common,
        )
    ]
    if start is not None:
        events.append(
            JobEvent(
                event_id=f"{job_id}:r",
                time=start,
                kind=EventKind.STARTED,
                state=JobState.RUNNING,
                **common,
            )
        )
    if end is not None:
        events.append(
            JobEvent(
                event_id=f"{job_id}:e",
                time=end,
                kind=EventKind.ENDED,
                state=JobState.COMPLETED,
                **common,
            )
        )
    return events


@pytest.mark.django_db
def test_recorded_jobs_are_replayed_with_the_durations_they_ran(world):
    hour = timedelta(hours=1)
    events = [
        *_job("1", T0, T0 + hour, T0 + 3 * hour, world),
        *_job("2", T0, T0 + 3 * hour, None, world),  # still running
        *_job("3", T0, None, None, world),  # never started: nothing to replay
    ]
    assert events_ingest(events=events).stored == len(events)
    end = T0 + 5 * hour
    evidence = jobs_from_evidence(start=T0, end=end)
    assert evidence.skipped_never_started == 1
    assert [(j.name, j.duration / 3600, j.flavor, j.tier, j.user) for j in evidence.jobs] == [
        ("1", 2.0, "training/a100-80g", "regular", "ann"),
        ("2", 2.0, "training/a100-80g", "regular", "ann"),
    ]
    assert jobs_from_evidence(start=T0, end=end, project="vision").jobs == []
    # Under today's rules, with nothing else running, both start at once: 16 of 64 GPUs.
    result = replay(evidence.jobs, rules_timeline(start=T0, end=end))
    assert result.start == [T0.timestamp(), T0.timestamp()]
    assert result.reasons == []


@pytest.mark.django_db
def test_a_proposed_change_is_the_rules_it_would_put_in_force(world):
    edits = [
        EditSpec(target=world.vision_a100, field="guarantee", value=32),
        EditSpec(target=world.vision_a100, field="reclaim_grace_minutes", value=10),
        EditSpec(target=world.exploratory, field="max_gpus_total", value=8),
        EditSpec(target=world.production, field="preemptible_tiers", value=[world.exploratory]),
        EditSpec(target=world.training, field="capacity", key=world.a100, value=80),
        EditSpec(target=world.speech, field="tier", value=world.key),
        EditSpec(target=world.cautious, field="min_runtime_minutes", value=60),
        EditSpec(target=world.exploratory, field="description", value="Sweeps."),
    ]
    change = services.rule_change_create(
        user=world.ops, reason="Try it", edits=edits, title="Replay me", submit=False
    )
    in_force = rules_at(at=T0)
    proposed, ignored = rules_with_change(in_force, change=change)
    vision = {q.project: q for q in proposed.quotas}["vision"]
    assert (vision.guarantee, vision.reclaim_grace) == (32, 600)
    assert proposed.tier("exploratory").max_gpus_total == 8
    assert proposed.tier("production").preemptible == {"exploratory"}
    assert proposed.capacity["training/a100-80g"] == 80
    assert proposed.project_tiers["speech"] == "key"
    assert {c.slug: c for c in proposed.classes}["cautious"].min_runtime == 3600
    assert ignored == ["prioritytier.description"]
    # The rules in force are untouched, and replays differ where the change bites.
    assert {q.project: q for q in in_force.quotas}["vision"].guarantee == 24
    assert in_force.tier("production").preemptible == {"regular", "exploratory"}


def test_the_replay_reads_every_kind_that_declares_replay_fields():
    """A rule kind says which of its fields the replay models (``RuleKind.replay_fields``);
    the adapter has a reader for exactly those kinds, and each field is one a change edits."""
    from governance.selectors.changes.kinds import REGISTRY
    from queues.replay.adapt import READERS

    modelled = {kind.object_type: kind for kind in REGISTRY.values() if kind.replay_fields}
    assert set(READERS) == set(modelled)
    for kind in modelled.values():
        assert all(kind.edit_kind(name) is not None for name in kind.replay_fields), kind
