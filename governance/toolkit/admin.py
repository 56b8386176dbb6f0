"""The admin's shared pieces: who may use it, and the read-only admin of governed objects."""

from simple_history.admin import SimpleHistoryAdmin


def is_ops(request) -> bool:
    """Ops (the site role) use the admin; ``governance.apps.ArbiterAdminSite`` lets them in."""
    return bool(request.user.is_active and getattr(request.user, "is_ops", False))


class ReadOnlyAdmin(SimpleHistoryAdmin):
    """Lists, filters and history for ops, but no add, change or delete for anyone."""

    def has_module_permission(self, request) -> bool:
        return is_ops(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return is_ops(request) or super().has_view_permission(request, obj)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
