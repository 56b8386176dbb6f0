from django.urls import path

from governance.toolkit.deprecation import deprecated_path
from reports import apis, views

urlpatterns = [
    path("", views.home, name="home"),
    path("home/pool-usage.json", views.home_pool_usage, name="home_pool_usage"),
    path("vendor/plotly-<str:version>.min.js", views.plotly_js, name="plotly_js"),
    path("changes/<int:pk>/replay/", views.change_replay, name="change_replay"),
    path(
        "api/v1/changes/<int:pk>/replay/figures/",
        apis.ChangeReplayFiguresApi.as_view(),
        name="api_change_replay_figures",
    ),
    path("monthly-reviews/", views.report_list, name="report_list"),
    path("monthly-reviews/compare/", views.report_compare, name="report_compare"),
    path("monthly-reviews/this-month/", views.report_month_to_date, name="report_month_to_date"),
    path("monthly-reviews/<int:pk>/", views.report_detail, name="report_detail"),
    path(
        "api/v1/monthly-reviews/<int:pk>/status/",
        apis.ReviewStatusApi.as_view(),
        name="api_review_status",
    ),
    # The old path of the build status, kept until the sunset (toolkit.deprecation).
    path(
        "api/v1/reviews/<int:pk>/status/",
        deprecated_path(
            apis.ReviewStatusApi,
            successor="api_review_status",
            operation_ids={"get": "reviews_status_retrieve_deprecated"},
        ).as_view(),
        name="api_review_status_deprecated",
    ),
    path(
        "api/v1/monthly-reviews/<int:pk>/",
        apis.ReviewFiguresApi.as_view(),
        name="api_monthly_review",
    ),
    path(
        "api/v1/monthly-reviews/<int:pk>/csv/",
        apis.ReviewCsvApi.as_view(),
        name="api_monthly_review_csv",
    ),
    path("monthly-reviews/<int:pk>/print/", views.report_print, name="report_print"),
    path("monthly-reviews/<int:pk>/csv/", views.report_csv, name="report_csv"),
    path("monthly-reviews/<int:pk>/csv/<slug:key>/", views.report_csv, name="report_table_csv"),
    path(
        "monthly-reviews/<int:pk>/projects/<slug:slug>/",
        views.report_project,
        name="report_project",
    ),
    path(
        "monthly-reviews/<int:pk>/projects/<slug:slug>/csv/",
        views.report_csv,
        name="report_project_csv",
    ),
    path(
        "monthly-reviews/<int:pk>/projects/<slug:slug>/csv/<slug:key>/",
        views.report_csv,
        name="report_project_table_csv",
    ),
]
