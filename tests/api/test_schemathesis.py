"""Schemathesis over every operation of ``/api/schema/``, as ops, as a project member and
anonymously: no server error and no response that breaks the schema, whatever the input.

Runs against the WSGI application in the test's database (the ``world`` rules, with real
tokens). Bounded for CI: a fixed number of derandomized examples per operation and persona.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from governance.wsgi import application

pytestmark = pytest.mark.schemathesis

EXAMPLES_PER_OPERATION = 12


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


def _credentials(request, world, persona: str) -> dict[str, str]:
    if persona == "anonymous":
        return {}
    user = world.ops if persona == "ops" else request.getfixturevalue(persona)
    token, _created = Token.objects.get_or_create(user=user)
    return {"Authorization": f"Token {token.key}"}


def _call(case, request, world, persona: str) -> None:
    case.call_and_validate(
        headers=_credentials(request, world, persona),
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
@BOUNDED
def test_as_ops(case, world, request):
    _call(case, request, world, "ops")


@schema.parametrize()
@BOUNDED
def test_as_a_project_member(case, world, request):
    _call(case, request, world, "member")


@schema.parametrize()
@BOUNDED
def test_anonymously(case, world, request):
    _call(case, request, world, "anonymous")
