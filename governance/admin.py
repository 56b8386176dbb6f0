"""The Django admin, for ops.

Governed rules are read-only here: every change to them goes through the services (the
portal's forms and the API), so that no history row lacks a user and a reason. The admin
still shows each object's full history (django-simple-history's history view).
"""

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.utils.translation import gettext_lazy as _
from simple_history.admin import SimpleHistoryAdmin

from governance.models import (
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    Review,
    ReviewReminder,
    RuleChange,
    RuleEdit,
    User,
)


def _is_ops(request) -> bool:
    """Ops (the site role) use the admin; ``governance.apps.ArbiterAdminSite`` lets them in."""
    return bool(request.user.is_active and getattr(request.user, "is_ops", False))


class ReadOnlyAdmin(SimpleHistoryAdmin):
    """Lists, filters and history for ops, but no add, change or delete for anyone."""

    def has_module_permission(self, request) -> bool:
        return _is_ops(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return _is_ops(request) or super().has_view_permission(request, obj)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(User)
class ArbiterUserAdmin(UserAdmin):
    """Ops manage accounts and site roles (users are not governed rules)."""

    def has_module_permission(self, request) -> bool:
        return _is_ops(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return _is_ops(request) or super().has_view_permission(request, obj)

    def has_add_permission(self, request) -> bool:
        return _is_ops(request) or super().has_add_permission(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return _is_ops(request) or super().has_change_permission(request, obj)

    list_display = ("username", "email", "first_name", "last_name", "site_role", "is_active")
    list_filter = ("site_role", "is_active", "is_staff")
    fieldsets = (
        *(UserAdmin.fieldsets or ()),
        (_("Arbiter"), {"fields": ("site_role",)}),
    )
    add_fieldsets = (
        *UserAdmin.add_fieldsets,
        (_("Arbiter"), {"fields": ("email", "site_role")}),
    )


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    can_delete = False
    readonly_fields = ("user", "role")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "tier")
    list_select_related = ("tier",)
    search_fields = ("name", "slug")
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("project", "user", "role")
    list_select_related = ("project", "user")
    list_filter = ("role",)


@admin.register(GpuFlavor)
class GpuFlavorAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "gpu_model", "memory_gb", "gres_type")


class PoolCapacityInline(admin.TabularInline):
    model = PoolCapacity
    extra = 0
    can_delete = False
    readonly_fields = ("flavor", "gpus")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Pool)
class PoolAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "parent")
    list_select_related = ("parent",)
    inlines = [PoolCapacityInline]


@admin.register(PoolCapacity)
class PoolCapacityAdmin(ReadOnlyAdmin):
    list_display = ("pool", "flavor", "gpus")
    list_select_related = ("pool", "flavor")


@admin.register(PriorityTier)
class PriorityTierAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "score",
        "scheduler_value",
        "owner",
        "may_preempt",
        "is_default",
        "next_review_on",
    )
    list_select_related = ("owner",)
    list_filter = ("may_preempt", "is_default")


@admin.register(PreemptionClass)
class PreemptionClassAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "kind", "requires_verified_checkpoint")
    list_filter = ("kind",)


@admin.register(Quota)
class QuotaAdmin(ReadOnlyAdmin):
    list_display = (
        "project",
        "pool",
        "flavor",
        "guarantee",
        "borrow_limit",
        "lending_limit",
        "preemption_class",
    )
    list_select_related = ("project", "pool", "flavor", "preemption_class")
    list_filter = ("pool", "flavor", "preemption_class")


@admin.register(ReviewReminder)
class ReviewReminderAdmin(admin.ModelAdmin):
    list_display = ("tier", "quota", "kind", "due_on", "recipient", "sent_at")
    list_select_related = ("tier", "quota")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class RuleEditInline(admin.TabularInline):
    model = RuleEdit
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "content_type",
        "object_id",
        "field",
        "key",
        "kind",
        "old_value",
        "new_value",
    )

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(RuleChange)
class RuleChangeAdmin(ReadOnlyAdmin):
    """Rule changes are proposed, decided and applied in the portal (or the API), never here."""

    list_display = ("pk", "title", "status", "author", "approved_by", "applied_at")
    list_select_related = ("author", "approved_by")
    list_filter = ("status",)
    search_fields = ("title", "reason", "ticket")
    inlines = [RuleEditInline]


@admin.register(Review)
class ReviewAdmin(ReadOnlyAdmin):
    list_display = ("reviewed_on", "tier", "quota", "outcome", "reviewed_by", "next_review_on")
    list_select_related = ("tier", "quota", "reviewed_by")
    list_filter = ("outcome",)
