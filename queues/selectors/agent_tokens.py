"""Whether an API token may fetch a cluster's submit table: only a token bound to that
cluster (``ClusterAgentToken``) may."""

from django.utils.translation import gettext as _

from governance.models import ApiToken
from queues.models import Cluster, ClusterAgentToken


def agent_token_problem(*, token: ApiToken, cluster: Cluster) -> str:
    """Why ``token`` may not fetch ``cluster``'s table, or "" when it may (one query)."""
    binding = ClusterAgentToken.objects.filter(token=token).select_related("cluster").first()
    if binding is None:
        return _(
            "This token is not bound to a cluster. The pull agent of cluster %(cluster)s needs "
            "a token bound to it: manage.py agent_token_create --cluster %(cluster)s "
            "--user <ops>."
        ) % {"cluster": cluster.name}
    if binding.cluster_id != cluster.pk:
        return _(
            "This token is bound to cluster %(bound)s: it cannot fetch the table of cluster "
            "%(cluster)s."
        ) % {"bound": binding.cluster.name, "cluster": cluster.name}
    return ""


def agent_token_elsewhere(*, token: object, cluster: Cluster) -> str:
    """For the other sync APIs: a token bound to another cluster's agent may not act on
    ``cluster`` ("" when it may: not a token, a token bound to no cluster, or to this one)."""
    if not isinstance(token, ApiToken):
        return ""
    binding = ClusterAgentToken.objects.filter(token=token).select_related("cluster").first()
    if binding is None or binding.cluster_id == cluster.pk:
        return ""
    return _("This token is bound to cluster %(bound)s: it cannot act on cluster %(cluster)s.") % {
        "bound": binding.cluster.name,
        "cluster": cluster.name,
    }


def agent_tokens_of(cluster: Cluster) -> list[ClusterAgentToken]:
    """The tokens bound to ``cluster``'s pull agent, newest first (for its page)."""
    return list(
        ClusterAgentToken.objects.filter(cluster=cluster)
        .select_related("token", "bound_by")
        .order_by("-bound_at")
    )
