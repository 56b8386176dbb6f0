from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.contrib.admin import sites
from django.utils.translation import gettext_lazy as _


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = _("Governance")

    def ready(self) -> None:
        # The built-in rule kinds, registered as every app registers its own (``queues``:
        # clusters), in the order pages and the API list them.
        from governance.services.changes import BUILTIN_KINDS, rule_kind_register

        for kind in BUILTIN_KINDS:
            rule_kind_register(kind)


class ArbiterAdminSite(sites.AdminSite):
    """The admin is for ops (the site role), whether or not they carry Django's staff flag.

    It lives here, not in ``admin.py``, because the admin site must exist before any app's
    ``admin`` module registers its models.
    """

    site_header = _("Arbiter administration")
    site_title = _("Arbiter")

    def has_permission(self, request) -> bool:
        user = request.user
        return super().has_permission(request) or bool(
            user.is_active and getattr(user, "is_ops", False)
        )


class ArbiterAdminConfig(admin_apps.AdminConfig):
    default = False
    default_site = "governance.apps.ArbiterAdminSite"
