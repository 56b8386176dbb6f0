"""``manage.py token_create``: an API token for bootstrap, printed once.

A person's own token (``--user``), or a service account's (``--service-account``, made
``--by`` ops or the account's project lead), through the token services: the same scopes,
expiry limits and permissions as the pages and the API. The key alone goes to standard
output (``TOKEN=$(manage.py token_create ...)``); what it is goes to standard error.
"""

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import gettext as _

from governance import services
from governance.models import ServiceAccount, User


def _messages(error: ValidationError) -> str:
    if hasattr(error, "error_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
            for field, messages in error.message_dict.items()
        )
    return " ".join(error.messages)


class Command(BaseCommand):
    help = (
        "Make an API token and print its key once: a person's own token (--user) or a "
        "service account's (--service-account, made --by ops or the project's lead)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        owner = parser.add_mutually_exclusive_group(required=True)
        owner.add_argument("--user", help="Username of the person the token acts as.")
        owner.add_argument(
            "--service-account", help="Username of the service account the token acts as."
        )
        parser.add_argument(
            "--by",
            help="With --service-account: username of who makes the token (ops, or the "
            "account's project lead); recorded in the history.",
        )
        parser.add_argument(
            "--scopes",
            required=True,
            help="Comma-separated scopes: read, request, ingest, sync (e.g. read,request).",
        )
        parser.add_argument(
            "--expires-days",
            type=int,
            default=None,
            help="Days the token lives (default and maximum: the deployment's settings).",
        )
        parser.add_argument(
            "--name", default="", help="What uses the token (default: “command line”)."
        )
        parser.add_argument("--reason", default="", help="Why (recorded in the history).")

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = [scope.strip() for scope in options["scopes"].split(",") if scope.strip()]
        name = options["name"] or _("command line")
        try:
            if options["user"]:
                if options["by"]:
                    raise CommandError(_("--by goes with --service-account only."))
                owner = self._user(options["user"])
                token = services.personal_token_create(
                    user=owner,
                    name=name,
                    scopes=scopes,
                    expires_in_days=options["expires_days"],
                )
            else:
                if not options["by"]:
                    raise CommandError(
                        _("Say who makes the token with --by (ops, or the project's lead).")
                    )
                account = (
                    ServiceAccount.objects.select_related("user", "project")
                    .filter(user__username=options["service_account"])
                    .first()
                )
                if account is None:
                    raise CommandError(
                        _("No service account named “%(name)s”.")
                        % {"name": options["service_account"]}
                    )
                token = services.service_account_token_create(
                    account=account,
                    name=name,
                    scopes=scopes,
                    expires_in_days=options["expires_days"],
                    user=self._user(options["by"]),
                    reason=options["reason"],
                )
        except ValidationError as error:
            raise CommandError(_messages(error)) from error
        except PermissionDenied as error:
            raise CommandError(str(error) or _("Not allowed.")) from error
        self.stderr.write(
            _("Token “%(name)s” of %(owner)s, scopes %(scopes)s, expires %(expires)s.")
            % {
                "name": token.name,
                "owner": token.user.username,
                "scopes": ", ".join(token.scopes),
                "expires": f"{token.expires_at:%Y-%m-%d %H:%M %Z}",
            }
        )
        if token.approved_at is None:
            self.stderr.write(
                _(
                    "It works once a second person from ops, not behind the account, approved "
                    "it (the account's page, or POST /api/v1/service-accounts/%(id)d/tokens/"
                    "%(token)d/approve/)."
                )
                % {"id": token.user.service_account.pk, "token": token.pk}
            )
        self.stderr.write(_("The key is shown this once; store it now."))
        self.stdout.write(token.key)  # type: ignore[attr-defined]

    def _user(self, username: str) -> User:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(_("No user named “%(name)s”.") % {"name": username})
        return user
