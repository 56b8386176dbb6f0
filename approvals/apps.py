from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = _("Approvals")

    def ready(self) -> None:
        # Approval policies are governed rules: creating, changing and deleting one goes
        # through the rule change machinery, which ``governance`` keeps without importing
        # ``approvals``.
        from approvals.services import policy_rule_kind
        from governance.services import rule_kind_register

        rule_kind_register(policy_rule_kind())
