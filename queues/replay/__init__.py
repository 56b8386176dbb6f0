"""What-if replay: a discrete-event simulation of the pools under Arbiter's rules.

``engine`` and ``rules`` are pure Python (no Django) and document what is modelled;
``workload`` generates workloads with documented parameters.
"""

from .engine import REASON_CATEGORY, Replay, Result, replay
from .rules import ClassRule, Job, QuotaRule, Rules, TierRule

__all__ = [
    "REASON_CATEGORY",
    "ClassRule",
    "Job",
    "QuotaRule",
    "Replay",
    "Result",
    "Rules",
    "TierRule",
    "replay",
]
