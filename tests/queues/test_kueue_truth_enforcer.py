"""The Kueue truth test, part 3: the rules Kueue cannot hold, held by Arbiter's enforcer.

On the lab of deploy/k8s/up.sh (see ``test_kueue_truth``) with its set-up (pool "truth" of 8
A100 GPUs; vision guarantee 4, borrows, cautious; nlp 2; serving 2, never preempted). The
enforcer (``queues.services.kueue.enforce``) is run by the test, as its beat task would, with
``at`` the moment it reads the rules for: a test moves ``at`` forward to stand for the
minutes of waiting or running a rule asks (Kueue's own timestamps stay real), so that an
aging of hours is observed in seconds. What Kueue then does with the patched Workloads is
real. Each test records what it saw in ``OBSERVED``; the last one compares the dry run's
enforcement table with it, row by row (run the file whole).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance import services as rules
from governance.models import GrantKind, PreemptionClass, PriorityTier, Project, Terms
from queues import services
from queues.models import SyncStatus
from queues.services.kueue import KueueBackend
from queues.services.kueue.enforce import HELD, WHY, EnforceResult, kueue_enforce
from tests.conftest import REASON
from tests.queues.test_kueue_truth import JOBS, job, truth

pytestmark = pytest.mark.k8s
FIXTURES = (truth,)  # test_kueue_truth's set-up, shared

# What each enforcer rule was seen to do on the lab: "arbiter" when it held.
OBSERVED: dict[str, str] = {}


def enforce(truth, at: datetime | None = None) -> EnforceResult:
    # The sync's account (the Helm chart's ServiceAccount under ARBITER_K8S_SYNC_AS=chart).
    connection = replace(truth.sync_connection, namespace_template=truth.template)
    started = time.monotonic()
    result = kueue_enforce(cluster=truth.cluster, connection=connection, at=at)
    OBSERVED.setdefault("pass seconds", f"{time.monotonic() - started:.3f}")
    assert result.errors == [], result.errors
    return result


def workload(truth, project: str, name: str) -> dict[str, Any]:
    return truth.workloads(project)[name]


def created(truth, project: str, name: str) -> datetime:
    stamp = workload(truth, project, name)["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def delete_job(truth, project: str, name: str) -> None:
    truth.client.request(
        "DELETE",
        f"{JOBS.format(ns=truth.ns[project])}/{name}",
        body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
    )


def submitted(truth, project: str, manifest: dict[str, Any], *states: str) -> None:
    status, message = truth.submit(project, manifest)
    assert status == 201, message
    name = manifest["metadata"]["name"]
    truth.wait(
        lambda: (
            truth.state(project, name)["state"] in states
            or ("pending" in states and truth.state(project, name)["message"] != "")
        )
    )


def stays(truth, what, seconds: float = 5) -> None:
    """``what`` holds now and for ``seconds`` (Kueue acts within a second or two)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert what()
        time.sleep(0.5)


def aging(org) -> None:
    """Exploratory ages: 10 score points every 240 minutes, up to Regular."""
    exploratory = PriorityTier.objects.get(slug="exploratory")
    rules.tier_update(
        user=org.ops,
        reason=REASON,
        tier=exploratory,
        data={"aging_after_minutes": 240, "aging_step": 10, "aging_cap": org.regular},
    )


def test_aging_raises_a_pending_workloads_priority_up_to_its_cap(truth, org, capsys):
    """Exploratory (100) ages by 10 score points every 240 minutes up to Regular (400): in
    scheduler values, +100 a step. A pending exploratory Workload of nlp is raised to 200
    after one step, to 400 (its cap, not 500) after four; Kueue keeps the value and acts on
    it: when room frees, the aged Workload goes before a Batch one (300) submitted after it,
    which it would have followed at its own 100. (Against an equal priority the order is
    Kueue's FIFO, which BestEffortFIFO does not keep through requeues: the full CI run saw a
    Regular newcomer admitted first, so the comparison is with a strictly lower tier.)"""
    aging(org)
    rules.tier_create(
        user=org.ops,
        reason=REASON,
        slug="batch",
        name="Batch",
        score=30,
        scheduler_value=300,
        owner=org.ops,
        eligibility="Any",
        confirmed_by="Ops",
        review_cycle_days=90,
    )
    assert truth.sync().status == SyncStatus.SUCCEEDED
    # The full CI run once submitted "later" before the API server had read the new policy.
    truth.until_policy("nlp", job("probe", 1, tier="batch"), 201)
    submitted(truth, "nlp", job("first", 2, tier="exploratory"), "admitted")
    submitted(truth, "nlp", job("aged", 2, tier="exploratory"), "pending")
    since = created(truth, "nlp", "aged")
    assert enforce(truth, since + timedelta(minutes=200)).patched == []
    assert workload(truth, "nlp", "aged")["spec"]["priority"] == 100
    started = time.monotonic()
    one = enforce(truth, since + timedelta(minutes=241))
    assert any(line.startswith(f"{truth.ns['nlp']}/") for line in one.patched), one.patched
    assert workload(truth, "nlp", "aged")["spec"]["priority"] == 200
    raised = enforce(truth, since + timedelta(minutes=4 * 240 + 1))
    assert workload(truth, "nlp", "aged")["spec"]["priority"] == 400, raised.patched
    annotations = workload(truth, "nlp", "aged")["metadata"]["annotations"]
    assert annotations[WHY].startswith("aging: 4 step(s) of 240 minutes")
    # Idempotent: the same pass again changes nothing; Kueue did not put the value back.
    assert enforce(truth, since + timedelta(minutes=4 * 240 + 1)).patched == []
    submitted(truth, "nlp", job("later", 2, tier="batch"), "pending")
    stays(truth, lambda: workload(truth, "nlp", "aged")["spec"]["priority"] == 400, 2)
    freed = time.monotonic()
    delete_job(truth, "nlp", "first")

    def aged_admitted() -> bool:
        # As the beat task would, pass after pass (Kueue's WorkloadPriorityClass controller
        # writes a class's value back when it reconciles the class).
        enforce(truth, since + timedelta(minutes=4 * 240 + 1))
        return truth.state("nlp", "aged")["state"] == "admitted"

    try:
        truth.wait(aged_admitted)
    except AssertionError as error:
        found = {
            name: (
                item["spec"].get("priority"),
                truth.state("nlp", name)["state"],
                item["spec"].get("active"),
                item["metadata"].get("annotations"),
                [
                    (c["type"], c["status"], c["reason"], c["lastTransitionTime"], c["message"])
                    for c in item.get("status", {}).get("conditions", [])
                ],
            )
            for name, item in truth.workloads("nlp").items()
        }
        raise AssertionError(f"{error}: {found}") from error
    admitted_after = time.monotonic() - freed
    assert truth.state("nlp", "later")["state"] == "pending"
    OBSERVED["aging"] = "arbiter"
    with capsys.disabled():
        print(
            f"\nAging: 100 → 200 → 400 (cap) in {freed - started:.1f} s of passes; the aged "
            f"Workload admitted {admitted_after:.1f} s after room freed, before the Batch one"
        )


def test_a_cautious_job_survives_a_preemptor_until_its_minimum_runtime_then_a_daily_maximum(
    truth, org, capsys
):
    """vision (class cautious: 2 minutes before preemption, at most 1 preemption a day) may
    use production now, so its queue preempts its own lower tiers (withinClusterQueue
    LowerPriority). A Regular job of 8 GPUs runs; a Production job of 8 GPUs waits while the
    first has run less than 2 minutes (the enforcer runs it at 951, above every tier), and
    preempts it once the minimum is past. That is the class's one preemption of the day: the
    job, admitted again, is kept above every tier and a second Production job waits."""
    kw = {"user": org.ops, "reason": REASON}
    cautious = PreemptionClass.objects.get(slug="cautious")
    rules.preemption_class_update(
        **kw,
        preemption_class=cautious,
        data={"min_runtime_minutes": 2, "max_preemptions_per_day": 1},
    )
    vision = Project.objects.get(slug="vision")
    rules.project_update(**kw, project=vision, data={"tier": org.production})
    assert truth.sync().status == SyncStatus.SUCCEEDED

    truth.until_policy("vision", job("probe", 1, tier="production"), 201)
    submitted(truth, "vision", job("long", 8, tier="regular"), "admitted")
    enforce(truth)
    assert workload(truth, "vision", "long")["spec"]["priority"] == 951
    submitted(truth, "vision", job("urgent", 8, tier="production"), "pending")
    stays(truth, lambda: truth.state("vision", "long")["state"] == "admitted")
    assert truth.state("vision", "urgent")["state"] == "pending"
    later = timezone.now() + timedelta(minutes=3)
    started = time.monotonic()
    enforce(truth, later)  # past its 2 minutes: back to Regular (400)
    truth.wait(lambda: truth.state("vision", "urgent")["state"] == "admitted")
    preempted_after = time.monotonic() - started
    assert truth.state("vision", "long")["state"] in ("preempted", "pending")
    OBSERVED["minimum runtime"] = "arbiter"
    # The day's one preemption counted; the job admitted again is protected for the day.
    assert enforce(truth, later).counts == {"cautious": 1}
    delete_job(truth, "vision", "urgent")
    truth.wait(lambda: truth.state("vision", "long")["state"] == "admitted")
    enforce(truth, later + timedelta(seconds=30))
    protected = workload(truth, "vision", "long")
    assert protected["spec"]["priority"] == 951
    assert "1 preemptions today, its maximum 1" in protected["metadata"]["annotations"][WHY]
    submitted(truth, "vision", job("urgent-2", 8, tier="production"), "pending")
    stays(truth, lambda: truth.state("vision", "long")["state"] == "admitted")
    OBSERVED["daily maximum"] = "arbiter"
    with capsys.disabled():
        print(
            f"\nMinimum runtime: the Production job waited while the cautious one ran; "
            f"{preempted_after:.1f} s after the pass that ended its protection it was "
            "preempted; the daily maximum (1) then kept it from a second Production job"
        )


def test_a_reclaim_takes_a_protected_borrower_at_once_so_no_grace_holds(truth, org, capsys):
    """What priority cannot hold: vision's cautious job borrows 4 of its 8 GPUs and runs
    protected (951, its minimum runtime not past); nlp asks its guarantee back and Kueue
    reclaims at once (reclaimWithinCohort Any), whatever the borrower's priority. So a
    reclaim grace cannot be held by priority: the table says "not enforced" and why."""
    rules.preemption_class_update(
        user=org.ops,
        reason=REASON,
        preemption_class=PreemptionClass.objects.get(slug="cautious"),
        data={"min_runtime_minutes": 30},
    )
    submitted(truth, "vision", job("borrower", 8, tier="regular"), "admitted")
    enforce(truth)
    assert workload(truth, "vision", "borrower")["spec"]["priority"] == 951
    started = time.monotonic()
    submitted(truth, "nlp", job("owner", 2, tier="exploratory"), "admitted")
    truth.wait(lambda: truth.state("vision", "borrower")["state"] != "admitted")
    reclaimed_after = time.monotonic() - started
    assert truth.state("vision", "borrower")["reason"] in ("InCohortReclamation", "Pending", "")
    OBSERVED["reclaim grace"] = "not_enforced"
    with capsys.disabled():
        print(
            f"\nReclaim: the protected (951) borrower was reclaimed {reclaimed_after:.1f} s "
            "after the lender's job was submitted (Kueue ignores priority for a reclaim)"
        )


def test_a_tiers_gpu_caps_hold_across_projects(truth, org):
    """Regular: at most 3 GPUs across projects, 3 per job. nlp's and serving's 2-GPU Regular
    jobs are both admitted by Kueue (it has no per-priority limit); the enforcer holds the
    newer (spec.active false: evicted, pending, with the reason) and a 4-GPU job at once;
    when nlp's ends, the held one is released and admitted."""
    rules.tier_update(
        user=org.ops,
        reason=REASON,
        tier=org.regular,
        data={"max_gpus_total": 3, "max_gpus_per_job": 3},
    )
    submitted(truth, "nlp", job("r1", 2, tier="regular"), "admitted")
    submitted(truth, "serving", job("r2", 2, tier="regular"), "admitted")
    submitted(truth, "vision", job("big", 4, tier="regular"), "admitted", "pending")
    enforce(truth)
    truth.wait(lambda: truth.state("serving", "r2")["state"] != "admitted")
    held = workload(truth, "serving", "r2")
    assert held["spec"]["active"] is False
    assert "2 of its 3 GPUs across projects in use" in held["metadata"]["annotations"][HELD]
    big = workload(truth, "vision", "big")
    assert big["spec"]["active"] is False
    assert "past its cap of 3 per job" in big["metadata"]["annotations"][HELD]
    assert truth.state("nlp", "r1")["state"] == "admitted"
    assert enforce(truth).patched == []  # idempotent
    delete_job(truth, "nlp", "r1")
    truth.wait(lambda: "r1" not in truth.workloads("nlp"))
    enforce(truth)
    truth.wait(lambda: truth.state("serving", "r2")["state"] == "admitted")
    assert HELD not in (workload(truth, "serving", "r2")["metadata"].get("annotations") or {})
    assert workload(truth, "vision", "big")["spec"]["active"] is False
    OBSERVED["GPU caps"] = "arbiter"


def test_work_admitted_under_a_grant_is_lowered_when_the_grant_ends(truth, org):
    """Production says: when a grant of it ends, work admitted under it is lowered to the
    project's own tier. nlp (tier Regular, the default) is granted Production for a few
    seconds; a Production job admitted meanwhile runs at 950, and at 400 after the grant
    ends (the enforcer's pass after the expiry and sync)."""
    kw = {"user": org.ops, "reason": REASON}
    rules.tier_update(**kw, tier=org.production, data={"after_grant": "lower"})
    nlp = Project.objects.get(slug="nlp")
    ends = timezone.now() + timedelta(seconds=15)
    rules.grant_create(
        **kw,
        project=nlp,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=org.production,
            starts_at=timezone.now() - timedelta(minutes=1),
            ends_at=ends,
        ),
    )
    assert truth.sync().status == SyncStatus.SUCCEEDED

    truth.until_policy("nlp", job("probe", 1, tier="production"), 201)
    submitted(truth, "nlp", job("granted", 1, tier="production"), "admitted")
    assert enforce(truth).patched == []  # the grant is in force: nothing to do
    assert workload(truth, "nlp", "granted")["spec"]["priority"] == 950
    time.sleep(max((ends - timezone.now()).total_seconds(), 0) + 1)
    rules.grants_transition()
    assert truth.sync().status == SyncStatus.SUCCEEDED
    enforce(truth)
    lowered = workload(truth, "nlp", "granted")
    assert lowered["spec"]["priority"] == 400
    assert "grant of production ended: lowered" in lowered["metadata"]["annotations"][WHY]
    assert truth.state("nlp", "granted")["state"] == "admitted"  # still running, lower
    OBSERVED["grant end"] = "arbiter"


def test_the_enforcers_rows_of_the_dry_run_table_match_what_the_lab_did(truth, org, capsys):
    """Every row the enforcer holds (how "arbiter") and the reclaim grace row, with the rules
    of the tests above, against what those tests observed (the other rows are compared in
    ``test_kueue_truth_workloads``)."""
    if not {"aging", "minimum runtime", "daily maximum", "GPU caps", "grant end"} <= set(OBSERVED):
        pytest.fail(f"run the file whole: the rows are compared with its tests ({OBSERVED})")
    kw = {"user": org.ops, "reason": REASON}
    aging(org)
    rules.preemption_class_update(
        **kw,
        preemption_class=PreemptionClass.objects.get(slug="cautious"),
        data={"min_runtime_minutes": 2, "max_preemptions_per_day": 1},
    )
    quota = Project.objects.get(slug="vision").quotas.get()
    rules.quota_update(**kw, quota=quota, data={"reclaim_grace_minutes": 5})
    rules.tier_update(**kw, tier=org.regular, data={"max_gpus_total": 3, "max_gpus_per_job": 3})
    rules.tier_update(**kw, tier=org.production, data={"after_grant": "lower"})
    backend = KueueBackend(
        connection=replace(truth.client.connection, namespace_template=truth.template)
    )
    run = services.sync_now(cluster=truth.cluster, user=org.ops, backend=backend, dry_run=True)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    tiers = {t.name for t in PriorityTier.objects.all()}

    def seen(rule: str) -> str:
        if ": aging" in rule:
            return OBSERVED["aging"]
        if rule.endswith(": GPU caps"):
            return OBSERVED["GPU caps"]
        if "when a grant of it ends" in rule:
            return OBSERVED["grant end"]
        if "minutes before preemption" in rule:
            return OBSERVED["minimum runtime"]
        if "preemptions a day" in rule:
            return OBSERVED["daily maximum"]
        if "grace before a reclaim" in rule:
            return OBSERVED["reclaim grace"]
        return ""

    compared = []
    for row in run.result["enforcement"]:
        found = seen(row["rule"])
        if row["how"] == "arbiter" or found:
            compared.append((row["rule"], row["how"], found))
    with capsys.disabled():
        print("\nEnforcer rows of the dry run's table against the lab")
        for rule, how, found in compared:
            print(f"  {rule[:70]:<70} table {how:<13} seen {found}")
        print(f"  one enforcer pass: {OBSERVED.get('pass seconds')} s")
    assert {rule.split(":")[0].removeprefix("Tier ") for rule, *_ in compared} & tiers
    assert len(compared) >= 6, compared
    for rule, how, found in compared:
        assert how == found, (rule, how, found)
