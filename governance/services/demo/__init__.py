"""Demo data: a realistic organisation sharing two GPU pools.

Every rule goes through the services, as user ``ops`` with the reason "Demo data", so every
row has its history (people are plain users: they have none), dated 90 days ago. Then a
timeline of rule changes over the weeks since, each by its own people on its own day: three
applied (one of them rolled back) and one waiting for a second operator; a tier and a quota are
due for review. Loading is idempotent: what already exists (by username,
slug, project, pool and flavor, or change title) is left as it is, so a second run changes
nothing.
"""

from .changes import DEMO_CHANGES
from .data import (
    DEMO_EMAIL_DOMAIN,
    DEMO_PASSWORD,
    DEMO_REASON,
    FLAVORS,
    PEOPLE,
    POOLS,
    PREEMPTION_CLASSES,
    PROJECTS,
    QUOTAS,
    TIERS,
    DemoQuota,
)
from .lock import DEMO_LOCK_KEY, demo_lock
from .seed import demo_seed

__all__ = [
    "DEMO_CHANGES",
    "DEMO_EMAIL_DOMAIN",
    "DEMO_LOCK_KEY",
    "DEMO_PASSWORD",
    "DEMO_REASON",
    "FLAVORS",
    "PEOPLE",
    "POOLS",
    "PREEMPTION_CLASSES",
    "PROJECTS",
    "QUOTAS",
    "TIERS",
    "DemoQuota",
    "demo_lock",
    "demo_seed",
]
