"""Who manages which service accounts and tokens, the scoped getters, and token lookup."""

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router
from django.db.models import Prefetch, QuerySet
from django.db.models.query import get_related_populators
from django.db.models.sql.compiler import SQLCompiler
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    ApiToken,
    ApiWrite,
    Membership,
    Project,
    ProjectRole,
    ServiceAccount,
    TokenScope,
    User,
)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
TOKEN_START = "arb_"


def token_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def required_scope(view: Any, method: str) -> str:
    """The scope a token needs for ``method`` on ``view`` (contract: a view's
    ``required_scope``; otherwise ``read`` for safe methods and ``request`` for the rest)."""
    declared = getattr(view, "required_scope", None)
    if declared:
        return str(declared)
    return TokenScope.READ if method.upper() in SAFE_METHODS else TokenScope.REQUEST


def _is_person(user: Any) -> bool:
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and not getattr(user, "is_service_account", False)
    )


def user_may_manage_personal_tokens(user: Any) -> bool:
    return _is_person(user)


def user_may_manage_service_accounts(*, user: Any, project: Project | None) -> bool:
    """Ops manage every service account; a project's lead those of their project."""
    if not _is_person(user):
        return False
    if user.is_ops:
        return True
    return project is not None and (
        Membership.objects.filter(project=project, user=user, role=ProjectRole.LEAD).exists()
    )


def service_account_people(account: ServiceAccount) -> set[int]:
    """The people behind a service account, for four-eyes: who made it, who minted any of its
    tokens (ever: each could have acted through it), and its project's leads (who manage it
    and may mint its tokens at any time). What it authors counts as theirs."""
    people = {account.created_by_id}
    people.update(
        ApiToken.objects.filter(user_id=account.user_id).values_list("created_by_id", flat=True)
    )
    if account.project_id is not None:
        people.update(
            Membership.objects.filter(
                project_id=account.project_id, role=ProjectRole.LEAD
            ).values_list("user_id", flat=True)
        )
    return people


def service_account_manager_names(account: ServiceAccount) -> list[str]:
    """``service_account_people``'s usernames, sorted (for the pages and the API)."""
    return sorted(
        User.objects.filter(pk__in=service_account_people(account)).values_list(
            "username", flat=True
        )
    )


def people_behind(user: Any) -> set[int]:
    """The ids of the people one identity stands for: a person is themselves; a service
    account is everyone in ``service_account_people``. Nobody approves, applies or rolls back
    what an identity they stand behind authored."""
    if user is None or getattr(user, "pk", None) is None:
        return set()
    if not getattr(user, "is_service_account", False):
        return {user.pk}
    account = ServiceAccount.objects.filter(user_id=user.pk).first()
    if account is None:
        return set()
    return service_account_people(account)


def stands_behind(*, user: Any, authors: Iterable[Any]) -> Any:
    """The first of ``authors`` (users or None) that ``user`` stands behind through a service
    account (not as themselves), or None."""
    if user is None or getattr(user, "pk", None) is None:
        return None
    for author in authors:
        if (
            author is not None
            and getattr(author, "is_service_account", False)
            and user.pk in people_behind(author)
        ):
            return author
    return None


def projects_user_leads(*, user: Any) -> QuerySet[Project]:
    if not _is_person(user):
        return Project.objects.none()
    projects = Project.objects.order_by("name")
    if user.is_ops:
        return projects
    return projects.filter(memberships__user=user, memberships__role=ProjectRole.LEAD).distinct()


def _tokens() -> QuerySet[ApiToken]:
    return ApiToken.objects.select_related("usage", "created_by", "revoked_by").order_by(
        "-created_at", "-pk"
    )


def service_account_list(*, user: Any) -> QuerySet[ServiceAccount]:
    """The service accounts ``user`` manages: all for ops, their projects' for a lead."""
    accounts = ServiceAccount.objects.select_related("user", "project", "created_by").order_by(
        "project__name", "user__username"
    )
    if not _is_person(user):
        return accounts.none()
    if user.is_ops:
        return accounts
    return accounts.filter(
        project__in=Membership.objects.filter(user=user, role=ProjectRole.LEAD).values("project")
    )


def service_account_get(*, user: Any, pk: int) -> ServiceAccount:
    """The one scoped getter of a service account: a 404 for anyone who does not manage it."""
    account = (
        service_account_list(user=user)
        .prefetch_related(Prefetch("user__api_tokens", queryset=_tokens(), to_attr="tokens"))
        .filter(pk=pk)
        .first()
    )
    if account is None:
        raise Http404(_("No such service account."))
    return account


def service_account_token_get(*, account: ServiceAccount, pk: int) -> ApiToken:
    token = _tokens().filter(user_id=account.user_id, pk=pk).first()
    if token is None:
        raise Http404(_("No such token."))
    return token


def service_account_writes(
    *, account: ServiceAccount, limit: int | None = 50
) -> QuerySet[ApiWrite]:
    """The account's latest writes through the API, newest first (all with ``limit=None``,
    for the API's pages)."""
    writes = (
        ApiWrite.objects.filter(user_id=account.user_id)
        .select_related("token")
        .order_by("-at", "-pk")
    )
    return writes if limit is None else writes[:limit]


def personal_token_list(*, user: Any) -> QuerySet[ApiToken]:
    if not _is_person(user):
        return ApiToken.objects.none()
    return _tokens().filter(user=user)


def personal_token_get(*, user: Any, pk: int) -> ApiToken:
    """A person's own token; a 404 for anyone else's."""
    token = personal_token_list(user=user).filter(pk=pk).first()
    if token is None:
        raise Http404(_("No such token."))
    return token


@dataclass(frozen=True)
class _TokenLookup:
    """The token lookup's query, compiled once per database: the token by its prefix, with its
    user and its last use (``select_related``), and how to read a row into the three objects
    (what ``QuerySet.first()`` does on each call)."""

    alias: str
    compiler: SQLCompiler
    sql: str
    converters: dict[int, Any]
    fields: slice
    init_list: list[str]
    populators: list[Any]

    @classmethod
    @cache
    def compile(cls, alias: str) -> "_TokenLookup":
        queryset = ApiToken.objects.using(alias).select_related("user", "usage").filter(prefix="")
        compiler = queryset.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()  # also fills the compiler's select and klass_info
        if tuple(params) != ("",):
            raise ImproperlyConfigured("The token lookup must take the prefix alone.")
        info = compiler.klass_info
        assert info is not None
        first, last = info["select_fields"][0], info["select_fields"][-1] + 1
        return cls(
            alias=alias,
            compiler=compiler,
            sql=sql,
            converters=compiler.get_converters(
                [column[0] for column in compiler.select[: compiler.col_count]]
            ),
            fields=slice(first, last),
            init_list=[column[0].target.attname for column in compiler.select[first:last]],
            # Django 5.2's signature (django-stubs already follow a later release's).
            populators=get_related_populators(info, compiler.select, alias),  # type: ignore[call-arg]
        )

    @property
    def width(self) -> int:
        """How many columns a row of the lookup has (a query may add its own after them)."""
        return len(self.compiler.select)

    def get(self, prefix: str) -> ApiToken | None:
        with connections[self.alias].cursor() as cursor:
            cursor.execute(self.sql, [prefix])
            rows = cursor.fetchmany(1)
        return self.token_from_row(rows[0]) if rows else None

    def token_from_row(self, row: tuple[Any, ...]) -> ApiToken:
        """The token, its user and its last use from a row of ``sql`` (or of a query that
        selects ``sql``'s columns first, then its own)."""
        alias = self.alias
        if self.converters:  # e.g. text to datetime on SQLite
            converted: Any = next(self.compiler.apply_converters([row], self.converters))
            row = tuple(converted)
        token = ApiToken.from_db(alias, self.init_list, row[self.fields])
        for populator in self.populators:
            populator.populate(row, token)
        return token


def api_token_lookup() -> _TokenLookup:
    """The compiled token lookup (its ``sql`` takes the token's prefix), for a hot path that
    reads the token in the same query as its own data (``api_token_authenticate``'s
    ``find``)."""
    return _TokenLookup.compile(router.db_for_read(ApiToken))


def api_token_authenticate(
    *, key: str, find: Callable[[str], ApiToken | None] | None = None
) -> tuple[ApiToken | None, str]:
    """The live token ``key`` names, or ``None`` and why not (one indexed query).

    Every API request starts here, so the query is compiled once per process
    (``_TokenLookup``): compiling it cost several times more than running it. ``find`` reads
    the token by its prefix instead of the lookup's own query (a query that selects the
    lookup's columns and more, see ``api_token_lookup``); every check below still applies."""
    parts = key.split("_", 2)
    if not key.startswith(TOKEN_START) or len(parts) != 3 or not parts[1]:
        return None, _("Invalid token.")
    token = (find or api_token_lookup().get)(parts[1][:16])
    if token is None or not hmac.compare_digest(token.digest, token_digest(key)):
        return None, _("Invalid token.")
    if token.revoked_at is not None:
        return None, _("This token was revoked.")
    if token.expires_at <= timezone.now():
        return None, _("This token has expired.")
    if token.approved_at is None:
        return None, _(
            "This token waits for a second person's approval: a service account's token with "
            "the “request” scope is a governed change (four eyes)."
        )
    if not token.user.is_active:
        if token.user.is_service_account:
            return None, _(
                "The token's service account is inactive, or, site-wide, waits for a second "
                "person's approval (four eyes)."
            )
        return None, _("The token's account is inactive.")
    return token, ""
