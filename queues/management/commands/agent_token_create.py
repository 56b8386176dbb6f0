"""``manage.py agent_token_create``: the pull agent's token for one Slurm cluster, printed once.

An ops person's token of the ``sync`` scope, bound to the cluster: it fetches that
cluster's job_submit table and no other (``ClusterAgentToken``). The key alone goes to
standard output (put it in the agent's token file); what it is goes to standard error.
"""

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import gettext as _

from governance.models import User
from queues import services
from queues.models import Cluster


class Command(BaseCommand):
    help = (
        "Make the pull agent's API token for a Slurm cluster (scope sync, bound to that "
        "cluster) and print its key once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="The cluster's name in Arbiter.")
        parser.add_argument("--user", required=True, help="Username of the ops person it acts as.")
        parser.add_argument(
            "--expires-days",
            type=int,
            default=None,
            help="Days the token lives (default and maximum: the deployment's settings).",
        )
        parser.add_argument("--name", default="", help="What uses it (default: “pull agent of …”).")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(_("No cluster named “%(name)s”.") % {"name": options["cluster"]})
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(_("No user named “%(name)s”.") % {"name": options["user"]})
        try:
            token = services.cluster_agent_token_create(
                cluster=cluster,
                user=user,
                name=options["name"],
                expires_in_days=options["expires_days"],
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        except PermissionDenied as error:
            raise CommandError(str(error)) from error
        self.stderr.write(
            _(
                "Token “%(name)s” of %(owner)s, scope sync, bound to cluster %(cluster)s, "
                "expires %(expires)s. The key is shown this once; store it now."
            )
            % {
                "name": token.name,
                "owner": user.username,
                "cluster": cluster.name,
                "expires": f"{token.expires_at:%Y-%m-%d %H:%M %Z}",
            }
        )
        self.stdout.write(token.key)  # type: ignore[attr-defined]
