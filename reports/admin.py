"""Stored reviews in the admin: read-only (a review is built by its task and never edited)."""

from django.contrib import admin

from reports.models import MonthlyReview


@admin.register(MonthlyReview)
class MonthlyReviewAdmin(admin.ModelAdmin):
    list_display = ("__str__", "pool", "project", "status", "progress", "requested_by", "built_at")
    list_filter = ("status",)
    search_fields = ("pool", "project")
    exclude = ("metrics", "project_metrics", "findings")

    def has_module_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return bool(getattr(request.user, "is_ops", False))

    def has_view_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return bool(getattr(request.user, "is_ops", False))

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
