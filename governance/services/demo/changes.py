"""The demo's timeline of rule changes, spread over the last two months with their authors."""

from datetime import datetime, timedelta
from typing import Any

from governance.models import GpuFlavor, Pool, PriorityTier, Quota, RuleChange, User

from ..changes import (
    EditSpec,
    rule_change_apply,
    rule_change_approve,
    rule_change_create,
    rule_change_rollback,
)
from .clock import clock_at


def changes_ensure(
    *,
    users: dict[str, User],
    tiers: dict[str, PriorityTier],
    pools: dict[str, Pool],
    flavors: dict[str, GpuFlavor],
    now: datetime,
) -> int:
    """A timeline of rule changes: three applied (one of them rolled back) and one waiting for
    a second operator, each proposed, approved and applied on its own day by its own people.
    Every observation window has ended by ``now``, so a new change is not warned about them.
    Skipped when the demo changes exist already."""
    if RuleChange.objects.filter(title__in=[spec["title"] for spec in DEMO_CHANGES]).exists():
        return 0
    speech_a100 = Quota.objects.get(
        project__slug="speech", pool__slug="training", flavor__slug="a100-80g"
    )
    imaging_a100 = Quota.objects.get(
        project__slug="medical-imaging", pool__slug="training", flavor__slug="a100-80g"
    )
    targets = {
        "speech-borrow": [EditSpec(target=speech_a100, field="borrow_limit", value=12)],
        "exploratory-aging": [
            EditSpec(target=tiers["exploratory"], field="aging_after_minutes", value=180)
        ],
        "inference-l40s": [
            EditSpec(target=pools["inference"], field="capacity", key=flavors["l40s-48g"], value=56)
        ],
        "imaging-guarantee": [EditSpec(target=imaging_a100, field="guarantee", value=16)],
    }

    def day(days_ago: float) -> datetime:
        return now - timedelta(days=days_ago)

    made: dict[str, RuleChange] = {}
    for spec in DEMO_CHANGES:
        proposed = day(spec["days_ago"])
        with clock_at(proposed):
            change = rule_change_create(
                user=users[spec["author"]],
                reason=spec["reason"],
                edits=targets[spec["key"]],
                title=spec["title"],
                ticket=spec["ticket"],
                observation_days=spec["observation_days"],
                rollback_condition=spec["rollback_condition"],
                rollback_trigger=spec.get("rollback_trigger", ""),
                now=proposed,
            )
        made[spec["key"]] = change
        if spec["applied_by"]:
            approved = proposed + timedelta(hours=5)
            with clock_at(approved):
                rule_change_approve(change=change, user=users[spec["approver"]], now=approved)
            applied = proposed + timedelta(days=1)
            with clock_at(applied):
                rule_change_apply(change=change, user=users[spec["applied_by"]], now=applied)
    rolled_back = day(ROLLBACK["days_ago"])
    with clock_at(rolled_back):
        rollback = rule_change_rollback(
            change=made[ROLLBACK["of"]],
            user=users[ROLLBACK["author"]],
            reason=ROLLBACK["reason"],
            now=rolled_back,
        )
    with clock_at(rolled_back + timedelta(hours=2)):
        rule_change_approve(
            change=rollback,
            user=users[ROLLBACK["approver"]],
            now=rolled_back + timedelta(hours=2),
        )
    with clock_at(rolled_back + timedelta(hours=3)):
        rule_change_apply(
            change=rollback,
            user=users[ROLLBACK["applied_by"]],
            now=rolled_back + timedelta(hours=3),
        )
    return len(DEMO_CHANGES) + 1


# Days before the demo is loaded when each change was proposed; approved five hours later and
# applied the next day. Authors: ops, or a tier's owner for their own tier.
DEMO_CHANGES: list[dict[str, Any]] = [
    {
        "key": "speech-borrow",
        "title": "Speech may borrow 12 A100 in training (was 8)",
        "reason": "Speech's new acoustic model trains in bursts; idle A100 in training covers it.",
        "ticket": "OPS-1201",
        "observation_days": 14,
        "rollback_condition": "Other projects' A100 waits in training exceed 30 minutes (p90).",
        "days_ago": 62,
        "author": "ops",
        "approver": "james.wilson",
        "applied_by": "ops",
    },
    {
        "key": "exploratory-aging",
        "title": "Exploratory work ages after 3 h (was 4 h)",
        "reason": "Sandbox users wait all afternoon for short experiments.",
        "ticket": "OPS-1188",
        "observation_days": 7,
        "rollback_condition": "Regular work waits longer because of aged exploratory jobs.",
        "days_ago": 47,
        "author": "anna.kowalski",
        "approver": "james.wilson",
        "applied_by": "james.wilson",
    },
    {
        "key": "inference-l40s",
        "title": "Eight new L40S nodes in the inference cluster",
        "reason": "Rack 14 with 8 L40S was commissioned for serving.",
        "ticket": "DC-311",
        "observation_days": 7,
        "rollback_condition": "The nodes fail burn-in or are moved to another cluster.",
        "days_ago": 21,
        "author": "james.wilson",
        "approver": "ops",
        "applied_by": "james.wilson",
    },
    # Waiting for a second operator: a guarantee that bites. Medical imaging asks for more
    # than its 8 A100s and its cautious jobs wait for borrowed GPUs; guaranteed 16, its waits
    # fall to minutes and it stops borrowing, while the other training work waits a little
    # longer — what its what-if replay shows (tests/queues/test_demo_change_replay.py).
    {
        "key": "imaging-guarantee",
        "title": "Medical imaging is guaranteed 16 A100 in training (was 8)",
        "reason": "The partner hospitals' segmentation models are retrained every week: "
        "Medical imaging needs more than its 8 A100s and waits hours for borrowed ones.",
        "ticket": "OPS-1220",
        "observation_days": 14,
        "rollback_condition": "Other projects' A100 waits in training (p90) rise by more than "
        "an hour.",
        # The same, as its replay evaluates it: the training pool's p90 wait.
        "rollback_trigger": "p90 wait pool training rises by 60 min",
        "days_ago": 2,
        "author": "ops",
        "approver": "ops2",
        "applied_by": None,
    },
]

ROLLBACK: dict[str, Any] = {
    "of": "exploratory-aging",
    "reason": "Exploration jobs reached the regular tier within hours and delayed regular "
    "work: back to 4 hours.",
    "days_ago": 38,
    "author": "ops",
    "approver": "anna.kowalski",
    "applied_by": "james.wilson",
}
