"""Grants that name jobs: which pending job moves where, and which are skipped (no Slurm).

``settle`` resolves the named jobs of the desired state against the jobs read live; these
tests give it the live queue directly. The moves themselves are proven against the real
Slurm in test_sync_slurm.py and test_scheduling_behaviour.py.
"""

from queues.services import LiveState, SlurmBackend, SlurmCommands

ACCOUNT = "lab.team"
ASSOCIATION = f"root@{ACCOUNT}"


def _backend() -> SlurmBackend:
    return SlurmBackend(cluster_name="lab", commands=SlurmCommands())


def _qos(priority: int) -> dict[str, str]:
    return {"description": "arbiter: tier", "priority": str(priority)}


def _desired(**requests: dict[str, str]) -> dict:
    return {
        "qos": {
            "exploratory": _qos(100),
            "regular": _qos(400),
            "regular-protected": _qos(400),
            "key": _qos(700),
            "production": _qos(950),
            "lab.borrow": _qos(0),
        },
        "account": {},
        "association": {
            ASSOCIATION: {"qos": "exploratory,lab.borrow,regular", "default_qos": "regular"}
        },
        "job": {
            job: {
                "project": "team",
                "tier": "",
                "protect": "",
                "accounts": ACCOUNT,
                "protected_accounts": "",
                "base": "regular",
            }
            | fields
            for job, fields in requests.items()
        },
    }


def _live(jobs: dict[str, tuple[str, str, str]], associations=None) -> LiveState:
    return LiveState(
        objects={
            "qos": {},
            "account": {},
            "association": associations or {},
            "job": {
                job: {"state": state, "qos": qos, "account": account, "user": "root"}
                for job, (state, qos, account) in jobs.items()
            },
        },
        managed={"qos": set(), "account": set(), "association": set()},
    )


def test_a_named_pending_job_moves_to_the_granted_tier_which_its_association_then_allows():
    desired = _desired(**{"12": {"tier": "key"}})
    live = _live({"12": ("PENDING", "regular", ACCOUNT)})

    settled, skipped = _backend().settle(desired=desired, live=live, applied={})
    plan = _backend().plan(desired=settled, live=live)

    assert skipped == []
    assert settled["job"] == {"12": {"qos": "key", "restore": "regular"}}
    assert settled["association"][ASSOCIATION]["qos"] == "exploratory,key,lab.borrow,regular"
    assert [(c.name, c.fields[0].live, c.fields[0].desired) for c in plan if c.kind == "job"] == [
        ("12", "regular", "key")
    ]


def test_running_unknown_foreign_and_malformed_jobs_are_skipped_with_the_reason():
    desired = _desired(
        **{name: {"tier": "key"} for name in ("1", "2", "3", "4", "12;rm")},
    )
    live = _live(
        {
            "1": ("RUNNING", "regular", ACCOUNT),
            "3": ("PENDING", "regular", "lab.other"),
            "4": ("PENDING", "regular", ACCOUNT),
        }
    )
    live.objects["job"]["4"]["user"] = "alice"  # no association of Arbiter's allows key

    settled, skipped = _backend().settle(desired=desired, live=live, applied={})

    assert settled["job"] == {}
    assert settled["association"] == desired["association"]
    assert {c.name: (c.action, c.note) for c in skipped} == {
        "1": ("skip", "running: only pending jobs are moved"),
        "2": ("skip", "not in the queue (finished long ago, or never submitted here)"),
        "3": ("skip", "runs under account lab.other, not one of project team"),
        "4": (
            "skip",
            "the association of alice with lab.team is not Arbiter's and does not allow QOS key",
        ),
        "12;rm": ("skip", "not a Slurm job id"),
    }


def test_a_grant_never_lowers_a_job_and_protection_keeps_the_jobs_tier():
    desired = _desired(
        **{"7": {"tier": "key"}, "8": {"protect": "yes"}, "9": {"protect": "yes"}},
    )
    live = _live(
        {
            "7": ("PENDING", "production", ACCOUNT),
            "8": ("PENDING", "regular", ACCOUNT),
            "9": ("PENDING", "lab.borrow", ACCOUNT),  # no tier's QOS: the project's tier
        }
    )
    settled, skipped = _backend().settle(desired=desired, live=live, applied={})
    assert skipped == []
    assert {job: fields["qos"] for job, fields in settled["job"].items()} == {
        "7": "production",
        "8": "regular-protected",
        "9": "regular-protected",
    }
    plan = _backend().plan(desired=settled, live=live)
    assert [(c.name, c.fields[0].desired) for c in plan if c.kind == "job"] == [
        ("8", "regular-protected"),
        ("9", "regular-protected"),
    ]


def test_when_the_grant_ends_a_pending_job_goes_back_and_a_running_one_stays_tracked():
    applied = {
        "job": {
            "20": {"qos": "key", "restore": "regular"},
            "21": {"qos": "key", "restore": "regular"},
            "22": {"qos": "key", "restore": "production"},  # no longer allowed
            "23": {"qos": "key", "restore": "regular"},  # moved by hand since: left alone
            "24": {"qos": "key", "restore": "regular"},  # gone
        }
    }
    live = _live(
        {
            "20": ("PENDING", "key", ACCOUNT),
            "21": ("RUNNING", "key", ACCOUNT),
            "22": ("PENDING", "key", ACCOUNT),
            "23": ("PENDING", "exploratory", ACCOUNT),
        }
    )

    settled, skipped = _backend().settle(desired=_desired(), live=live, applied=applied)
    plan = _backend().plan(desired=settled, live=live)

    assert skipped == []
    assert settled["job"] == {
        "20": {"qos": "regular", "restore": "regular"},
        "21": {"qos": "key", "restore": "regular"},
        "22": {"qos": "regular", "restore": "regular"},  # the association's DefaultQOS
    }
    assert [(c.name, c.fields[0].desired, c.note) for c in plan if c.kind == "job"] == [
        ("20", "regular", "moved back: its grant ended"),
        ("22", "regular", "moved back: its grant ended"),
    ]
    # The next sync forgets the jobs that are back.
    live.objects["job"]["20"]["qos"] = live.objects["job"]["22"]["qos"] = "regular"
    again, _skipped = _backend().settle(desired=_desired(), live=live, applied=settled)
    assert again["job"] == {"21": {"qos": "key", "restore": "regular"}}
