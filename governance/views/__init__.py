"""Pages of the governed rules: lists, details and history for everyone signed in; create and
edit for ops. Views parse input, call a selector or a service, and render."""

from governance.toolkit.paging import ListPage, paginate

from .accounts import NewPasswordView, PasswordLinkView
from .changes import (
    change_apply,
    change_approve,
    change_detail,
    change_list,
    change_reject,
    change_rollback,
    change_withdraw,
    review_list,
    review_quota,
    review_tier,
)
from .flavors import flavor_create, flavor_detail, flavor_edit, flavor_history, flavor_list
from .people import person_detail, person_edit, person_history, person_list
from .pools import (
    pool_capacity_edit,
    pool_create,
    pool_detail,
    pool_edit,
    pool_history,
    pool_list,
)
from .preemption import (
    preemption_class_create,
    preemption_class_detail,
    preemption_class_edit,
    preemption_class_history,
    preemption_class_list,
)
from .projects import (
    membership_edit,
    project_create,
    project_detail,
    project_edit,
    project_history,
    project_list,
)
from .quotas import quota_create, quota_detail, quota_edit, quota_history, quota_list
from .tiers import tier_create, tier_detail, tier_edit, tier_history, tier_list
from .tokens import api_token, language_switch, service_account_detail, service_account_list

__all__ = [
    "ListPage",
    "NewPasswordView",
    "PasswordLinkView",
    "api_token",
    "change_apply",
    "change_approve",
    "change_detail",
    "change_list",
    "change_reject",
    "change_rollback",
    "change_withdraw",
    "client_address",
    "flavor_create",
    "flavor_detail",
    "flavor_edit",
    "flavor_history",
    "flavor_list",
    "language_switch",
    "membership_edit",
    "paginate",
    "person_detail",
    "person_edit",
    "person_history",
    "person_list",
    "pool_capacity_edit",
    "pool_create",
    "pool_detail",
    "pool_edit",
    "pool_history",
    "pool_list",
    "preemption_class_create",
    "preemption_class_detail",
    "preemption_class_edit",
    "preemption_class_history",
    "preemption_class_list",
    "project_create",
    "project_detail",
    "project_edit",
    "project_history",
    "project_list",
    "quota_create",
    "quota_detail",
    "quota_edit",
    "quota_history",
    "quota_list",
    "review_list",
    "review_quota",
    "review_tier",
    "service_account_detail",
    "service_account_list",
    "tier_create",
    "tier_detail",
    "tier_edit",
    "tier_history",
    "tier_list",
]
