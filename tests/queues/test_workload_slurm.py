"""The Slurm collector against a real Slurm: each wait category created for real, classified,
explained; a long-wait alert that opens and closes; a project pushed over its quota by hand.

Shares the lab cluster with the sync tests: it uses its own pool, accounts, QOS and job
names, cancels only its own jobs, and does not assume an empty queue. To make a job pend on
an impossible constraint it gives the node a feature for a moment (Slurm refuses unknown
features at submit time) and restores the node's features at once.
"""

import re
import tempfile
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from governance import services as rules
from governance.models import ProjectRole, User
from queues import services
from queues.models import (
    Alert,
    AlertKind,
    CollectorState,
    JobState,
    WaitCategory,
    WorkloadEvent,
    WorkloadJob,
)
from queues.selectors import job_wait_explanation
from queues.services.workload import collect_cluster
from tests.conftest import REASON, require_service
from tests.queues.conftest import SLURM_CLUSTER, Slurm, _slurm_answers, slurm_conf

PROBE = "evprobe"


@pytest.fixture
def evslurm():
    conf = slurm_conf()
    ok, why = _slurm_answers(conf)
    require_service("Slurm", ok, why)
    with tempfile.TemporaryDirectory(prefix="arbiter-evidence-") as workdir:
        lab = Slurm(conf=conf, workdir=workdir)
        yield lab
        if lab.jobs:
            lab.run("scancel", *lab.jobs, check=False)


def node_features(lab: Slurm) -> tuple[str, str]:
    out = lab.run("scontrol", "show", "node", "-o")
    available = re.search(r"AvailableFeatures=(\S*)", out)
    active = re.search(r"ActiveFeatures=(\S*)", out)
    assert available is not None and active is not None, out
    return available.group(1), active.group(1)


def _with_probe(features: str) -> str:
    return ",".join(f for f in [*features.split(","), PROBE] if f and f != "(null)")


def _restored(features: str) -> str:
    return "" if features == "(null)" else features


def impossible_job(lab: Slurm, *, account: str, qos: str) -> str:
    """A job whose constraint matches no node (pending ``BadConstraints``)."""
    node = lab.run("scontrol", "show", "node", "-o").split()[0].split("=")[1]
    available, active = node_features(lab)
    lab.run(
        "scontrol",
        "update",
        f"NodeName={node}",
        f"AvailableFeatures={_with_probe(available)}",
        f"ActiveFeatures={_with_probe(active)}",
    )
    try:
        job = lab.sbatch(
            "--hold", "-J", "ev-impossible", "-C", PROBE, account=account, qos=qos, gpus="a100:1"
        )
    finally:
        lab.run(
            "scontrol",
            "update",
            f"NodeName={node}",
            f"AvailableFeatures={_restored(available)}",
            f"ActiveFeatures={_restored(active)}",
        )
    lab.run("scontrol", "release", job)
    return job


@pytest.fixture
def evlab(ops, evslurm):
    kw = {"user": ops, "reason": REASON}
    root = User.objects.create_user(username="root", password=None)
    owner = User.objects.create_user(username="tierowner", email="owner@example.com")
    a100 = rules.flavor_create(
        **kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80, gres_type="a100"
    )
    h100 = rules.flavor_create(
        **kw, slug="h100", name="H100", gpu_model="H100", memory_gb=80, gres_type="h100"
    )
    pool = rules.pool_create(**kw, slug="evpool", name="Evidence pool")
    rules.pool_capacity_set(**kw, pool=pool, flavor=a100, gpus=4)
    rules.pool_capacity_set(**kw, pool=pool, flavor=h100, gpus=4)
    common = {"eligibility": "Any", "confirmed_by": "Ops", "review_cycle_days": 90}
    low = rules.tier_create(
        **kw,
        **common,
        owner=ops,
        slug="evexp",
        name="Ev exploratory",
        score=10,
        scheduler_value=100,
    )
    regular = rules.tier_create(
        **kw,
        **common,
        owner=ops,
        slug="evreg",
        name="Ev regular",
        score=40,
        scheduler_value=400,
        is_default=True,
    )
    top = rules.tier_create(
        **kw,
        **common,
        owner=owner,
        slug="evprod",
        name="Ev production",
        score=95,
        scheduler_value=950,
        wait_alert_minutes=1,
    )
    allowed = rules.preemption_class_create(
        **kw, slug="evallowed", name="Allowed", kind="allowed", business_impact="Restartable."
    )
    projects = {}
    for slug, tier, flavor, guarantee, borrow in [
        ("evbig", top, a100, 4, 0),
        ("evcap", regular, h100, 1, 0),
        ("evtop", top, a100, 0, 4),
        ("evlow", low, a100, 0, 4),
    ]:
        project = rules.project_create(**kw, slug=slug, name=slug.title(), tier=tier)
        rules.membership_set(**kw, project=project, member=root, role=ProjectRole.LEAD)
        rules.quota_create(
            **kw,
            project=project,
            pool=pool,
            flavor=flavor,
            guarantee=guarantee,
            borrow_limit=borrow,
            preemption_class=allowed,
        )
        projects[slug] = project
    cluster = services.cluster_create(
        **kw, name="evlab", slurm_cluster=SLURM_CLUSTER, slurm_conf=evslurm.conf, pools=[pool]
    )
    run = services.sync_now(cluster=cluster, user=ops)
    assert run.status == "succeeded", run.error
    return {"cluster": cluster, "projects": projects, "owner": owner, "ops": ops, "slurm": evslurm}


def _explain(job):
    """The answer the job page gives: with what Slurm holds now."""
    return job_wait_explanation(job, live=services.job_live_wait(job))


def account(slug):
    return f"evpool.{slug}"


def test_each_wait_category_for_real(evlab):
    lab, cluster = evlab["slurm"], evlab["cluster"]
    big = lab.sbatch("-J", "ev-big", account=account("evbig"), qos="evprod", gpus="a100:4")
    lab.wait_state(big, "RUNNING")
    # First in the queue, or the scheduler never looks at it (it shows ``Priority``).
    bad = impossible_job(lab, account=account("evtop"), qos="evprod")
    used = lab.sbatch("-J", "ev-cap1", account=account("evcap"), qos="evreg", gpus="h100:1")
    lab.wait_state(used, "RUNNING")
    capped = lab.sbatch("-J", "ev-cap2", account=account("evcap"), qos="evreg", gpus="h100:1")
    top = lab.sbatch("-J", "ev-top", account=account("evtop"), qos="evprod", gpus="a100:1")
    low = lab.sbatch("-J", "ev-low", account=account("evlow"), qos="evexp", gpus="a100:1")
    dep = lab.sbatch(
        "-J", "ev-dep", "-d", f"afterok:{big}", account=account("evlow"), qos="evexp", gpus="a100:1"
    )
    expected = {
        top: ("Resources", WaitCategory.RESOURCE),
        capped: ("GrpGRES", WaitCategory.QUOTA),
        low: ("Priority", WaitCategory.QUEUE_RULE),
        dep: ("Dependency", WaitCategory.DEPENDENCY),
        bad: ("BadConstraints", WaitCategory.PLACEMENT),
    }

    def settled() -> bool:
        return all(want in lab.job(job)["reason"] for job, (want, _c) in expected.items())

    try:
        lab.wait_for("every reason to settle", settled, timeout=40)
    except AssertionError as error:
        raise AssertionError(f"{error}: {[lab.job(job) for job in expected]}") from None
    result = collect_cluster(cluster=cluster)
    assert result.ok, result.error
    for job_id, (reason, category) in expected.items():
        job = WorkloadJob.objects.get(source="evlab", job_id=job_id)
        assert job.state == JobState.PENDING and job.category == category, (job_id, job.reason)
        assert reason in job.reason
    jobs = {
        j.job_id: j
        for j in WorkloadJob.objects.filter(source="evlab").select_related(
            "project", "tier", "flavor"
        )
    }
    assert jobs[big].state == JobState.RUNNING and jobs[big].project.slug == "evbig"
    assert (
        jobs[big].tier.slug == "evprod" and jobs[big].gpus == 4 and jobs[big].flavor.slug == "a100"
    )
    # The next step for each category, in plain words.
    quota = _explain(jobs[capped])
    assert "uses 1 of 1 H100 GPUs" in quota.next_step and "kind=quota_exception" in quota.action_url
    assert "project=evcap" in quota.action_url
    resource = _explain(jobs[top]).next_step
    assert "4 are allocated, 0 are free and the job asks for 1" in resource, resource
    queue = _explain(jobs[low])
    ahead = [j["job_id"] for j in queue.ahead]
    assert top in ahead and low not in ahead and queue.ahead_count == len(ahead)
    assert "rank ahead of it" in queue.next_step and "queue jump" in queue.next_step
    assert "depends on" in _explain(jobs[dep]).next_step
    assert f"“{PROBE}” matches no node" in _explain(jobs[bad]).next_step
    # Reading the same queue again stores nothing new about these jobs (the lab is shared:
    # a job another test left behind may end or appear meanwhile, and is recorded).
    ours = WorkloadEvent.objects.filter(source="evlab", job__job_id__in=[big, *expected])
    before = ours.count()
    again = collect_cluster(cluster=cluster)
    assert again.ok and again.ingest.duplicates > 0 and ours.count() == before
    state = CollectorState.objects.get(cluster=cluster)
    assert state.last_success_at and state.failures == 0


def test_long_wait_alert_opens_and_closes_and_overuse_is_reported(evlab):
    lab, cluster = evlab["slurm"], evlab["cluster"]
    big = lab.sbatch("-J", "ev-big", account=account("evbig"), qos="evprod", gpus="a100:4")
    lab.wait_state(big, "RUNNING")
    top = lab.sbatch("-J", "ev-top", account=account("evtop"), qos="evprod", gpus="a100:1")
    used = lab.sbatch("-J", "ev-cap1", account=account("evcap"), qos="evreg", gpus="h100:1")
    lab.wait_state(used, "RUNNING")
    capped = lab.sbatch("-J", "ev-cap2", account=account("evcap"), qos="evreg", gpus="h100:1")
    lab.wait_for("the top job to wait", lambda: lab.job(top)["reason"] == "Resources", timeout=30)
    collect_cluster(cluster=cluster)
    later = timezone.now() + timedelta(minutes=2)  # past the tier's 1-minute threshold
    mail.outbox.clear()
    assert services.wait_alerts_check(now=later)["open"] == 1
    assert services.wait_alerts_check(now=later + timedelta(minutes=1))["open"] == 1
    alert = Alert.objects.get(kind=AlertKind.LONG_WAIT, closed_at=None)
    assert alert.details["job"] == top and alert.details["minutes"] >= 2
    assert {u.username for u in alert.recipients.all()} == {"tierowner", "ops"}
    assert Alert.objects.filter(kind=AlertKind.LONG_WAIT).count() == 1  # updated, not repeated
    # Ops raise the project's limit by hand: its second job starts, above its 1-GPU maximum.
    lab.sacctmgr(
        "-i",
        "modify",
        "account",
        "where",
        f"name={account('evcap')}",
        "set",
        "GrpTRES=gres/gpu=3,gres/gpu:h100=3",
    )
    lab.wait_state(capped, "RUNNING", timeout=40)
    lab.run("scancel", big)
    lab.wait_state(top, "RUNNING", timeout=40)
    collect_cluster(cluster=cluster)
    found = services.rules_check()
    assert found["open"] == 1
    over = Alert.objects.get(kind=AlertKind.RULE_NOT_ENFORCED, closed_at=None)
    assert over.cluster == cluster and over.details["rule"] == "over_maximum"
    assert (over.details["allowed"], over.details["seen"]) == (1, 2)
    closed = services.wait_alerts_check()
    assert closed["closed"] == 1
    alert.refresh_from_db()
    assert alert.closed_at is not None and alert.details["minutes"] >= 0
