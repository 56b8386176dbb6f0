"""The demo's short timeline of rule changes."""

from typing import Any

from governance.models import GpuFlavor, Pool, PriorityTier, Quota, RuleChange, User

from ..changes import (
    EditSpec,
    rule_change_apply,
    rule_change_approve,
    rule_change_create,
    rule_change_rollback,
)


def changes_ensure(
    *,
    users: dict[str, User],
    tiers: dict[str, PriorityTier],
    pools: dict[str, Pool],
    flavors: dict[str, GpuFlavor],
) -> int:
    """A short timeline of rule changes: three applied (one of them rolled back) and one
    waiting for its tier owner. Skipped when the demo changes exist already."""
    if RuleChange.objects.filter(title__in=[spec["title"] for spec in DEMO_CHANGES]).exists():
        return 0
    ops, james = users["ops"], users["james.wilson"]
    speech_a100 = Quota.objects.get(
        project__slug="speech", pool__slug="training", flavor__slug="a100-80g"
    )
    targets = {
        "speech-borrow": [EditSpec(target=speech_a100, field="borrow_limit", value=12)],
        "exploratory-aging": [
            EditSpec(target=tiers["exploratory"], field="aging_after_minutes", value=180)
        ],
        "inference-l40s": [
            EditSpec(target=pools["inference"], field="capacity", key=flavors["l40s-48g"], value=56)
        ],
        "production-cap": [EditSpec(target=tiers["production"], field="max_gpus_total", value=72)],
    }
    count = 0
    made: dict[str, RuleChange] = {}
    for spec in DEMO_CHANGES:
        change = rule_change_create(
            user=ops,
            reason=spec["reason"],
            edits=targets[spec["key"]],
            title=spec["title"],
            ticket=spec["ticket"],
            observation_days=spec["observation_days"],
            rollback_condition=spec["rollback_condition"],
        )
        count += 1
        made[spec["key"]] = change
        if spec["apply"]:
            rule_change_approve(change=change, user=users[spec["approver"]])
            rule_change_apply(change=change, user=ops)
    rollback = rule_change_rollback(
        change=made["exploratory-aging"],
        user=ops,
        reason="Exploration jobs reached the regular tier within hours and delayed regular "
        "work: back to 4 hours.",
    )
    rule_change_approve(change=rollback, user=users["anna.kowalski"])
    rule_change_apply(change=rollback, user=james)
    return count + 1


DEMO_CHANGES: list[dict[str, Any]] = [
    {
        "key": "speech-borrow",
        "title": "Speech may borrow 12 A100 in training (was 8)",
        "reason": "Speech's new acoustic model trains in bursts; idle A100 in training covers it.",
        "ticket": "OPS-1201",
        "observation_days": 14,
        "rollback_condition": "Other projects' A100 waits in training exceed 30 minutes (p90).",
        "approver": "james.wilson",
        "apply": True,
    },
    {
        "key": "exploratory-aging",
        "title": "Exploratory work ages after 3 h (was 4 h)",
        "reason": "Sandbox users wait all afternoon for short experiments.",
        "ticket": "OPS-1188",
        "observation_days": 7,
        "rollback_condition": "Regular work waits longer because of aged exploratory jobs.",
        "approver": "anna.kowalski",
        "apply": True,
    },
    {
        "key": "inference-l40s",
        "title": "Eight new L40S nodes in the inference cluster",
        "reason": "Rack 14 with 8 L40S was commissioned for serving.",
        "ticket": "DC-311",
        "observation_days": 7,
        "rollback_condition": "The nodes fail burn-in or are moved to another cluster.",
        "approver": "james.wilson",
        "apply": True,
    },
    {
        "key": "production-cap",
        "title": "Production tier may use 72 GPUs (was 64)",
        "reason": "The fraud service doubles its replicas for the holiday season.",
        "ticket": "OPS-1220",
        "observation_days": 14,
        "rollback_condition": "After the holiday season, or if batch waits double.",
        "approver": "wei.zhang",
        "apply": False,
    },
]
