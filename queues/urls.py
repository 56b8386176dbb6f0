"""Routes of queues: cluster pages and the cluster API (included at the site root)."""

from django.urls import path

from queues import views
from queues.apis.clusters import ClusterCheckApi, ClusterDetailApi, ClusterListApi
from queues.apis.placement import PlacementApi
from queues.apis.replay import ChangeReplayApi
from queues.apis.sync import ClusterSyncApi, SubmitTableApi, SyncRunDetailApi
from queues.apis.workload import JobWaitApi, WorkloadEventIngestApi

urlpatterns = [
    # The CI pipelines' and collectors' hot paths first: the root URL conf tries these routes
    # before any other app's (see governance/urls.py).
    path("api/v1/placement/", PlacementApi.as_view(), name="api_placement"),
    path(
        "api/v1/workload-events/",
        WorkloadEventIngestApi.as_view(),
        name="api_workload_events",
    ),
    # A Kueue job id is "namespace/name": the id may hold slashes.
    path("api/v1/jobs/<path:job_id>/wait/", JobWaitApi.as_view(), name="api_job_wait"),
    path("metrics", views.metrics, name="metrics"),
    path("jobs/wait/", views.job_wait, name="job_wait"),
    path("projects/<slug:slug>/workload/", views.project_workload, name="project_workload"),
    path("alerts/", views.alert_list, name="alert_list"),
    path("alerts/read/", views.alerts_read, name="alerts_read"),
    path("clusters/", views.cluster_list, name="cluster_list"),
    path("clusters/new/", views.cluster_create, name="cluster_create"),
    path("clusters/<slug:name>/", views.cluster_detail, name="cluster_detail"),
    path("clusters/<slug:name>/edit/", views.cluster_edit, name="cluster_edit"),
    path("clusters/<slug:name>/delete/", views.cluster_delete, name="cluster_delete"),
    path("clusters/<slug:name>/check/", views.cluster_check, name="cluster_check"),
    path("clusters/<slug:name>/sync/", views.cluster_sync, name="cluster_sync"),
    path(
        "clusters/<slug:name>/drift/remove/",
        views.cluster_drift_remove,
        name="cluster_drift_remove",
    ),
    path("clusters/<slug:name>/runs/<int:pk>/", views.sync_run_detail, name="sync_run_detail"),
    path(
        "api/v1/changes/<int:pk>/replay/",
        ChangeReplayApi.as_view(),
        name="api_change_replay",
    ),
    path("api/v1/clusters/", ClusterListApi.as_view(), name="api_cluster_list"),
    path(
        "api/v1/clusters/<slug:name>/",
        ClusterDetailApi.as_view(),
        name="api_cluster_detail",
    ),
    path(
        "api/v1/clusters/<slug:name>/check/",
        ClusterCheckApi.as_view(),
        name="api_cluster_check",
    ),
    path(
        "api/v1/clusters/<slug:name>/sync/",
        ClusterSyncApi.as_view(),
        name="api_cluster_sync",
    ),
    path(
        "api/v1/clusters/<slug:name>/submit-table/",
        SubmitTableApi.as_view(),
        name="api_cluster_submit_table",
    ),
    path(
        "api/v1/clusters/<slug:name>/runs/<int:pk>/",
        SyncRunDetailApi.as_view(),
        name="api_sync_run_detail",
    ),
]
