"""Root URL configuration: governance's pages and read API, plus every app's ``urls``."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from governance import apis, views
from governance.toolkit.deprecation import deprecated_path
from governance.views import oidc

page_patterns = [
    path("projects/", views.project_list, name="project_list"),
    path("projects/new/", views.project_create, name="project_create"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
    path("projects/<slug:slug>/edit/", views.project_edit, name="project_edit"),
    path("projects/<slug:slug>/members/", views.membership_edit, name="membership_edit"),
    path("projects/<slug:slug>/history/", views.project_history, name="project_history"),
    path("flavors/", views.flavor_list, name="flavor_list"),
    path("flavors/new/", views.flavor_create, name="flavor_create"),
    path("flavors/<slug:slug>/", views.flavor_detail, name="flavor_detail"),
    path("flavors/<slug:slug>/edit/", views.flavor_edit, name="flavor_edit"),
    path("flavors/<slug:slug>/history/", views.flavor_history, name="flavor_history"),
    path("pools/", views.pool_list, name="pool_list"),
    path("pools/new/", views.pool_create, name="pool_create"),
    path("pools/<slug:slug>/", views.pool_detail, name="pool_detail"),
    path("pools/<slug:slug>/edit/", views.pool_edit, name="pool_edit"),
    path("pools/<slug:slug>/capacity/", views.pool_capacity_edit, name="pool_capacity_edit"),
    path("pools/<slug:slug>/history/", views.pool_history, name="pool_history"),
    path("tiers/", views.tier_list, name="tier_list"),
    path("tiers/new/", views.tier_create, name="tier_create"),
    path("tiers/<slug:slug>/", views.tier_detail, name="tier_detail"),
    path("tiers/<slug:slug>/edit/", views.tier_edit, name="tier_edit"),
    path("tiers/<slug:slug>/history/", views.tier_history, name="tier_history"),
    path("preemption-classes/", views.preemption_class_list, name="preemption_class_list"),
    path("preemption-classes/new/", views.preemption_class_create, name="preemption_class_create"),
    path(
        "preemption-classes/<slug:slug>/",
        views.preemption_class_detail,
        name="preemption_class_detail",
    ),
    path(
        "preemption-classes/<slug:slug>/edit/",
        views.preemption_class_edit,
        name="preemption_class_edit",
    ),
    path(
        "preemption-classes/<slug:slug>/history/",
        views.preemption_class_history,
        name="preemption_class_history",
    ),
    path("quotas/", views.quota_list, name="quota_list"),
    path("quotas/new/", views.quota_create, name="quota_create"),
    path("quotas/<int:pk>/", views.quota_detail, name="quota_detail"),
    path("quotas/<int:pk>/edit/", views.quota_edit, name="quota_edit"),
    path("quotas/<int:pk>/history/", views.quota_history, name="quota_history"),
    path("people/", views.person_list, name="person_list"),
    path("people/<str:username>/", views.person_detail, name="person_detail"),
    path("people/<str:username>/edit/", views.person_edit, name="person_edit"),
    path("people/<str:username>/history/", views.person_history, name="person_history"),
    path("changes/", views.change_list, name="change_list"),
    path("changes/<int:pk>/", views.change_detail, name="change_detail"),
    path("changes/<int:pk>/approve/", views.change_approve, name="change_approve"),
    path("changes/<int:pk>/reject/", views.change_reject, name="change_reject"),
    path("changes/<int:pk>/withdraw/", views.change_withdraw, name="change_withdraw"),
    path("changes/<int:pk>/apply/", views.change_apply, name="change_apply"),
    path("changes/<int:pk>/rollback/", views.change_rollback, name="change_rollback"),
    path("service-accounts/", views.service_account_list, name="service_account_list"),
    path(
        "service-accounts/<int:pk>/",
        views.service_account_detail,
        name="service_account_detail",
    ),
    path("reviews/", views.review_list, name="review_list"),
    path("reviews/tiers/<slug:slug>/", views.review_tier, name="review_tier"),
    path("reviews/quotas/<int:pk>/", views.review_quota, name="review_quota"),
]

api_patterns = [
    path("tokens/", apis.PersonalTokenListApi.as_view(), name="api_token_list"),
    path("tokens/create/", apis.PersonalTokenCreateApi.as_view(), name="api_token_create"),
    path("tokens/<int:pk>/revoke/", apis.PersonalTokenRevokeApi.as_view(), name="api_token_revoke"),
    path(
        "service-accounts/",
        apis.ServiceAccountListApi.as_view(),
        name="api_service_account_list",
    ),
    path(
        "service-accounts/create/",
        apis.ServiceAccountCreateApi.as_view(),
        name="api_service_account_create",
    ),
    path(
        "service-accounts/<int:pk>/",
        apis.ServiceAccountDetailApi.as_view(),
        name="api_service_account_detail",
    ),
    path(
        "service-accounts/<int:pk>/deactivate/",
        apis.ServiceAccountDeactivateApi.as_view(),
        name="api_service_account_deactivate",
    ),
    path(
        "service-accounts/<int:pk>/approve/",
        apis.ServiceAccountApproveApi.as_view(),
        name="api_service_account_approve",
    ),
    path(
        "service-accounts/<int:pk>/tokens/<int:token_pk>/approve/",
        apis.ServiceAccountTokenApproveApi.as_view(),
        name="api_service_account_token_approve",
    ),
    path(
        "service-accounts/<int:pk>/tokens/create/",
        apis.ServiceAccountTokenCreateApi.as_view(),
        name="api_service_account_token_create",
    ),
    path(
        "service-accounts/<int:pk>/tokens/<int:token_pk>/revoke/",
        apis.ServiceAccountTokenRevokeApi.as_view(),
        name="api_service_account_token_revoke",
    ),
    path(
        "service-accounts/<int:pk>/writes/",
        apis.ServiceAccountWritesApi.as_view(),
        name="api_service_account_writes",
    ),
    path("projects/", apis.ProjectListApi.as_view(), name="api_project_list"),
    path("projects/<slug:slug>/", apis.ProjectDetailApi.as_view(), name="api_project_detail"),
    path(
        "projects/<slug:slug>/members/",
        apis.ProjectMemberListApi.as_view(),
        name="api_project_member_list",
    ),
    path(
        "projects/<slug:slug>/members/<str:username>/",
        apis.ProjectMemberDetailApi.as_view(),
        name="api_project_member_detail",
    ),
    path(
        "projects/<slug:slug>/effective/",
        apis.ProjectEffectiveRulesApi.as_view(),
        name="api_project_effective_rules",
    ),
    path("flavors/", apis.FlavorListApi.as_view(), name="api_flavor_list"),
    path("flavors/<slug:slug>/", apis.FlavorDetailApi.as_view(), name="api_flavor_detail"),
    path("pools/", apis.PoolListApi.as_view(), name="api_pool_list"),
    path("pools/<slug:slug>/", apis.PoolDetailApi.as_view(), name="api_pool_detail"),
    path("tiers/", apis.TierListApi.as_view(), name="api_tier_list"),
    path("tiers/<slug:slug>/", apis.TierDetailApi.as_view(), name="api_tier_detail"),
    path(
        "preemption-classes/",
        apis.PreemptionClassListApi.as_view(),
        name="api_preemption_class_list",
    ),
    path(
        "preemption-classes/<slug:slug>/",
        apis.PreemptionClassDetailApi.as_view(),
        name="api_preemption_class_detail",
    ),
    path("quotas/", apis.QuotaListApi.as_view(), name="api_quota_list"),
    path("lookup/<slug:kind>/", apis.LookupApi.as_view(), name="api_lookup"),
    path("quotas/<int:pk>/", apis.QuotaDetailApi.as_view(), name="api_quota_detail"),
    path(
        "projects/<slug:slug>/history/",
        apis.ProjectHistoryApi.as_view(),
        name="api_project_history",
    ),
    path(
        "flavors/<slug:slug>/history/", apis.FlavorHistoryApi.as_view(), name="api_flavor_history"
    ),
    path("pools/<slug:slug>/history/", apis.PoolHistoryApi.as_view(), name="api_pool_history"),
    path("tiers/<slug:slug>/history/", apis.TierHistoryApi.as_view(), name="api_tier_history"),
    path(
        "preemption-classes/<slug:slug>/history/",
        apis.PreemptionClassHistoryApi.as_view(),
        name="api_preemption_class_history",
    ),
    path("quotas/<int:pk>/history/", apis.QuotaHistoryApi.as_view(), name="api_quota_history"),
    # Rule review cycles (tiers and quotas due for review). Their old paths under reviews/
    # answer the same until the sunset, with the deprecation headers (toolkit.deprecation).
    path("review-cycles/", apis.ReviewDueListApi.as_view(), name="api_review_list"),
    path("review-cycles/tiers/<slug:slug>/", apis.TierReviewApi.as_view(), name="api_review_tier"),
    path(
        "review-cycles/quotas/<int:pk>/",
        apis.QuotaReviewApi.as_view(),
        name="api_review_quota",
    ),
    path(
        "reviews/",
        deprecated_path(
            apis.ReviewDueListApi,
            successor="api_review_list",
            operation_ids={"get": "reviews_due_list_deprecated"},
        ).as_view(),
        name="api_review_list_deprecated",
    ),
    path(
        "reviews/tiers/<slug:slug>/",
        deprecated_path(
            apis.TierReviewApi,
            successor="api_review_tier",
            operation_ids={"post": "reviews_tier_create_deprecated"},
        ).as_view(),
        name="api_review_tier_deprecated",
    ),
    path(
        "reviews/quotas/<int:pk>/",
        deprecated_path(
            apis.QuotaReviewApi,
            successor="api_review_quota",
            operation_ids={"post": "reviews_quota_create_deprecated"},
        ).as_view(),
        name="api_review_quota_deprecated",
    ),
    path("changes/", apis.RuleChangeListApi.as_view(), name="api_change_list"),
    path("changes/propose/", apis.RuleChangeProposeApi.as_view(), name="api_change_propose"),
    path("changes/<int:pk>/", apis.RuleChangeDetailApi.as_view(), name="api_change_detail"),
    path(
        "changes/<int:pk>/approve/",
        apis.RuleChangeApproveApi.as_view(),
        name="api_change_approve",
    ),
    path("changes/<int:pk>/reject/", apis.RuleChangeRejectApi.as_view(), name="api_change_reject"),
    path(
        "changes/<int:pk>/withdraw/",
        apis.RuleChangeWithdrawApi.as_view(),
        name="api_change_withdraw",
    ),
    path("changes/<int:pk>/apply/", apis.RuleChangeApplyApi.as_view(), name="api_change_apply"),
    path(
        "changes/<int:pk>/rollback/",
        apis.RuleChangeRollbackApi.as_view(),
        name="api_change_rollback",
    ),
]

# An API address that matches no operation answers in the API's error format.
handler404 = "governance.views._common.page_not_found"

urlpatterns = [
    # First: placement and the workload events, the API's hot paths, resolve without walking
    # the pages' patterns or another app's API (whose "api/v1/" prefix they would enter).
    path("", include("queues.urls")),
    path("", include("reports.urls")),
    path("", include(page_patterns)),
    path("", include("approvals.urls")),
    path("api/v1/", include(api_patterns)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    # Swagger UI from the installed sidecar package; its script is a file of its own (no
    # inline code), served at /api/docs/?script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    path("accounts/login/", oidc.sign_in_page, name="login"),
    path("accounts/logout/", oidc.sign_out, name="logout"),
    # Sign-in through the organisation's identity provider (OpenID Connect).
    path("accounts/oidc/start/", oidc.ProviderSignInView.as_view(), name="oidc_start"),
    path("accounts/oidc/callback/", oidc.ProviderCallbackView.as_view(), name="oidc_callback"),
    path("accounts/token/", views.api_token, name="api_token"),
    # Passwords are set by their owner: change it signed in, or from a reset link by mail.
    # Arbiter's: rate-limited, also for a first password; setting one revokes the tokens.
    path("accounts/password_reset/", views.PasswordLinkView.as_view(), name="password_reset"),
    path(
        "accounts/reset/<uidb64>/<token>/",
        views.NewPasswordView.as_view(),
        name="password_reset_confirm",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    # The language switch: Django's, and a signed-in person's mails follow it.
    path("i18n/setlang/", views.language_switch, name="set_language"),
    path("admin/", admin.site.urls),
]
