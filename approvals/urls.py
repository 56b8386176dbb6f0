"""Routes of approvals: pages and API (included at the site root)."""

from django.urls import include, path

from approvals import apis, views

page_patterns = [
    path("requests/", views.request_list, name="request_list"),
    path("requests/new/", views.request_create, name="request_create"),
    path("requests/<int:pk>/", views.request_detail, name="request_detail"),
    path("requests/<int:pk>/submit/", views.request_submit, name="request_submit"),
    path("requests/<int:pk>/withdraw/", views.request_withdraw, name="request_withdraw"),
    path("requests/<int:pk>/approve/", views.request_approve, name="request_approve"),
    path("requests/<int:pk>/reject/", views.request_reject, name="request_reject"),
    path("requests/<int:pk>/revoke/", views.request_revoke, name="request_revoke"),
    path("inbox/", views.inbox, name="inbox"),
    path("notifications/", views.notification_list, name="notification_list"),
    path("projects/<slug:slug>/grants/", views.project_grants, name="project_grants"),
    path("approval-policies/", views.policy_list, name="approval_policy_list"),
    path("approval-policies/new/", views.policy_create, name="approval_policy_create"),
    path("approval-policies/<int:pk>/edit/", views.policy_edit, name="approval_policy_edit"),
    path(
        "approval-policies/<int:pk>/history/",
        views.policy_history,
        name="approval_policy_history",
    ),
]

api_patterns = [
    path("requests/", apis.RequestListApi.as_view(), name="api_request_list"),
    path("requests/create/", apis.RequestCreateApi.as_view(), name="api_request_create"),
    path("requests/<int:pk>/", apis.RequestDetailApi.as_view(), name="api_request_detail"),
    path("requests/<int:pk>/submit/", apis.RequestSubmitApi.as_view(), name="api_request_submit"),
    path(
        "requests/<int:pk>/withdraw/",
        apis.RequestWithdrawApi.as_view(),
        name="api_request_withdraw",
    ),
    path(
        "requests/<int:pk>/approve/",
        apis.RequestApproveApi.as_view(),
        name="api_request_approve",
    ),
    path("requests/<int:pk>/reject/", apis.RequestRejectApi.as_view(), name="api_request_reject"),
    path("requests/<int:pk>/revoke/", apis.RequestRevokeApi.as_view(), name="api_request_revoke"),
    path("inbox/", apis.InboxApi.as_view(), name="api_inbox"),
    path("grants/", apis.GrantListApi.as_view(), name="api_grant_list"),
    path("grants/<int:pk>/", apis.GrantDetailApi.as_view(), name="api_grant_detail"),
    path(
        "projects/<slug:slug>/grants/",
        apis.ProjectGrantListApi.as_view(),
        name="api_project_grant_list",
    ),
    path(
        "notifications/counts/",
        apis.NotificationCountsApi.as_view(),
        name="api_notification_counts",
    ),
]

urlpatterns = [
    *page_patterns,
    path("api/v1/", include(api_patterns)),
]
