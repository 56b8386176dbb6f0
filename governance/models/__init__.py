"""The governed rules of the GPU pool.

Every governed model keeps its history (django-simple-history); services set the user and
the reason of each history row. Invariants that fit one row are database constraints; the
ones that span rows (capacity vs guarantees, aging caps, pool hierarchy) live in the
services, under ``select_for_update``.
"""

from .changes import (
    OPEN_STATUSES,
    SCHEDULING_KINDS,
    ChangeAction,
    ChangeStatus,
    ConflictChoice,
    EditKind,
    Review,
    ReviewOutcome,
    RuleChange,
    RuleEdit,
    applying_change,
)
from .grants import (
    KIND_SPECIFIC_TERMS,
    KIND_TERMS,
    TERM_FIELDS,
    TIER_KINDS,
    Grant,
    GrantKind,
    GrantState,
    GrantTerms,
    RevisionTrigger,
    RulesRevision,
    Terms,
    grant_in_force,
    grant_in_force_q,
)
from .identities import ProviderIdentity
from .projects import Membership, Project, ProjectRole
from .quotas import Quota
from .resources import LABEL_KEY_RE, LABEL_VALUE_RE, GpuFlavor, Pool, PoolCapacity, TaintEffect
from .tiers import (
    GrantEnd,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    ReminderKind,
    ReviewReminder,
)
from .tokens import ApiToken, ApiTokenUsage, ApiWrite, ServiceAccount, TokenScope
from .triggers import Trigger, TriggerComparison, TriggerMetric, TriggerScope, parse_trigger
from .users import SiteRole, User

__all__ = [
    "KIND_SPECIFIC_TERMS",
    "KIND_TERMS",
    "LABEL_KEY_RE",
    "LABEL_VALUE_RE",
    "OPEN_STATUSES",
    "SCHEDULING_KINDS",
    "TERM_FIELDS",
    "TIER_KINDS",
    "ApiToken",
    "ApiTokenUsage",
    "ApiWrite",
    "ChangeAction",
    "ChangeStatus",
    "ConflictChoice",
    "EditKind",
    "GpuFlavor",
    "Grant",
    "GrantEnd",
    "GrantKind",
    "GrantState",
    "GrantTerms",
    "Membership",
    "Pool",
    "PoolCapacity",
    "PreemptionClass",
    "PreemptionKind",
    "PriorityTier",
    "Project",
    "ProjectRole",
    "ProviderIdentity",
    "Quota",
    "ReminderKind",
    "Review",
    "ReviewOutcome",
    "ReviewReminder",
    "RevisionTrigger",
    "RuleChange",
    "RuleEdit",
    "RulesRevision",
    "ServiceAccount",
    "SiteRole",
    "TaintEffect",
    "Terms",
    "TokenScope",
    "Trigger",
    "TriggerComparison",
    "TriggerMetric",
    "TriggerScope",
    "User",
    "applying_change",
    "grant_in_force",
    "grant_in_force_q",
    "parse_trigger",
]
