"""Reads of requests, policies, grants and notifications, shaped for pages and the API.

Rules (tiers, quotas, policies, grants in force) are public inside the organisation, but a
request's justification, business impact and evidence belong to its project: a request is
read by the project's members, the requester, its approvers (the tier's business owner and
whoever decided it) and ops, and by nobody else (``requests_readable``: ``request_get`` and
the list selectors apply it, for pages and API alike). Who may *act* on a request is
``request_action_blocker``, which the pages ask to show the buttons and the services ask
before they write.

The package re-exports every public name it held as one module.
"""

from .evidence import project_evidence, workload_evidence
from .grants import (
    GRANT_SORTS,
    INBOX_CHANGES,
    ProjectGrant,
    grant_get,
    grant_list,
    notification_list,
    project_grants,
    rule_changes_to_decide,
    unread_count,
)
from .policies import (
    PolicyLimit,
    exceptions_this_month,
    policy_for,
    policy_get,
    policy_limits,
    policy_list,
    policy_tier,
)
from .requests import (
    EVIDENCE_USAGE_DAYS,
    EVIDENCE_WINDOW_DAYS,
    EXPIRY_WARNING,
    REQUEST_SORTS,
    approval_blocker,
    approvers_label,
    extension_initial,
    inbox,
    inbox_count,
    projects_user_may_file_for,
    request_action_blocker,
    request_action_blockers,
    request_get,
    request_list,
    request_list_for,
    requests_readable,
    user_may_file_for,
    user_may_withdraw,
)

__all__ = [
    "EVIDENCE_USAGE_DAYS",
    "EVIDENCE_WINDOW_DAYS",
    "EXPIRY_WARNING",
    "GRANT_SORTS",
    "INBOX_CHANGES",
    "REQUEST_SORTS",
    "PolicyLimit",
    "ProjectGrant",
    "approval_blocker",
    "approvers_label",
    "exceptions_this_month",
    "extension_initial",
    "grant_get",
    "grant_list",
    "inbox",
    "inbox_count",
    "notification_list",
    "policy_for",
    "policy_get",
    "policy_limits",
    "policy_list",
    "policy_tier",
    "project_evidence",
    "project_grants",
    "projects_user_may_file_for",
    "request_action_blocker",
    "request_action_blockers",
    "request_get",
    "request_list",
    "request_list_for",
    "requests_readable",
    "rule_changes_to_decide",
    "unread_count",
    "user_may_file_for",
    "user_may_withdraw",
    "workload_evidence",
]
