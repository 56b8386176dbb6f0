"""The tier cap's split over a tier's QOS, without a Slurm: the shares, and how a plan reads
them (the rebalancer's split is not drift; a split past the cap is)."""

from queues.schedulers.slurm.values import cap_families, parse_tier_qos
from queues.services.slurm.tiercap import Share, normalize_live, plan_shares

QOS = {
    "exploratory": {"grp_tres": "gres/gpu=2", "priority": "100"},
    "exploratory.cautious": {"grp_tres": "gres/gpu=2", "priority": "100"},
    "exploratory-protected": {"grp_tres": "gres/gpu=2", "priority": "100"},
    "regular": {"grp_tres": "", "priority": "400"},
    "regular.cautious": {"grp_tres": "", "priority": "400"},
    "lab.borrow": {"grp_tres": ""},
    "lab.alpha.guarantee": {"grp_tres": ""},
}


def test_a_capped_tier_and_its_copies_form_one_family_the_tiers_own_first():
    assert cap_families(QOS) == {
        "exploratory": (2, ["exploratory", "exploratory-protected", "exploratory.cautious"])
    }
    assert parse_tier_qos("exploratory.cautious") == ("exploratory", "cautious", False)
    assert parse_tier_qos("exploratory-protected") == ("exploratory", "", True)
    assert parse_tier_qos("lab.alpha.guarantee") is None


def test_shares_give_running_gpus_then_waiting_jobs_in_priority_order_then_the_tier():
    names = ["exploratory", "exploratory-protected", "exploratory.cautious"]
    shares = {
        "exploratory": Share(limit=2, used=1),
        "exploratory-protected": Share(limit=0, used=0),
        "exploratory.cautious": Share(limit=0, used=0),
    }
    # One GPU free: the highest-priority waiting job that fits gets it (a 2-GPU job does not).
    target = plan_shares(4 - 2, names, shares, [("exploratory.cautious", 2), ("x", 1)])
    assert target == {"exploratory": 2, "exploratory-protected": 0, "exploratory.cautious": 0}
    target = plan_shares(2, names, shares, [("exploratory.cautious", 1)])
    assert target == {"exploratory": 1, "exploratory-protected": 0, "exploratory.cautious": 1}
    assert sum(target.values()) == 2
    # A cap lowered under running jobs: each keeps what it runs, nothing more.
    over = {n: Share(limit=2, used=2) for n in names}
    assert plan_shares(2, names, over, [("exploratory", 1)]) == dict.fromkeys(names, 2)


def test_a_split_within_the_cap_reads_as_the_cap_and_one_past_it_stays_a_difference():
    live = {
        "exploratory": {"grp_tres": "gres/gpu=1", "priority": "100"},
        "exploratory.cautious": {"grp_tres": "gres/gpu=1", "priority": "100"},
        "exploratory-protected": {"grp_tres": "gres/gpu=0", "priority": "100"},
    }
    normalize_live(QOS, live)
    assert {n: f["grp_tres"] for n, f in live.items()} == dict.fromkeys(live, "gres/gpu=2")
    past = {
        "exploratory": {"grp_tres": "gres/gpu=2"},
        "exploratory.cautious": {"grp_tres": "gres/gpu=2"},
        "exploratory-protected": {"grp_tres": "gres/gpu=0"},
    }
    normalize_live(QOS, past)
    assert past["exploratory.cautious"]["grp_tres"] == "gres/gpu=2"
    assert past["exploratory-protected"]["grp_tres"] == "gres/gpu=0"  # not read as the cap
