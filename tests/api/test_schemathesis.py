"""Schemathesis over every operation of ``/api/schema/``, with tokens of every scope and
role, and anonymously: no server error and no response that breaks the schema, whatever the
input.

Runs against the WSGI application in the test's database (the ``world`` rules, with real
tokens). Bounded for CI: a fixed number of derandomized examples per operation. The token
kinds are sampled, not multiplied: the examples of each operation take the kinds in
``TOKEN_KINDS`` in turn (every role, every scope alone and all together), so every operation
meets every kind at least once in its ``2 * EXAMPLES_PER_OPERATION`` examples (more than the
number of kinds), and the run costs what the former two personas cost. Anonymous calls are
all 401s before any input is read: a few examples per operation show it.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from governance import services
from governance.models import TokenScope
from governance.wsgi import application
from tests.conftest import REASON, token_for

pytestmark = pytest.mark.schemathesis

EXAMPLES_PER_OPERATION = 12
ANONYMOUS_EXAMPLES = 4
ALL = tuple(TokenScope.values)
# (role, scopes): a person's personal token, or a service account's token.
TOKEN_KINDS = [
    ("ops", ALL),
    ("member", (TokenScope.READ,)),
    ("service_a", ALL),
    ("lead", (TokenScope.REQUEST,)),
    ("site_wide", (TokenScope.SYNC,)),
    ("approver", ALL),
    ("ops", (TokenScope.INGEST,)),
    ("site_wide", ALL),
    ("service_a", (TokenScope.READ,)),
    ("member", ALL),
    ("ops", (TokenScope.REQUEST,)),
    ("service_a", (TokenScope.INGEST,)),
    ("lead", ALL),
    ("ops", (TokenScope.SYNC,)),
    ("site_wide", (TokenScope.READ,)),
    ("service_a", (TokenScope.REQUEST,)),
]
assert len(TOKEN_KINDS) <= 2 * EXAMPLES_PER_OPERATION


@pytest.fixture(autouse=True)
def _keep_the_test_transaction(db):
    """Requests go straight to the WSGI application inside the test's transaction. As
    Django's test client does, they must not close the database connection when they end
    (that would end the test's transaction): the signal handler is detached meanwhile."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


# The schema is read from the application itself when the module is collected (anonymously:
# serving it needs no database).
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


class _Tokens:
    """The test's tokens, made on first use; ``next()`` gives the next kind's header."""

    def __init__(self, request, world) -> None:
        self.request = request
        self.world = world
        self.headers: dict[tuple, dict[str, str]] = {}
        self.turn = 0

    def _user(self, role: str):
        if role == "ops":
            return self.world.ops
        if role in ("service_a", "site_wide"):
            project = self.world.vision if role == "service_a" else None
            account = services.service_account_create(
                project=project,
                username=f"{role}-{len(self.headers)}",
                user=self.world.ops,
                reason=REASON,
            )
            return account.user
        return self.request.getfixturevalue(role)

    def next(self) -> dict[str, str]:
        kind = TOKEN_KINDS[self.turn % len(TOKEN_KINDS)]
        self.turn += 1
        if kind not in self.headers:
            role, scopes = kind
            self.headers[kind] = {"Authorization": token_for(self._user(role), *scopes)}
        return self.headers[kind]


@pytest.fixture
def tokens(request, world) -> _Tokens:
    return _Tokens(request, world)


def _call(case, headers: dict[str, str]) -> None:
    case.call_and_validate(
        headers=headers,
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
    )


BOUNDED = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@schema.parametrize()
@settings(BOUNDED, max_examples=2 * EXAMPLES_PER_OPERATION)
def test_with_every_token_kind(case, tokens):
    _call(case, tokens.next())


@schema.parametrize()
@settings(BOUNDED, max_examples=ANONYMOUS_EXAMPLES)
def test_anonymously(case, world):
    _call(case, {})
