from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = _("Scheduler queues")
