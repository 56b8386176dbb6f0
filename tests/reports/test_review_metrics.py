"""The review's metrics on a small hand-made history whose answers are worked out below.

Runs on SQLite and PostgreSQL alike (the percentiles are ``percentile_cont`` on PostgreSQL
and the window-function fallback on SQLite: both must give these numbers).

The window is one day, W = [2026-03-01 00:00, 2026-03-02 00:00) UTC: 24 hours. All jobs use
A100s in the Training pool, whose A100 capacity is 64 GPUs (its H100s are set to 0).
Quotas (from the ``world`` fixture): Vision guarantee 24 (lending limit 12), Speech
guarantee 16 (lends all of it). Unguaranteed capacity: 64 − 24 − 16 = 24 GPUs.
Tiers: Vision's tier is Key (wait alert 60 min = 3600 s), Speech has the default tier
Regular (wait alert 90 min = 5400 s), Exploratory has no wait alert.

Jobs (hours are offsets from W's start; "−1" is the day before):

======  ======  ===========  ====  =======  =======  =======  ========  ===============
 job    project tier         GPUs  submit   start    end      category  note
======  ======  ===========  ====  =======  =======  =======  ========  ===============
 I      vision  key             8  −2:00    −1:00    01:00    resource  before W (no wait)
 A      vision  key            56  01:00    02:00    04:00    resource  borrows 32
 D      speech  regular        16  03:30    04:00    08:00    resource
 C      speech  regular        16  05:00    07:00    09:00    quota     waits on quota 2 h
 E      speech  regular         4  08:00    08:00    10:30    —         preempted 09:00,
                                                                        requeued, restarts 09:30
 H      speech  regular         2  12:00    —        12:20    dependency cancelled pending
 J      speech  exploratory     2  14:00    14:10    15:10    resource  fails
 F      vision  key             8  20:00    —        —        quota     still waiting (censored)
 G      vision  key             8  23:00    +1 01:00 —        resource  starts after W (censored)
======  ======  ===========  ====  =======  =======  =======  ========  ===============
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from approvals import services as approvals
from approvals.models import RequestKind
from governance import services as governance
from governance.models import ChangeStatus, PoolCapacity, RuleChange, User
from queues.models import EventKind, JobState, WorkloadEvent, WorkloadHour, WorkloadJob
from queues.services.workload.rollup import workload_hours_roll_up
from reports.selectors import review_metrics, review_metrics_by_project
from reports.selectors.findings import FindingKind, finding_text, review_findings
from tests.conftest import REASON, World, with_terms

W0 = datetime(2026, 3, 1, tzinfo=UTC)
W1 = W0 + timedelta(days=1)


def at(hours: float) -> datetime:
    return W0 + timedelta(hours=hours)


def job(world: World, name: str, **fields) -> WorkloadJob:
    fields.setdefault("flavor", world.a100)
    last = fields.get("ended_at") or fields.get("started_at") or fields["submitted_at"]
    return WorkloadJob.objects.create(
        source="test", job_id=name, key=name, name=name, last_event_at=last, **fields
    )


def event(item: WorkloadJob, kind: str, hours: float, state: str, n: int) -> None:
    WorkloadEvent.objects.create(
        job=item,
        source="test",
        event_id=f"{item.job_id}-{n}",
        time=at(hours),
        kind=kind,
        state=state,
        gpus=item.gpus,
    )


@pytest.fixture
def history(world: World, ops: User, ops2: User, lead: User) -> World:
    kw: dict[str, Any] = {"user": ops, "reason": REASON}
    governance.pool_capacity_set(**kw, pool=world.training, flavor=world.h100, gpus=0)
    governance.tier_update(tier=world.key, **kw, data={"wait_alert_minutes": 60})
    governance.tier_update(tier=world.regular, **kw, data={"wait_alert_minutes": 90})
    vision, speech = world.vision, world.speech
    key, regular, exploratory = world.key, world.regular, world.exploratory
    done, failed = JobState.COMPLETED, JobState.FAILED
    job(world, "I", project=vision, tier=key, gpus=8, submitted_at=at(-2), started_at=at(-1),
        ended_at=at(1), state=done, category="resource")  # fmt: skip
    job(world, "A", project=vision, tier=key, gpus=56, submitted_at=at(1), started_at=at(2),
        ended_at=at(4), state=done, category="resource")  # fmt: skip
    job(world, "D", project=speech, tier=regular, gpus=16, submitted_at=at(3.5),
        started_at=at(4), ended_at=at(8), state=done, category="resource")  # fmt: skip
    job(world, "C", project=speech, tier=regular, gpus=16, submitted_at=at(5), started_at=at(7),
        ended_at=at(9), state=done, category="quota")  # fmt: skip
    e = job(world, "E", project=speech, tier=regular, gpus=4, submitted_at=at(8),
            started_at=at(9.5), ended_at=at(10.5), state=done, preemptions=1, requeues=1,
            gpu_seconds_lost=4 * 3600)  # fmt: skip
    for n, (kind, hours, state) in enumerate(
        [
            (EventKind.SUBMITTED, 8, JobState.PENDING),
            (EventKind.STARTED, 8, JobState.RUNNING),
            (EventKind.PREEMPTED, 9, JobState.PREEMPTED),
            (EventKind.REQUEUED, 9, JobState.PENDING),
            (EventKind.STARTED, 9.5, JobState.RUNNING),
            (EventKind.ENDED, 10.5, done),
        ]
    ):
        event(e, kind, hours, state, n)
    job(world, "H", project=speech, tier=regular, gpus=2, submitted_at=at(12),
        ended_at=at(12 + 1 / 3), state=JobState.CANCELLED, category="dependency")  # fmt: skip
    j = job(world, "J", project=speech, tier=exploratory, gpus=2, submitted_at=at(14),
            started_at=at(14 + 1 / 6), ended_at=at(15 + 1 / 6), state=failed,
            category="resource")  # fmt: skip
    event(j, EventKind.ENDED, 15 + 1 / 6, failed, 0)
    job(world, "F", project=vision, tier=key, gpus=8, submitted_at=at(20),
        state=JobState.PENDING, category="quota")  # fmt: skip
    job(world, "G", project=vision, tier=key, gpus=8, submitted_at=at(23), started_at=at(25),
        state=JobState.RUNNING, category="resource")  # fmt: skip

    # Exceptions: quota exceptions decided by ops; at most 1 approved per month before a flag.
    approvals.policy_create(
        **kw, kind=RequestKind.QUOTA_EXCEPTION, max_duration_days=14, monthly_flag_threshold=1
    )

    def ask(project, gpus: int, submitted: float, box: tuple[float, float]):
        return approvals.request_create(
            **with_terms(
                {
                    "user": lead if project == vision else ops,
                    "project": project,
                    "kind": RequestKind.QUOTA_EXCEPTION,
                    "justification": "A deadline.",
                    "business_impact": "It is missed.",
                    "starts_at": at(box[0]),
                    "ends_at": at(box[1]),
                    "pool": world.training,
                    "flavor": world.a100,
                    "extra_gpus": gpus,
                    "submit": True,
                    "now": at(submitted),
                }
            )
        )

    first = ask(vision, 8, 9, (10, 34))  # approved: 8 GPUs × 24 h = 192 GPU-h
    approvals.request_approve(request=first, user=ops2, now=at(9.5))
    second = ask(vision, 4, 11, (12, 18))  # approved: 4 GPUs × 6 h = 24 GPU-h
    approvals.request_approve(request=second, user=ops2, now=at(11.5))
    third = ask(speech, 8, 13, (14, 20))  # rejected: no GPU-hours
    approvals.request_reject(request=third, user=ops2, reason="Not now.", now=at(13.5))
    RuleChange.objects.create(
        title="Raise Speech's guarantee",
        reason="Waits",
        author=ops,
        status=ChangeStatus.APPLIED,
        proposed_by=ops,
        proposed_at=at(15),
        approved_by=ops2,
        approved_at=at(15.5),
        applied_by=ops,
        applied_at=at(16),
    )
    # Bring the hourly rollup up to 2 h past the window (G runs and F waits past it).
    workload_hours_roll_up(until=at(26))
    return world


def by(items: list[dict], key: str) -> dict:
    return {item[key]: item for item in items}


@pytest.mark.django_db
def test_waits_count_censored_jobs_and_interpolate_percentiles(history):
    waits = review_metrics(start=W0, end=W1)["waits"]
    # Submitted in W: A 3600, C 7200, D 1800, E 0 (its first start), F 14400 (censored at W's
    # end: 24 − 20 h), G 3600 (censored: starts after W), H 1200 (cancelled pending), J 600.
    # Sorted: 0, 600, 1200, 1800, 3600, 3600, 7200, 14400 (n = 8).
    # p50: pos 0.5 × 7 = 3.5 → 1800 + 0.5 × 1800 = 2700
    # p90: pos 6.3 → 7200 + 0.3 × 7200 = 9360; p95: pos 6.65 → 7200 + 0.65 × 7200 = 11880;
    # p99: pos 6.93 → 7200 + 0.93 × 7200 = 13896; mean 32400 / 8 = 4050.
    # Over threshold: F (14400 > 3600, Key), C (7200 > 5400, Regular) = 2. Never started: H
    # (cancelled while pending; F and G still wait at the end).
    overall = dict(waits["overall"])
    started = overall.pop("started_only")
    assert overall == {
        "jobs": 8,
        "never_started": 1,
        "waiting_at_end": 2,
        "p50": 2700.0,
        "p90": 9360.0,
        "p95": 11880.0,
        "p99": 13896.0,
        "mean": 4050.0,
        "max": 14400.0,
        "over_threshold": 2,
    }
    # Started jobs only (started before W's end): A 3600, C 7200, D 1800, E 0, J 600 (n = 5):
    # p50 pos 2 → 1800; p90 pos 3.6 → 3600 + 0.6 × 3600 = 5760; p95 pos 3.8 → 6480;
    # p99 pos 3.96 → 7056; mean 13200 / 5 = 2640.
    assert {k: started[k] for k in ("jobs", "p50", "p90", "p95", "p99", "mean", "max")} == {
        "jobs": 5,
        "p50": 1800.0,
        "p90": 5760.0,
        "p95": 6480.0,
        "p99": 7056.0,
        "mean": 2640.0,
        "max": 7200.0,
    }
    # Tier rank order: Key (70), Regular (40), Exploratory (10).
    assert [row["tier"] for row in waits["by_tier"]] == ["key", "regular", "exploratory"]
    key, regular, exploratory = (dict(row) for row in waits["by_tier"])
    # Of Key's jobs only A started (F and G still wait at W's end).
    key_started = key.pop("started_only")
    assert (key_started["jobs"], key_started["p50"]) == (1, 3600.0)
    # Key: 3600, 3600, 14400: p50 pos 1 → 3600; p90 pos 1.8 → 3600 + 0.8 × 10800 = 12240;
    # p95 pos 1.9 → 3600 + 0.9 × 10800 = 13320; p99 pos 1.98 → 3600 + 0.98 × 10800 = 14184;
    # mean 21600 / 3 = 7200.
    assert key == {
        "jobs": 3,
        "never_started": 0,
        "waiting_at_end": 2,
        "p50": 3600.0,
        "p90": 12240.0,
        "p95": 13320.0,
        "p99": 14184.0,
        "mean": 7200.0,
        "max": 14400.0,
        "over_threshold": 1,
        "tier": "key",
        "name": "Key project",
        "threshold_seconds": 3600,
    }
    # Regular: 0, 1200, 1800, 7200: p50 pos 1.5 → 1500; p90 pos 2.7 → 1800 + 0.7 × 5400 = 5580;
    # p99 pos 2.97 → 1800 + 0.97 × 5400 = 7038.
    assert (regular["jobs"], regular["p50"], regular["p90"], regular["p99"]) == (
        4,
        1500.0,
        5580.0,
        7038.0,
    )
    assert (regular["waiting_at_end"], regular["over_threshold"]) == (0, 1)
    assert (regular["never_started"], regular["mean"]) == (1, 2550.0)  # H; 10200 / 4
    assert regular["threshold_seconds"] == 5400
    assert (exploratory["jobs"], exploratory["p50"], exploratory["max"]) == (1, 600.0, 600.0)
    assert exploratory["threshold_seconds"] is None
    # Projects by p90, highest first: Vision (12240), Speech (0, 600, 1200, 1800, 7200:
    # p50 pos 2 → 1200; p90 pos 3.6 → 1800 + 0.6 × 5400 = 5040; p99 pos 3.96 → 6984).
    assert [(r["project"], r["tier"], r["p90"]) for r in waits["by_project"]] == [
        ("vision", "key", 12240.0),
        ("speech", "regular", 5040.0),
    ]
    speech = waits["by_project"][1]
    assert (speech["p50"], speech["p99"], speech["jobs"]) == (1200.0, 6984.0, 5)
    assert [(r["pool"], r["jobs"]) for r in waits["by_pool"]] == [("training", 8)]
    assert [(r["flavor"], r["jobs"]) for r in waits["by_flavor"]] == [("a100-80g", 8)]
    # Categories: quota C + F = 21600 s; resource A + D + G + J = 3600 + 1800 + 3600 + 600.
    categories = {r["category"]: (r["jobs"], r["wait_seconds"]) for r in waits["by_category"]}
    assert categories == {
        "resource": (4, 9600.0),
        "quota": (2, 21600.0),
        "queue_rule": (0, 0.0),
        "dependency": (1, 1200.0),
        "placement": (0, 0.0),
        "unclassified": (1, 0.0),
    }
    assert [(r["day"], r["tier"], r["jobs"], r["p50"]) for r in waits["daily_by_tier"]] == [
        ("2026-03-01", "key", 3, 3600.0),
        ("2026-03-01", "regular", 4, 1500.0),
        ("2026-03-01", "exploratory", 1, 600.0),
    ]


@pytest.mark.django_db
def test_service_borrowing_and_lending_against_guarantees(history):
    service = review_metrics(start=W0, end=W1, pool="training")["service"]["by_project"]
    # Vision: I 8 GPU-h in hour 0; A 56 × 2 h = 112 → 120 GPU-h. Within its 24: 8 + 24 + 24 = 56;
    # borrowed 32 + 32 = 64. Quota waits: F waits hours 20–23 → 4 hours. For resources below
    # its guarantee: A waits in hour 1 (I ended at 01:00: Vision runs nothing), G in hour 23
    # (nothing runs) → 2 hours.
    # Speech per hour: 4–6: 16 (D); 7: 32 (D + C); 8: 20 (C + E); 9: 2 (E from 09:30);
    # 10: 2 (E to 10:30); 14: 2 × 50 min; 15: 2 × 10 min (J) → 106 GPU-h. Within its 16:
    # 16 × 5 + 2 + 2 + 2 = 86; borrowed 16 (hour 7) + 4 (hour 8) = 20. Quota waits: C 05–07 → 2
    # (D runs 16 of its 16 then). For resources below its guarantee: D waits in hour 3 (nothing
    # runs), J in hour 14 (J itself runs 2 × 50 min of its 16 × 60) → 2 hours.
    # Lending, hours 2 and 3: Vision borrows 32; the unguaranteed 24 GPUs cover 24 of it, the
    # other 8 came from idle guarantees. Lendable then: Speech 16 (idle, no lending limit),
    # Vision 0 (busy). Speech lent 8 × 16 / 16 = 8 GPU-h per hour → 16 GPU-h. Hours 7 and 8:
    # Speech borrows 16 and 4, within the unguaranteed 24: nobody lent.
    # Shares of the pool's 226 GPU-h: 120 / 226 = 0.531, 106 / 226 = 0.469.
    assert service == [
        {
            "project": "vision",
            "name": "Vision",
            "pool": "training",
            "gpu_hours": 120.0,
            "share": 0.531,
            "guarantee_gpus": 24,
            "guarantee_share": 0.375,
            "guaranteed_gpu_hours": 576.0,
            "within_guarantee_gpu_hours": 56.0,
            "borrowed_gpu_hours": 64.0,
            "lent_gpu_hours": 0.0,
            "quota_wait_hours": 4.0,
            "resource_wait_below_guarantee_hours": 2.0,
        },
        {
            "project": "speech",
            "name": "Speech",
            "pool": "training",
            "gpu_hours": 106.0,
            "share": 0.469,
            "guarantee_gpus": 16,
            "guarantee_share": 0.25,
            "guaranteed_gpu_hours": 384.0,
            "within_guarantee_gpu_hours": 86.0,
            "borrowed_gpu_hours": 20.0,
            "lent_gpu_hours": 16.0,
            "quota_wait_hours": 2.0,
            "resource_wait_below_guarantee_hours": 2.0,
        },
    ]


@pytest.mark.django_db
def test_capacity_idle_while_others_wait_on_quota(history):
    capacity = review_metrics(start=W0, end=W1, pool="training")["capacity"]
    # Training A100: 64 × 24 = 1536 GPU-h available; 226 ran; never above capacity, so
    # 1536 − 226 = 1310 idle. Idle while quota-waiting: hours 5, 6 (C waits; 16 of 64 run):
    # 2 × 48 = 96; hours 20–23 (F waits; nothing runs): 4 × 64 = 256 → 352.
    expected = {
        "available_gpu_hours": 1536.0,
        "allocated_gpu_hours": 226.0,
        "idle_gpu_hours": 1310.0,
        "idle_while_quota_waiting_gpu_hours": 352.0,
    }
    assert capacity["total"] == expected
    training_h100 = {
        "available_gpu_hours": 0.0,
        "allocated_gpu_hours": 0.0,
        "idle_gpu_hours": 0.0,
        "idle_while_quota_waiting_gpu_hours": 0.0,
    }
    assert capacity["by_pool_flavor"] == [
        {**expected, "pool": "training", "flavor": "a100-80g", "pool_name": "Training",
         "flavor_name": "A100 80G"},
        {**training_h100, "pool": "training", "flavor": "h100-80g", "pool_name": "Training",
         "flavor_name": "H100 80G"},
    ]  # fmt: skip
    assert capacity["daily"] == [{"day": "2026-03-01", **expected}]
    # Without a pool: Inference's 16 idle A100s join in (16 × 24 = 384 more available, idle).
    total = review_metrics(start=W0, end=W1)["capacity"]["total"]
    assert (total["available_gpu_hours"], total["idle_gpu_hours"]) == (1920.0, 1694.0)


@pytest.mark.django_db
def test_preemptions_failures_and_requeues(history):
    preemptions = review_metrics(start=W0, end=W1)["preemptions"]
    # E: 4 GPUs ran 08:00–09:00 before the preemption → 4 GPU-h lost; restarted at 09:30
    # → 1800 s to restart. J failed; E was requeued once.
    assert preemptions == {
        "total": {
            "count": 1,
            "gpu_hours_lost": 4.0,
            "restart_p50_seconds": 1800.0,
            "failures": 1,
            "requeues": 1,
        },
        "by_tier_class": [
            {
                "tier": "regular",
                "preemption_class": "allowed",
                "class_kind": "allowed",
                "class_min_runtime_minutes": None,
                "count": 1,
                "early": 0,
                "gpu_hours_lost": 4.0,
                "restart_p50_seconds": 1800.0,
            }
        ],
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("klass", "kind", "early", "finding"),
    [
        # E ran 1 h (08:00–09:00) before its preemption: under the cautious class's 2 h.
        ("cautious", "cautious", 1, FindingKind.PREEMPTED_EARLY),
        ("forbidden", "forbidden", 0, FindingKind.PREEMPTED_FORBIDDEN),
        ("allowed", "allowed", 0, None),
    ],
)
def test_a_preemption_the_class_forbids_or_too_early_is_a_finding(
    history, ops, klass, kind, early, finding
):
    governance.quota_update(
        quota=history.speech_a100,
        user=ops,
        reason=REASON,
        data={"preemption_class": getattr(history, klass)},
    )
    metrics = review_metrics(start=W0, end=W1)
    (row,) = metrics["preemptions"]["by_tier_class"]
    assert (row["preemption_class"], row["class_kind"], row["count"], row["early"]) == (
        klass,
        kind,
        1,
        early,
    )
    kinds = (FindingKind.PREEMPTED_EARLY, FindingKind.PREEMPTED_FORBIDDEN)
    found = [f for f in review_findings(metrics=metrics, start=W0, end=W1) if f["kind"] in kinds]
    assert [f["kind"] for f in found] == ([finding] if finding else [])
    if finding == FindingKind.PREEMPTED_EARLY:
        assert finding_text(found[0]) == (
            "1 of 1 preemptions of the tier Regular in the class cautious came before its "
            "minimum runtime of 120 minutes."
        )
    if finding == FindingKind.PREEMPTED_FORBIDDEN:
        assert finding_text(found[0]) == (
            "Jobs of the tier Regular in the never-preempt class forbidden were preempted 1 "
            "times (4 GPU-hours lost)."
        )


@pytest.mark.django_db
def test_an_exceptions_outcome_is_its_jobs_median_against_the_tiers(history):
    from reports.selectors.stored_reviews import review_tables

    review = review_metrics(start=W0, end=W1)
    outcomes = review["exceptions"]["outcomes"]
    # The first (box 10:00 → +1 10:00): Vision's F (20:00, 4 h censored) and G (23:00, 1 h
    # censored): median 9000 s, tier Key. The second (12:00 → 18:00): no Vision job.
    assert [(o["project"], o["jobs"], o["p50"], o["tier"]) for o in outcomes] == [
        ("vision", 2, 9000.0, "key"),
        ("vision", 0, None, None),
    ]
    assert outcomes[0]["starts_at"] == "2026-03-01T10:00:00+00:00"
    rows = review_tables(metrics=review)["exception_outcomes"].rows
    # Key's median wait in the window is 3600 s: 90 minutes later than it.
    assert rows[0][4:] == [
        2,
        150.0,
        "Key project",
        60.0,
        "Started 90 minutes later than the tier's median",
    ]
    assert rows[1][-1] == "No job of the project was submitted in its time box"
    _site, views = review_metrics_by_project(start=W0, end=W1)
    assert views["vision"]["exceptions"]["outcomes"] == outcomes
    assert views["speech"]["exceptions"]["outcomes"] == []


@pytest.mark.django_db
def test_exceptions_against_the_policy_and_the_timeline(history):
    review = review_metrics(start=W0, end=W1)
    exceptions = review["exceptions"]
    # Vision: 2 requested, 2 approved: 8 × 24 + 4 × 6 = 216 GPU-h. Speech: 1 rejected.
    rows = {(r["project"], r["kind"]): r for r in exceptions["by_project_kind"]}
    vision = rows[("vision", "quota_exception")]
    speech = rows[("speech", "quota_exception")]
    assert (vision["requested"], vision["approved"], vision["rejected"], vision["gpu_hours"]) == (
        2,
        2,
        0,
        216.0,
    )
    assert (speech["requested"], speech["approved"], speech["rejected"], speech["gpu_hours"]) == (
        1,
        0,
        1,
        0.0,
    )
    # The policy flags after 1 approved exception a month: Vision had 2.
    assert exceptions["policy_monthly_limit"] == 1
    assert exceptions["over_policy"] == [
        {"project": "vision", "name": "Vision", "count": 2, "limit": 1}
    ]
    # Grants start at 10:00 and 12:00; the rule change was applied at 16:00.
    assert [(item["kind"], item["at"]) for item in review["timeline"]] == [
        ("grant", "2026-03-01T10:00:00+00:00"),
        ("grant", "2026-03-01T12:00:00+00:00"),
        ("change", "2026-03-01T16:00:00+00:00"),
    ]
    assert review["timeline"][2]["title"] == "Raise Speech's guarantee"


@pytest.mark.django_db
def test_project_scope_and_an_empty_window(history):
    scoped = review_metrics(start=W0, end=W1, project="speech")
    assert scoped["scope"] == {"pool": None, "project": "speech"}
    assert scoped["waits"]["overall"]["jobs"] == 5
    assert [row["project"] for row in scoped["service"]["by_project"]] == ["speech"]
    # Lending is still computed against every project of the pool.
    assert scoped["service"]["by_project"][0]["lent_gpu_hours"] == 16.0
    empty = review_metrics(start=W1 + timedelta(days=10), end=W1 + timedelta(days=11))
    assert empty["waits"]["overall"]["jobs"] == 0
    assert empty["waits"]["overall"]["p50"] is None
    assert empty["service"]["by_project"][0]["gpu_hours"] == 0.0
    assert empty["preemptions"]["total"]["count"] == 0


@pytest.mark.django_db
def test_the_rollup_is_incremental_and_idempotent(history):
    before = list(WorkloadHour.objects.values_list("hour", "project_id", "gpu_seconds"))
    assert workload_hours_roll_up(until=at(26))["changed"] == 0
    assert list(WorkloadHour.objects.values_list("hour", "project_id", "gpu_seconds")) == before
    # G ends at 01:30 the next day: its hour 25 shrinks to 30 min, nothing else changes.
    g = WorkloadJob.objects.get(job_id="G")
    g.ended_at, g.state, g.last_event_at = at(25.5), JobState.COMPLETED, at(25.5)
    g.save()
    workload_hours_roll_up(until=at(27))
    hour_25 = WorkloadHour.objects.get(hour=at(25), project=history.vision, tier=history.key)
    assert hour_25.gpu_seconds == 8 * 1800
    # The window's figures do not move.
    assert (
        review_metrics(start=W0, end=W1, pool="training")["capacity"]["total"][
            "allocated_gpu_hours"
        ]
        == 226.0
    )


@pytest.mark.django_db
def test_each_projects_view_is_the_review_with_the_project_as_scope(history):
    metrics, views = review_metrics_by_project(start=W0, end=W1)
    assert metrics == review_metrics(start=W0, end=W1)
    assert set(views) == {"vision", "speech"}
    for slug, view in views.items():
        assert view == review_metrics(start=W0, end=W1, project=slug), slug
    # Vision's view: its jobs only, the changes and its own grants, its exceptions.
    vision = views["vision"]
    assert vision["waits"]["overall"]["jobs"] == 3
    assert [item["kind"] for item in vision["timeline"]] == ["grant", "grant", "change"]
    assert vision["preemptions"]["total"]["count"] == 0
    assert views["speech"]["preemptions"]["total"]["count"] == 1
    # A pool's review: the same, within the pool.
    metrics, views = review_metrics_by_project(start=W0, end=W1, pool="training")
    assert metrics == review_metrics(start=W0, end=W1, pool="training")
    for slug, view in views.items():
        assert view == review_metrics(start=W0, end=W1, pool="training", project=slug), slug


@pytest.mark.django_db
def test_capacity_is_the_one_in_force_hour_by_hour(history, ops):
    # Training's A100s go from 64 to 48 GPUs at 12:30, within the window (their earlier
    # versions dated before it): 12 h × 64 + 30 min × 64 + 30 min × 48 + 11 h × 48 = 1352
    # GPU-h available (today's 48 would say 1152).
    governance.pool_capacity_set(
        user=ops, reason=REASON, pool=history.training, flavor=history.a100, gpus=48
    )
    versions = PoolCapacity.history.model.objects.filter(
        pool=history.training, flavor=history.a100
    ).order_by("history_id")
    *earlier, last = versions
    PoolCapacity.history.model.objects.filter(pk__in=[v.pk for v in earlier]).update(
        history_date=at(-100)
    )
    PoolCapacity.history.model.objects.filter(pk=last.pk).update(history_date=at(12.5))
    capacity = review_metrics(start=W0, end=W1, pool="training")["capacity"]
    # Nothing ran above 48 GPUs after 12:30: idle 1352 − 226 = 1126. Idle while quota-waiting:
    # hours 5–6 at 64 GPUs (2 × 48 idle) and hours 20–23 at 48 (4 × 48): 288.
    assert capacity["total"] == {
        "available_gpu_hours": 1352.0,
        "allocated_gpu_hours": 226.0,
        "idle_gpu_hours": 1126.0,
        "idle_while_quota_waiting_gpu_hours": 288.0,
    }
    assert capacity["daily"][0]["available_gpu_hours"] == 1352.0
    # The lending of hours 2–3 still sees 64 − 40 = 24 unguaranteed GPUs.
    service = review_metrics(start=W0, end=W1, pool="training")["service"]["by_project"]
    assert [row["lent_gpu_hours"] for row in service] == [0.0, 16.0]


@pytest.mark.django_db
def test_a_job_without_a_quota_of_its_flavor_waits_in_its_clusters_pool(world, ops):
    from queues import services as queue_services

    # Vision has no H100 quota: a job on a cluster of the inference pool waits there; a job
    # reported without a cluster has no pool.
    cluster = queue_services.cluster_create(
        user=ops, reason=REASON, name="hpc", slurm_cluster="hpc", pools=[world.inference]
    )
    common: dict[str, Any] = {
        "project": world.vision,
        "tier": world.key,
        "gpus": 1,
        "state": JobState.COMPLETED,
    }
    job(world, "Q", **common, submitted_at=at(1), started_at=at(2), ended_at=at(3))
    failed = job(world, "C", **{**common, "state": JobState.FAILED}, flavor=world.h100,
                 cluster=cluster, submitted_at=at(1), started_at=at(3), ended_at=at(4))  # fmt: skip
    event(failed, EventKind.ENDED, 4, JobState.FAILED, 0)
    job(world, "N", **common, flavor=world.h100, submitted_at=at(1), started_at=at(5),
        ended_at=at(6))  # fmt: skip
    workload_hours_roll_up(until=W1)  # the waits and their pools, as the build does first

    waits = review_metrics(start=W0, end=W1)["waits"]
    assert [(r["pool"], r["jobs"], r["max"]) for r in waits["by_pool"]] == [
        ("inference", 1, 7200.0),
        ("training", 1, 3600.0),
        (None, 1, 14400.0),
    ]
    inference = review_metrics(start=W0, end=W1, pool="inference")
    assert (inference["waits"]["overall"]["jobs"], inference["waits"]["overall"]["p50"]) == (
        1,
        7200.0,
    )
    # The failure is counted in the job's pool, as its wait is.
    assert inference["preemptions"]["total"]["failures"] == 1
    training = review_metrics(start=W0, end=W1, pool="training")
    assert training["preemptions"]["total"]["failures"] == 0
