"""Drift on Slurm: what changed since the last sync, and what someone made by hand."""

from __future__ import annotations

from django.utils.translation import gettext as _

from queues.schedulers.backends import DriftItem, LiveState, State, drift_items
from queues.schedulers.slurm.values import (
    ACCOUNT,
    ASSOCIATION,
    KINDS,
    QOS,
    ROOT_ACCOUNT,
    values_equal,
)


def slurm_drift(*, applied: State, live: LiveState) -> list[DriftItem]:
    missing, present = str(_("(missing)")), str(_("(present)"))
    hand_made = str(_("made by hand; kept (remove it explicitly, or adopt it by a rule change)"))
    items = [
        DriftItem(i.kind, i.name, i.field, i.applied, i.live, hand_made)
        if i.applied == missing
        else i
        for i in drift_items(kinds=KINDS, applied=applied, live=live, equal=values_equal)
    ]
    flagged = {(item.kind, item.name) for item in items}
    ours = {kind: set(applied.get(kind, {})) for kind in KINDS}
    objects = live.objects

    def flag(kind: str, name: str, note: str) -> None:
        if (kind, name) not in flagged and name not in ours[kind]:
            flagged.add((kind, name))
            items.append(DriftItem(kind, name, "", missing, present, note))

    # An account someone added under one of Arbiter's accounts.
    for name, fields in sorted(objects.get(ACCOUNT, {}).items()):
        if fields.get("parent") in ours[ACCOUNT]:
            flag(ACCOUNT, name, hand_made)
    # A QOS that Arbiter's associations or Preempt lists name, or in Arbiter's name space.
    named: set[str] = set()
    for name in ours[ASSOCIATION]:
        live_fields = objects.get(ASSOCIATION, {}).get(name, {})
        named.update(v for v in live_fields.get("qos", "").split(",") if v)
        if live_fields.get("default_qos"):
            named.add(live_fields["default_qos"])
    for name in ours[QOS]:
        named.update(
            v for v in objects.get(QOS, {}).get(name, {}).get("preempt", "").split(",") if v
        )
    prefixes = tuple(
        f"{name}."
        for name, fields in applied.get(ACCOUNT, {}).items()
        if fields.get("parent") == ROOT_ACCOUNT
    )
    for name in sorted(objects.get(QOS, {})):
        if name in named or (prefixes and name.startswith(prefixes)):
            flag(QOS, name, hand_made)
    return items
