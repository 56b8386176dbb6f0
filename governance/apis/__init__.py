"""The read API of the governed rules, under ``/api/v1/``.

One ``APIView`` per operation, one module per kind of rule. A list parses its query
parameters with a nested ``FilterSerializer`` (a bad value is a 400 that names the parameter),
passes them, with ``sort``, to the list selector that its HTML page calls with the same
parameters (same rows, same order), and pages the result with ``limit`` and ``offset``; its
query count does not grow with the rows. ``lookup/<kind>/`` feeds the search-as-you-type
filter fields of the pages. A detail reads through the scoped getter (a missing object
is a 404). Both render with a nested ``OutputSerializer``: related objects by slug, users by
username. The shared pieces (errors, paging, filters, ETags) are in ``governance.toolkit.api``.
"""

from .changes import (
    RuleChangeApplyApi,
    RuleChangeApproveApi,
    RuleChangeDetailApi,
    RuleChangeListApi,
    RuleChangeProposeApi,
    RuleChangeRejectApi,
    RuleChangeRollbackApi,
    RuleChangeWithdrawApi,
)
from .effective import ProjectEffectiveRulesApi
from .flavors import FlavorDetailApi, FlavorListApi
from .history import (
    FlavorHistoryApi,
    PoolHistoryApi,
    PreemptionClassHistoryApi,
    ProjectHistoryApi,
    QuotaHistoryApi,
    TierHistoryApi,
)
from .lookup import LookupApi
from .pools import PoolDetailApi, PoolListApi
from .preemption import PreemptionClassDetailApi, PreemptionClassListApi
from .projects import (
    ProjectDetailApi,
    ProjectListApi,
    ProjectMemberDetailApi,
    ProjectMemberListApi,
)
from .quotas import QuotaDetailApi, QuotaListApi
from .reviews import QuotaReviewApi, ReviewDueListApi, TierReviewApi
from .tiers import TierDetailApi, TierListApi
from .tokens import (
    PersonalTokenCreateApi,
    PersonalTokenListApi,
    PersonalTokenRevokeApi,
    ServiceAccountApproveApi,
    ServiceAccountCreateApi,
    ServiceAccountDeactivateApi,
    ServiceAccountDetailApi,
    ServiceAccountListApi,
    ServiceAccountTokenApproveApi,
    ServiceAccountTokenCreateApi,
    ServiceAccountTokenRevokeApi,
    ServiceAccountWritesApi,
)

__all__ = [
    "FlavorDetailApi",
    "FlavorHistoryApi",
    "FlavorListApi",
    "LookupApi",
    "PersonalTokenCreateApi",
    "PersonalTokenListApi",
    "PersonalTokenRevokeApi",
    "PoolDetailApi",
    "PoolHistoryApi",
    "PoolListApi",
    "PreemptionClassDetailApi",
    "PreemptionClassHistoryApi",
    "PreemptionClassListApi",
    "ProjectDetailApi",
    "ProjectEffectiveRulesApi",
    "ProjectHistoryApi",
    "ProjectListApi",
    "ProjectMemberDetailApi",
    "ProjectMemberListApi",
    "QuotaDetailApi",
    "QuotaHistoryApi",
    "QuotaListApi",
    "QuotaReviewApi",
    "ReviewDueListApi",
    "RuleChangeApplyApi",
    "RuleChangeApproveApi",
    "RuleChangeDetailApi",
    "RuleChangeListApi",
    "RuleChangeProposeApi",
    "RuleChangeRejectApi",
    "RuleChangeRollbackApi",
    "RuleChangeWithdrawApi",
    "ServiceAccountApproveApi",
    "ServiceAccountCreateApi",
    "ServiceAccountDeactivateApi",
    "ServiceAccountDetailApi",
    "ServiceAccountListApi",
    "ServiceAccountTokenApproveApi",
    "ServiceAccountTokenCreateApi",
    "ServiceAccountTokenRevokeApi",
    "ServiceAccountWritesApi",
    "TierDetailApi",
    "TierHistoryApi",
    "TierListApi",
    "TierReviewApi",
    "exception_handler",
    "get_paginated_response",
]
