"""Reads of a rule change's replays: the latest run (the page and the API read it here)."""

from __future__ import annotations

from governance.models import RuleChange
from queues.models import ChangeReplay


def change_replay_latest(*, change: RuleChange) -> ChangeReplay | None:
    """The change's newest replay run, or None when it was never replayed."""
    return ChangeReplay.objects.filter(change=change).order_by("-pk").first()
