"""The Slurm compiler without a Slurm: desired state, plan ownership, apply grouping, guard.

Fast tests of the pure parts; ``test_slurm_limits.py`` and friends prove the same compilation
on the real Slurm. The apply test records the commands instead of running them (``sacctmgr``
needs a Slurm): it checks what would be sent, in which order and grouping.
"""

import pytest
from django.utils import timezone

from queues.schedulers.backends import Action, LiveState, own_objects
from queues.schedulers.slurm.values import parse_tres
from queues.services import sync
from queues.services.slurm import SlurmBackend, SlurmCommands
from queues.services.slurm.guard import guard_violations, pending_to_hold
from queues.services.slurm.submit import _lua, table_data, table_text

pytestmark = pytest.mark.django_db


class RecordingCommands(SlurmCommands):
    """Records each command instead of running it; reads see an empty cluster."""

    def run(self, args, *, write=False, stdin=None, tolerate=None):
        self.calls += 1
        self.writes += int(write)
        self.log.append(list(args) + ([f"<stdin:{stdin.count(chr(10))} lines>"] if stdin else []))
        return ""


def _desired(world, cluster_pools):
    from queues.models import Cluster

    cluster = Cluster.objects.create(name="c", slurm_cluster="c")
    cluster.pools.set(cluster_pools)
    backend = SlurmBackend(cluster_name="c", commands=RecordingCommands())
    return (
        cluster,
        backend,
        sync.desired_state_for(cluster=cluster, backend=backend, at=timezone.now()),
    )


def test_limits_are_compiled_where_slurm_holds_them(world):
    _cluster, _backend, desired = _desired(world, [world.training])
    vision = desired["account"]["training.vision"]
    # Every GPU type of the pool is limited on the account, 0 where there is no quota.
    assert parse_tres(vision["grp_tres"]) == {
        "gres/gpu": "40",
        "gres/gpu:a100": "40",
        "gres/gpu:h100": "0",
    }
    assert parse_tres(desired["account"]["training.speech"]["grp_tres"]) == {
        "gres/gpu": "64",
        "gres/gpu:a100": "64",
        "gres/gpu:h100": "0",
    }
    guarantee = desired["qos"]["training.vision.guarantee"]
    # MaxTRESPerAccount, never GrpTRES: a QOS GrpTRES would switch the account's limit off.
    assert guarantee["grp_tres"] == ""
    assert parse_tres(guarantee["max_tres_per_account"]) == {
        "gres/gpu": "24",
        "gres/gpu:a100": "24",
        "gres/gpu:h100": "0",
    }
    # The cautious class borrows through a QOS of its own with its minimum runtime.
    cautious = desired["qos"]["training.borrow.cautious"]
    assert cautious["preempt_exempt_time"] == "7200"
    assert cautious["preempt_mode"] == "requeue"
    assert desired["qos"]["training.borrow"]["preempt_exempt_time"] == ""
    assert set(guarantee["preempt"].split(",")) == {"training.borrow", "training.borrow.cautious"}
    production = desired["qos"]["production"]["preempt"].split(",")
    assert "training.borrow.cautious" in production
    # DefaultQOS is the project's effective tier; vision borrows through the cautious QOS.
    lead = desired["association"]["lead@training.vision"]
    assert lead["default_qos"] == "key"
    assert "training.borrow.cautious" in lead["qos"].split(",")
    assert "training.borrow" not in lead["qos"].split(",")


def test_a_marked_object_is_deleted_only_when_the_ledger_says_arbiter_made_it(world):
    _cluster, backend, desired = _desired(world, [world.training])
    fields = dict(desired["qos"]["training.borrow"])
    live = LiveState(
        objects={"qos": {"training.old": fields}, "account": {}, "association": {}, "job": {}},
        managed={"qos": {"training.old"}, "account": set(), "association": set()},
    )
    hand_made = backend.plan(
        desired=desired, live=own_objects(live=live, desired=desired, ledger={})
    )
    ours = backend.plan(
        desired=desired,
        live=own_objects(live=live, desired=desired, ledger={"qos": ["training.old"]}),
    )
    assert ("training.old", Action.DELETE) not in {(c.name, c.action) for c in hand_made}
    assert ("training.old", Action.DELETE) in {(c.name, c.action) for c in ours}


def test_a_first_apply_creates_each_qos_already_marked_and_loads_accounts_in_one_call(world):
    _cluster, backend, desired = _desired(world, [world.training, world.inference])
    live = backend.read_live()
    plan = [c for c in backend.plan(desired=desired, live=live) if c.is_write]
    backend.commands.log.clear()

    backend.apply(plan=plan, desired=desired, progress=lambda text: None)

    log = backend.commands.log
    adds = [args for args in log if args[:3] == ["sacctmgr", "-i", "add"]]
    assert adds and all(any(a.startswith("Description=arbiter:") for a in args) for args in adds)
    created = {name for args in adds for name in args[4].split(",")}
    assert created == set(desired["qos"])
    # The Preempt lists (which may name QOS of the same batch) come after every add.
    first_preempt = next(
        i for i, args in enumerate(log) if any(a.startswith("Preempt=") for a in args)
    )
    assert first_preempt > max(i for i, args in enumerate(log) if args in adds)
    assert [args[3] for args in log if args[:4] == ["sacctmgr", "-i", "load", "file=/dev/stdin"]]
    assert sum(args[:4] == ["sacctmgr", "-i", "load", "file=/dev/stdin"] for args in log) == 1


def test_the_guard_picks_the_newest_untyped_jobs_over_a_limit_and_never_a_typed_one():
    accounts = {
        "lab.alpha": {"parent": "lab", "grp_tres": "gres/gpu=2,gres/gpu:a100=2,gres/gpu:h100=0"},
        "lab": {"parent": "arbiter", "grp_tres": ""},
    }

    def job(job_id, per_node, alloc, start, account="lab.alpha"):
        return {
            "job_id": job_id,
            "job_state": "RUNNING",
            "account": account,
            "tres_per_node": per_node,
            "tres_alloc_str": f"cpu=1,{alloc}",
            "start_time": start,
        }

    jobs = [
        job(1, "gres:gpu:a100:1", "gres/gpu=1,gres/gpu:a100=1", 10),
        job(2, "gres:gpu:1", "gres/gpu=1,gres/gpu:a100=1", 11),
        job(3, "gres:gpu:1", "gres/gpu=1,gres/gpu:h100=1", 12),  # no H100 quota
        job(4, "gres:gpu:1", "gres/gpu=1,gres/gpu:a100=1", 13),  # a third A100
        job(5, "gres:gpu:1", "gres/gpu=1,gres/gpu:h100=1", 14, account="other"),
    ]
    assert guard_violations(jobs=jobs, accounts=accounts) == [
        {"job": "4", "account": "lab.alpha", "over": "gres/gpu,gres/gpu:a100"},
        {"job": "3", "account": "lab.alpha", "over": "gres/gpu,gres/gpu:h100"},
    ]
    assert guard_violations(jobs=jobs[:2], accounts=accounts) == []


def test_the_guard_holds_pending_untyped_jobs_of_typed_projects_only():
    accounts = {
        "lab.alpha": {"parent": "lab", "grp_tres": "gres/gpu=2,gres/gpu:a100=2,gres/gpu:h100=0"},
        # An untyped flavor's quota (total above the typed ones): untyped requests are its own.
        "lab.beta": {"parent": "lab", "grp_tres": "gres/gpu=3,gres/gpu:a100=1,gres/gpu:h100=0"},
    }

    def job(job_id, per_node, account="lab.alpha", state="PENDING"):
        return {
            "job_id": job_id,
            "job_state": state,
            "account": account,
            "tres_per_node": per_node,
            "tres_alloc_str": "",
        }

    jobs = [
        job("1", "gres:gpu:1"),
        job("2", "gres:gpu:a100:1"),
        job("3", "gres:gpu:2", account="lab.beta"),
        job("4", "gres:gpu:1", account="other"),
        job("5", ""),
        job("6", "gres:gpu:1", state="RUNNING"),
    ]
    assert pending_to_hold(jobs=jobs, accounts=accounts) == [
        {"job": "1", "account": "lab.alpha", "over": "held"}
    ]


def test_the_submit_table_carries_each_project_accounts_typed_maxima_caps_and_messages():
    state = {
        "account": {
            "arbiter": {"parent": "root", "grp_tres": ""},
            "lab": {"parent": "arbiter", "grp_tres": ""},
            "lab.alpha": {
                "parent": "lab",
                "grp_tres": "gres/gpu=3,gres/gpu:a100=3,gres/gpu:h100=0",
            },
        },
        "qos": {
            "key": {"grp_tres": "gres/gpu=3", "max_tres_per_job": "gres/gpu=2"},
            "regular": {"grp_tres": "", "max_tres_per_job": ""},
        },
        "association": {"root@lab.alpha": {"qos": "key,regular", "default_qos": "key"}},
    }
    data = table_data(state=state, cluster_name="lab")
    assert data["accounts"] == {
        "lab.alpha": {
            "project": "alpha",
            "pool": "lab",
            "max": {"a100": 3, "h100": 0},
            "untyped": 3,
            "untyped_ok": False,
        }
    }
    assert data["qos"] == {"key": {"cap": 3, "per_job": 2}}
    assert data["default_qos"] == {"root@lab.alpha": "key"}
    assert "没有 {type} GPU 配额" in data["messages"]["zh"]["no_quota_type"]
    # The fingerprint follows the rules, not the clock; the header carries both.
    assert table_data(state=state, cluster_name="lab")["fingerprint"] == data["fingerprint"]
    text = table_text(data, expires=123)
    assert text.startswith(f"-- arbiter-submit-table format=1 fingerprint={data['fingerprint']} ")
    assert '["expires"] = 123' in text
    assert _lua('a "quoted"\\ line\n') == '"a \\034quoted\\034\\092 line\\010"'


def _add_projects(world, first: int, last: int) -> None:
    """Projects ``p<first>`` … ``p<last - 1>``, each with a member and quotas of every class."""
    from governance import services as rules
    from governance.models import ProjectRole, User

    kw = {"user": world.ops, "reason": "Test set-up"}
    classes = [world.allowed, world.cautious, world.forbidden]
    tiers = [world.exploratory, world.regular, world.key, None]
    for flavor in (world.a100, world.h100):
        rules.pool_capacity_set(**kw, pool=world.training, flavor=flavor, gpus=200)
    for i in range(first, last):
        project = rules.project_create(**kw, slug=f"p{i:03d}", name=f"P {i}", tier=tiers[i % 4])
        member = User.objects.create_user(username=f"u{i:03d}")
        rules.membership_set(**kw, project=project, member=member, role=ProjectRole.LEAD)
        for pool, flavor in ((world.training, world.a100), (world.training, world.h100)):
            rules.quota_create(
                **kw,
                project=project,
                pool=pool,
                flavor=flavor,
                guarantee=1,
                borrow_limit=i % 4,
                preemption_class=classes[i % 3],
            )


def test_the_desired_state_costs_the_same_queries_for_10_and_50_projects(world):
    """The desired state reads each kind of row once, whatever the number of projects."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cluster, backend, _desired_state = _desired(world, [world.training])
    counts, sizes = [], []
    for first, last in ((0, 10), (10, 50)):
        _add_projects(world, first, last)
        with CaptureQueriesContext(connection) as queries:
            desired = sync.desired_state_for(cluster=cluster, backend=backend, at=timezone.now())
        counts.append(len(queries))
        sizes.append(
            (
                len([name for name in desired["account"] if ".p" in name]),
                len([name for name in desired["association"] if name.startswith("u")]),
            )
        )
    assert sizes == [(10, 10), (50, 50)]
    # effective rules: tiers, projects, grants, pools, flavors, classes, quotas; then the
    # preemptible tiers, the cluster's pools, capacities, the pools' GRES types (2), members
    assert counts == [13, 13]
