"""``manage.py token_create``: a bootstrap token printed once, through the token services."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance.models import ApiToken
from governance.selectors import api_token_authenticate

pytestmark = pytest.mark.django_db


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("token_create", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_persons_token_prints_only_the_key_once(member):
    out, err = _run("--user", "member", "--scopes", "read,request", "--expires-days", "7")

    key = out.strip()
    assert out == key + "\n"
    token, problem = api_token_authenticate(key=key)
    assert problem == "" and token is not None
    assert token.user == member
    assert token.scopes == ["read", "request"]
    assert (token.expires_at - token.created_at).days == 7
    assert "member" in err and key not in err
    assert not hasattr(ApiToken.objects.get(), "key")  # only the digest was stored


def test_a_service_accounts_token_is_made_by_its_lead(ci_user, lead):
    out, _err = _run(
        "--service-account", "ci-pipeline", "--by", "lead", "--scopes", "read", "--name", "boot"
    )

    token, _problem = api_token_authenticate(key=out.strip())
    assert token is not None and token.user == ci_user
    assert token.name == "boot" and token.created_by == lead
    assert token.history.get().history_user == lead


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "nobody", "--scopes", "read"], "No user named “nobody”"),
        (["--user", "member", "--scopes", "read,admin"], "scopes"),
        (["--user", "member", "--scopes", ","], "scopes"),
        (["--user", "member", "--scopes", "read", "--expires-days", "0"], "expires_in_days"),
        (["--user", "member", "--scopes", "read", "--by", "ops"], "--by"),
        (["--user", "ci-pipeline", "--scopes", "read"], "Only a person"),
        (["--service-account", "ci-pipeline", "--scopes", "read"], "--by"),
        (["--service-account", "nope", "--by", "ops", "--scopes", "read"], "No service account"),
        (["--service-account", "ci-pipeline", "--by", "member", "--scopes", "read"], "lead"),
        (["--user", "member", "--service-account", "ci-pipeline", "--scopes", "read"], "not"),
        (["--scopes", "read"], "one of the arguments"),
    ],
)
def test_bad_input_is_a_clear_error_and_makes_nothing(ci_user, member, args, message):
    with pytest.raises(CommandError) as error:
        _run(*args)

    assert message in str(error.value)
    assert not ApiToken.objects.exists()
