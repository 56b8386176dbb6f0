"""Service accounts: made and managed by a project's lead (their project) and ops, in the
pages and the API; they never sign in; their writes are recorded with the pipeline run."""

import re

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from governance import services
from governance.models import (
    ApiToken,
    ApiWrite,
    Membership,
    ProjectRole,
    ServiceAccount,
    SiteRole,
    TokenScope,
)
from tests.approvals.conftest import policies  # noqa: F401  (the fixture)
from tests.conftest import REASON, login, token_for

pytestmark = pytest.mark.django_db
LIST = "/service-accounts/"


def _shown_key(response) -> str | None:
    match = re.search(r'data-testid="token-key">(arb_\w+_[\w-]+)<', response.content.decode())
    return match.group(1) if match else None


def _bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_a_lead_makes_an_account_for_their_project_and_a_token_shown_once(request, world, lead):
    client = login(lead)
    page = client.get(LIST)
    assert page.status_code == 200 and "Make a service account" in page.content.decode()
    made = client.post(
        LIST, {"username": "vision-ci", "project": world.vision.pk, "reason": "Release CI"}
    )
    account = ServiceAccount.objects.get(user__username="vision-ci")
    assert made.status_code == 302 and made["Location"] == f"/service-accounts/{account.pk}/"
    user = account.user
    assert user.is_service_account and not user.has_usable_password()
    assert Membership.objects.get(user=user).project == world.vision
    assert Membership.objects.get(user=user).role == ProjectRole.MEMBER
    assert account.history.first().history_user == lead  # governed: who and why
    assert account.history.first().history_change_reason == "Release CI"

    detail = f"/service-accounts/{account.pk}/"
    response = client.post(
        detail, {"action": "create", "name": "release", "scopes": ["read", "request"]}
    )
    key = _shown_key(response)
    # Its request scope is a governed change: it works once a second person approved it.
    waiting = _bearer(key).get(reverse("api_project_list"))
    assert waiting.status_code == 401 and "second person" in waiting.json()["detail"]
    assert "waits for a second person" in client.get(detail).content.decode()
    token = ApiToken.objects.get(prefix=key.split("_")[1])
    refused = client.post(detail, {"action": "approve_token", "token": token.pk}, follow=True)
    assert "Only ops" in refused.content.decode()
    approved = login(request.getfixturevalue("ops")).post(
        detail, {"action": "approve_token", "token": token.pk}, follow=True
    )
    assert "The token was approved." in approved.content.decode()
    assert key and _bearer(key).get(reverse("api_project_list")).status_code == 200
    assert _shown_key(client.get(detail)) is None


def test_a_lead_cannot_make_an_account_for_another_project_nor_a_site_wide_one(world, lead):
    client = login(lead)
    response = client.post(LIST, {"username": "x-ci", "project": world.speech.pk, "reason": "x"})
    assert response.status_code == 200 and not ServiceAccount.objects.exists()
    response = client.post(LIST, {"username": "x-ci", "project": "", "reason": "x"})
    assert not ServiceAccount.objects.exists()
    with pytest.raises(PermissionDenied):
        services.service_account_create(project=None, username="tool", user=lead, reason="x")


@pytest.mark.parametrize("persona", ["member", "approver", "outsider"])
def test_others_manage_no_service_accounts(request, world, persona, ci_user):
    client = login(request.getfixturevalue(persona))
    page = client.get(LIST).content.decode()
    assert "ci-pipeline" not in page and "Make a service account" not in page
    account = ci_user.service_account
    assert client.get(f"/service-accounts/{account.pk}/").status_code == 404
    response = client.post(LIST, {"username": "x", "project": world.vision.pk, "reason": "x"})
    assert response.status_code == 403


def test_ops_make_a_site_wide_account_that_acts_as_ops_but_never_decides(world, ops, ops2):
    account = services.service_account_create(
        project=None, username="ops-tool", user=ops, reason=REASON
    )
    # It acts as ops, so it is a governed change: it works once a second person approved it.
    assert account.awaits_approval and not account.user.is_active
    with pytest.raises(PermissionDenied, match="Four eyes"):
        services.service_account_approve(account=account, user=ops)
    services.service_account_approve(account=account, user=ops2)
    account.refresh_from_db()
    assert account.approved_by == ops2 and account.user.is_active
    assert account.user.site_role == SiteRole.OPS and account.user.is_ops
    assert not Membership.objects.filter(user=account.user).exists()
    client = login(ops)
    assert "ops-tool" in client.get(LIST).content.decode()


def test_a_service_account_never_signs_in(world, ci_user):
    ci_user.set_password("a-password-it-never-has")
    ci_user.save()
    response = Client().post(
        reverse("login"), {"username": "ci-pipeline", "password": "a-password-it-never-has"}
    )
    assert response.status_code == 200 and "_auth_user_id" not in response.client.session
    client = Client()
    client.force_login(ci_user)  # even a forged session is not honoured
    assert client.get(reverse("home")).status_code == 302


def test_a_service_account_is_never_a_lead_nor_in_another_project(world, ci_user):
    with pytest.raises(ValidationError):
        services.membership_set(
            project=world.vision, member=ci_user, role=ProjectRole.LEAD, user=world.ops, reason="x"
        )
    with pytest.raises(ValidationError):
        services.membership_set(
            project=world.speech,
            member=ci_user,
            role=ProjectRole.MEMBER,
            user=world.ops,
            reason="x",
        )


def test_the_database_refuses_a_service_account_with_more_powers(ci_user):
    from django.db import IntegrityError, transaction

    for field, value in (("is_superuser", True), ("site_role", SiteRole.APPROVER)):
        with pytest.raises(IntegrityError), transaction.atomic():
            type(ci_user).objects.filter(pk=ci_user.pk).update(**{field: value})


def test_writes_are_recorded_with_the_pipeline_run_and_shown_to_the_lead(
    request, world, lead, ci_user, ci_token
):
    request.getfixturevalue("policies")
    client = _bearer(ci_token.key)
    run = "https://gitlab.example.com/vision/-/pipelines/811"
    body = {
        "project": "vision",
        "kind": "queue_jump",
        "tier": "production",
        "job_ids": ["48213"],
        "starts_at": "2099-01-01T08:00:00Z",
        "ends_at": "2099-01-02T08:00:00Z",
        "justification": "Release gate",
        "business_impact": "The release slips a week",
    }
    response = client.post(
        reverse("api_request_create"), body, format="json", HTTP_X_PIPELINE_RUN_URL=run
    )
    assert response.status_code == 201, response.json()
    client.get(reverse("api_project_list"))  # reads are not recorded
    write = ApiWrite.objects.get()
    assert (write.user, write.token, write.method, write.status_code) == (
        ci_user,
        ci_token,
        "POST",
        201,
    )
    assert write.pipeline_run_url == run and write.path == "/api/v1/requests/create/"
    account = ci_user.service_account
    page = login(lead).get(f"/service-accounts/{account.pk}/").content.decode()
    assert run in page
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=token_for(lead))
    rows = api.get(reverse("api_service_account_writes", args=[account.pk])).json()["results"]
    assert rows[0]["pipeline_run_url"] == run and rows[0]["status_code"] == 201


def test_deactivating_stops_every_token(world, lead, ci_user, ci_token):
    account = ci_user.service_account
    client = login(lead)
    client.post(f"/service-accounts/{account.pk}/", {"action": "deactivate", "reason": "Moved"})
    account.refresh_from_db()
    ci_token.refresh_from_db()
    assert account.deactivated_at is not None and ci_token.revoked_at is not None
    assert _bearer(ci_token.key).get(reverse("api_project_list")).status_code == 401


def test_the_api_manages_accounts_and_tokens_within_the_same_rules(world, lead, member, ops):
    lead_api = APIClient()
    lead_api.credentials(HTTP_AUTHORIZATION=token_for(lead, TokenScope.READ, TokenScope.REQUEST))
    create = reverse("api_service_account_create")
    made = lead_api.post(
        create, {"username": "vision-ci", "project": "vision", "reason": "CI"}, format="json"
    )
    assert made.status_code == 201, made.json()
    assert made.json()["project"] == "vision"
    other = {"username": "speech-ci", "project": "speech", "reason": "CI"}
    assert lead_api.post(create, other, format="json").status_code == 403
    site = {"username": "tool", "project": None, "reason": "CI"}
    assert lead_api.post(create, site, format="json").status_code == 403
    pk = made.json()["id"]
    token_url = reverse("api_service_account_token_create", args=[pk])
    # A token never makes a token with more scopes than its own.
    too_much = lead_api.post(token_url, {"name": "x", "scopes": ["sync"]}, format="json")
    assert too_much.status_code == 400 and "scopes" in too_much.json()["fields"]
    new = lead_api.post(token_url, {"name": "CI", "scopes": ["read"]}, format="json")
    assert new.status_code == 201 and new.json()["key"].startswith("arb_")
    listed = lead_api.get(reverse("api_service_account_detail", args=[pk])).json()
    assert "key" not in listed["tokens"][0] and listed["tokens"][0]["scopes"] == ["read"]
    # The account's own token manages nothing.
    svc = _bearer(new.json()["key"])
    assert svc.get(reverse("api_service_account_list")).json()["results"] == []
    assert svc.get(reverse("api_token_list")).json()["results"] == []
    member_api = APIClient()
    member_api.credentials(HTTP_AUTHORIZATION=token_for(member))
    assert member_api.get(reverse("api_service_account_detail", args=[pk])).status_code == 404
    revoke = reverse("api_service_account_token_revoke", args=[pk, new.json()["id"]])
    assert member_api.post(revoke).status_code == 404
    assert lead_api.post(revoke).status_code == 200
    assert svc.get(reverse("api_project_list")).status_code == 401


def test_personal_tokens_through_the_api(world, member):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=token_for(member, TokenScope.READ, TokenScope.REQUEST))
    made = api.post(
        reverse("api_token_create"), {"name": "s", "scopes": ["read"], "expires_in_days": 7}
    )
    assert made.status_code == 201
    assert ApiToken.objects.filter(user=member).count() == 2
    assert (
        api.post(reverse("api_token_create"), {"name": "s", "scopes": ["ingest"]}).status_code
        == 400
    )
    revoke = api.post(reverse("api_token_revoke", args=[made.json()["id"]]))
    assert revoke.status_code == 200 and revoke.json()["revoked_at"]
    assert api.post(reverse("api_token_revoke", args=[made.json()["id"]])).status_code == 400


def test_a_token_over_its_rate_gets_429_with_retry_after(settings, ci_token):
    settings.ARBITER_API_THROTTLE = True
    settings.ARBITER_API_RATES = {"token": "2/min", "user": "100/min", "anon": "100/min"}
    client = _bearer(ci_token.key)
    url = reverse("api_project_list")
    assert [client.get(url).status_code for _ in range(2)] == [200, 200]
    limited = client.get(url)
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0
    # Another token of the same account has its own count.
    other = services.service_account_token_create(
        account=ci_token.user.service_account, name="b", scopes=["read"], user=ci_token.created_by
    )
    assert _bearer(other.key).get(url).status_code == 200
