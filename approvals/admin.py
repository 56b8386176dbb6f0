"""Requests and approval policies in the admin: read-only, for ops.

Every change goes through ``approvals.services`` (the portal's pages and the API), so that
each step has its timeline row and each policy change its reason.
"""

from django.contrib import admin

from approvals.models import (
    Approval,
    ApprovalPolicy,
    RequestEvent,
    UpgradeRequest,
)
from governance.toolkit.admin import ReadOnlyAdmin


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class RequestEventInline(_ReadOnlyInline):
    model = RequestEvent
    fields = ("at", "action", "actor", "comment")
    readonly_fields = fields


class ApprovalInline(_ReadOnlyInline):
    model = Approval
    fields = ("at", "approver", "decision", "comment")
    readonly_fields = fields


@admin.register(UpgradeRequest)
class UpgradeRequestAdmin(ReadOnlyAdmin):
    list_display = ("pk", "kind", "project", "requester", "state", "starts_at", "ends_at")
    list_filter = ("stage", "kind", "flagged")
    list_select_related = ("project", "requester")
    search_fields = ("project__slug", "requester__username", "justification")
    inlines = (ApprovalInline, RequestEventInline)


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(ReadOnlyAdmin):
    list_display = (
        "kind",
        "tier",
        "max_duration_days",
        "approver",
        "approvals_required",
        "monthly_flag_threshold",
    )
    list_select_related = ("tier",)
