from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = _("Governance")
