"""Writes to the governed rules. Every function here is the one way to make its change."""

from ._history import (
    REASON_MAX_LENGTH,
    TEXT_MAX_LENGTH,
    apply_fields,
    governed_delete,
    governed_save,
    require_reason,
    require_text,
)
from .changes import (
    EXISTS,
    EditSpec,
    RuleKind,
    rule_change_apply,
    rule_change_approve,
    rule_change_create,
    rule_change_propose,
    rule_change_reject,
    rule_change_rollback,
    rule_change_withdraw,
    rule_kind_register,
)
from .demo import demo_seed
from .flavors import flavor_create, flavor_update
from .grants import grant_create, grant_revoke, grants_transition, system_user
from .identity import (
    IdentityRefused,
    ProviderSaysNo,
    ProviderSilent,
    identity_disable,
    identity_recheck,
    identity_sign_in,
    refresh_token_open,
)
from .people import (
    USER_EDITABLE,
    user_access_update,
    user_create,
    user_language_set,
    user_site_role_withdraw,
)
from .pools import pool_capacity_set, pool_create, pool_overcommit_message, pool_update
from .preemption import preemption_class_create, preemption_class_update
from .projects import (
    membership_directory_apply,
    membership_remove,
    membership_set,
    project_create,
    project_update,
)
from .quotas import quota_create, quota_update
from .reviews import review_record, review_reminders_send
from .revisions import rules_revision_create
from .tiers import tier_create, tier_update
from .tokens import (
    api_token_revoke,
    api_token_touch,
    api_write_record,
    personal_token_create,
    service_account_create,
    service_account_deactivate,
    service_account_token_create,
)

__all__ = [
    "EXISTS",
    "REASON_MAX_LENGTH",
    "TEXT_MAX_LENGTH",
    "USER_EDITABLE",
    "EditSpec",
    "IdentityRefused",
    "ProviderSaysNo",
    "ProviderSilent",
    "RuleKind",
    "api_token_revoke",
    "api_token_touch",
    "api_write_record",
    "apply_fields",
    "demo_seed",
    "flavor_create",
    "flavor_update",
    "governed_delete",
    "governed_save",
    "grant_create",
    "grant_revoke",
    "grants_transition",
    "identity_disable",
    "identity_recheck",
    "identity_sign_in",
    "membership_directory_apply",
    "membership_remove",
    "membership_set",
    "personal_token_create",
    "pool_capacity_set",
    "pool_create",
    "pool_overcommit_message",
    "pool_update",
    "preemption_class_create",
    "preemption_class_update",
    "project_create",
    "project_update",
    "quota_create",
    "quota_update",
    "refresh_token_open",
    "require_reason",
    "require_text",
    "review_record",
    "review_reminders_send",
    "rule_change_apply",
    "rule_change_approve",
    "rule_change_create",
    "rule_change_propose",
    "rule_change_reject",
    "rule_change_rollback",
    "rule_change_withdraw",
    "rule_kind_register",
    "rules_revision_create",
    "service_account_create",
    "service_account_deactivate",
    "service_account_token_create",
    "system_user",
    "tier_create",
    "tier_update",
    "user_access_update",
    "user_create",
    "user_language_set",
    "user_site_role_withdraw",
]
