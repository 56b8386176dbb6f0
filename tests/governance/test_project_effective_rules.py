"""What a project may use at an instant (grants included): its API and its page."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from governance import services
from governance.models import GrantKind, Terms
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def exception(world):
    now = timezone.now()
    return services.grant_create(
        user=world.ops,
        reason="Deadline",
        project=world.vision,
        source="request:7",
        terms=Terms(
            kind=GrantKind.QUOTA_EXCEPTION,
            pool=world.training,
            flavor=world.a100,
            extra_gpus=8,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=2),
        ),
    )


def _get(api_client, ci_token, **params):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    return api_client.get(reverse("api_project_effective_rules", args=["vision"]), params)


def test_active_grants_raise_what_the_project_may_use(world, exception, api_client, ci_token):
    response = _get(api_client, ci_token)

    assert response.status_code == 200
    body = response.json()
    assert body["tier"] == "key"
    assert body["allowed_tiers"] == ["key", "regular", "exploratory"]
    [quota] = body["quotas"]
    assert quota["maximum"] == 48 and quota["borrow_limit"] == 24
    assert quota["changed_by_grants"] is True
    assert [grant["source"] for grant in body["grants"]] == ["request:7"]


def test_an_instant_outside_the_grant_gives_the_base_rules(world, exception, api_client, ci_token):
    at = (timezone.now() + timedelta(days=3)).isoformat()

    body = _get(api_client, ci_token, at=at).json()

    assert body["quotas"][0]["maximum"] == 40
    assert body["grants"] == []


def test_a_bad_instant_is_a_400_naming_the_parameter(world, api_client, ci_token):
    response = _get(api_client, ci_token, at="next tuesday")

    assert response.status_code == 400
    assert "at" in response.json()["fields"]


def test_unknown_project_is_404(world, api_client, ci_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")

    response = api_client.get(reverse("api_project_effective_rules", args=["nope"]))

    assert response.status_code == 404


def test_query_count_is_fixed(world, exception, api_client, ci_token, django_assert_num_queries):
    _get(api_client, ci_token)  # the token's first use in a minute records it (one write)
    # token, project, tiers, projects, grants, quotas
    with django_assert_num_queries(6):
        _get(api_client, ci_token)


def test_the_project_page_shows_the_grants_in_force(world, exception, member):
    response = login(member).get(reverse("project_detail", args=["vision"]))

    content = response.content.decode()
    assert "In force now" in content
    assert "request:7" in content
    assert "at most 48 GPUs now" in content


def test_without_grants_the_project_page_has_no_in_force_section(world, member):
    response = login(member).get(reverse("project_detail", args=["vision"]))

    assert "In force now" not in response.content.decode()
