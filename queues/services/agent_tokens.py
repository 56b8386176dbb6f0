"""The pull agent's token, bound to its cluster (``ClusterAgentToken``).

``cluster_agent_token_create`` makes an ops person's ``sync`` token and binds it to one
Slurm cluster; ``cluster_agent_token_bind`` binds a token made elsewhere (a service
account's, made on its page). The submit-table API gives a cluster's table to a token bound
to that cluster only (``queues.selectors.agent_token_problem``).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import ApiToken, SiteRole, TokenScope, User
from governance.services import personal_token_create
from queues.models import Cluster, ClusterAgentToken, ClusterBackend


def _bind_problem(*, cluster: Cluster, token: ApiToken, user: User) -> str:
    if user.site_role != SiteRole.OPS or user.is_service_account:
        return _("Only ops bind a token to a cluster's pull agent.")
    if cluster.backend != ClusterBackend.SLURM:
        return _("Only a Slurm cluster has a job_submit table for an agent to fetch.")
    if TokenScope.SYNC not in token.scopes:
        return _("The agent's token needs the “sync” scope.")
    if token.revoked_at is not None or token.expires_at <= timezone.now():
        return _("This token is revoked or expired: make a new one for the agent.")
    return ""


@transaction.atomic
def cluster_agent_token_bind(*, cluster: Cluster, token: ApiToken, user: User) -> ClusterAgentToken:
    """Bind ``token`` (scope ``sync``) to ``cluster``: from now on it fetches that cluster's
    submit table and no other. A token is bound to one cluster at most."""
    problem = _bind_problem(cluster=cluster, token=token, user=user)
    if problem:
        if user.site_role != SiteRole.OPS:
            raise PermissionDenied(problem)
        raise ValidationError({"token": problem})
    existing = ClusterAgentToken.objects.filter(token=token).select_related("cluster").first()
    if existing is not None:
        raise ValidationError(
            {
                "token": _(
                    "This token is already bound to cluster %(cluster)s; make one token per "
                    "cluster."
                )
                % {"cluster": existing.cluster.name}
            }
        )
    binding = ClusterAgentToken(
        token=token, cluster=cluster, bound_by=user, bound_at=timezone.now()
    )
    binding.full_clean()
    binding.save()
    return binding


@transaction.atomic
def cluster_agent_token_create(
    *, cluster: Cluster, user: User, name: str = "", expires_in_days: int | None = None
) -> ApiToken:
    """A ``sync`` token of ``user`` (ops) bound to ``cluster``, for its pull agent. The key
    is on the returned token (``key``) this once."""
    if user.site_role != SiteRole.OPS or user.is_service_account:
        raise PermissionDenied(_("Only ops bind a token to a cluster's pull agent."))
    token = personal_token_create(
        user=user,
        name=name or _("pull agent of %(cluster)s") % {"cluster": cluster.name},
        scopes=[TokenScope.SYNC],
        expires_in_days=expires_in_days,
    )
    cluster_agent_token_bind(cluster=cluster, token=token, user=user)
    return token
