"""Writes of approvals. Every function here is the one way to make its change."""

from .demo import demo_approvals_seed
from .idempotency import (
    IdempotencyKeyReused,
    IdempotentResponse,
    idempotency_key_clean,
    idempotency_keys_purge,
    idempotent_call,
)
from .notifications import notifications_mark_read
from .policies import (
    FOUR_EYES_ON_REQUESTS,
    policy_create,
    policy_four_eyes_check,
    policy_rule_kind,
    policy_update,
)
from .requests import (
    request_approve,
    request_create,
    request_reject,
    request_revoke,
    request_submit,
    request_withdraw,
)
from .sync import requests_sync

__all__ = [
    "FOUR_EYES_ON_REQUESTS",
    "IdempotencyKeyReused",
    "IdempotentResponse",
    "demo_approvals_seed",
    "idempotency_key_clean",
    "idempotency_keys_purge",
    "idempotent_call",
    "notifications_mark_read",
    "policy_create",
    "policy_four_eyes_check",
    "policy_rule_kind",
    "policy_update",
    "request_approve",
    "request_create",
    "request_reject",
    "request_revoke",
    "request_submit",
    "request_withdraw",
    "requests_sync",
]
