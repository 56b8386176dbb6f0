from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = _("Scheduler queues")

    def ready(self) -> None:
        # Clusters are governed rules: creating, changing and deleting one goes through the
        # rule change machinery, which ``governance`` keeps without importing ``queues``.
        from governance.services import rule_kind_register
        from queues.services.clusters import cluster_rule_kind

        rule_kind_register(cluster_rule_kind())
