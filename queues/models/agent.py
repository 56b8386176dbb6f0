"""The API tokens of pull agents, each bound to one cluster (``ClusterAgentToken``).

A Slurm controller that shares no file system with Arbiter runs the pull agent
(deploy/slurm-agent), which fetches its cluster's job_submit table with an API token of the
``sync`` scope. That token is bound to its cluster: it fetches that cluster's table and no
other one, so a controller that is broken into gives away the rules of its own cluster only.
Not governed: a binding is made with its token and goes with it (revoke the token to end it).
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from governance.models import ApiToken

from .cluster import Cluster


class ClusterAgentToken(models.Model):
    """A ``sync`` token bound to the one cluster whose submit table it may fetch."""

    token = models.OneToOneField(
        ApiToken,
        verbose_name=_("token"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="agent_binding",
    )
    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="agent_tokens"
    )
    bound_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("bound by"),
        on_delete=models.PROTECT,
        related_name="+",
    )
    bound_at = models.DateTimeField(_("bound at"))

    class Meta:
        verbose_name = _("pull agent token")
        verbose_name_plural = _("pull agent tokens")

    def __str__(self) -> str:
        return f"{self.token_id} → {self.cluster_id}"
