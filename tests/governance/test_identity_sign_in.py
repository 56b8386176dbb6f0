"""Signing in through the identity provider: who is who, groups to memberships, powers only
proposed (``services.identity_sign_in``, given the claims of an ID token the callback
verified; the browser tests in test_oidc_browser.py run the whole flow against a real
provider)."""

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied

from governance import services
from governance.models import (
    ChangeStatus,
    Membership,
    ProjectRole,
    ProviderIdentity,
    RuleChange,
    SiteRole,
    User,
)
from governance.services import IdentityRefused

ISSUER = "https://login.example.com"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _mapping(settings):
    settings.ARBITER_OIDC_GROUPS_CLAIM = "groups"
    settings.ARBITER_OIDC_PROJECT_GROUPS = {
        "team-vision": ["vision"],
        "vision-leads": ["vision:lead"],
        "team-speech": ["speech"],
    }
    settings.ARBITER_OIDC_ROLE_GROUPS = {"arbiter-ops": ["ops"], "gold-owners": ["tier:key"]}


def claims(**extra):
    return {
        "sub": "u-1001",
        "preferred_username": "wei",
        "email": "wei@example.com",
        "given_name": "Wei",
        "family_name": "Zhang",
        "locale": "zh-CN",
        "groups": [],
        **extra,
    }


def test_first_sign_in_creates_a_powerless_account_matched_by_subject(world):
    person = services.identity_sign_in(issuer=ISSUER, claims=claims())
    assert person.username == "wei"
    assert person.site_role == SiteRole.MEMBER and person.is_active
    assert not person.is_staff and not person.is_superuser and not person.has_usable_password()
    assert person.language == "zh-hans"
    assert not Membership.objects.filter(user=person).exists()
    identity = ProviderIdentity.objects.get(user=person)
    assert (identity.issuer, identity.subject) == (ISSUER, "u-1001")
    # The same subject with another e-mail and username: the same person, kept up to date.
    again = services.identity_sign_in(
        issuer=ISSUER,
        claims=claims(email="wei.zhang@example.com", preferred_username="wzhang", locale="en"),
    )
    assert again.pk == person.pk
    again.refresh_from_db()
    assert (again.email, again.language, again.username) == ("wei.zhang@example.com", "en", "wei")
    assert again.history.first().history_change_reason.startswith(f"Identity provider {ISSUER}")


def test_an_existing_local_account_with_that_name_is_not_taken_over(world):
    # "member" exists (a local account); a provider subject calling itself "member" gets its own.
    person = services.identity_sign_in(
        issuer=ISSUER, claims=claims(sub="other", preferred_username="member")
    )
    assert person.username.startswith("member-")
    assert User.objects.get(username="member").provider_identities.count() == 0


def test_groups_decide_the_mapped_memberships_with_the_claim_in_the_history(world):
    person = services.identity_sign_in(
        issuer=ISSUER, claims=claims(groups=["team-vision", "unrelated"])
    )
    membership = Membership.objects.get(user=person, project=world.vision)
    assert membership.role == ProjectRole.MEMBER
    row = membership.history.first()
    assert row.history_user.username == "arbiter"
    assert "claim “groups” lists “team-vision”" in row.history_change_reason
    assert ISSUER in row.history_change_reason
    assert not Membership.objects.filter(user=person, project=world.speech).exists()

    # Next sign-in: moved to speech and made a lead of vision.
    services.identity_sign_in(issuer=ISSUER, claims=claims(groups=["vision-leads", "team-speech"]))
    assert Membership.objects.get(user=person, project=world.vision).role == ProjectRole.LEAD
    assert Membership.objects.filter(user=person, project=world.speech).exists()

    # Leaves every group: both memberships end, each with a history row saying why.
    services.identity_sign_in(issuer=ISSUER, claims=claims(groups=[]))
    assert not Membership.objects.filter(user=person).exists()
    removed = Membership.history.filter(user_id=person.pk, history_type="-").order_by("pk")
    assert [row.project_id for row in removed] == [world.speech.pk, world.vision.pk]
    assert all("lists no group" in row.history_change_reason for row in removed)


def test_an_ops_claim_only_proposes_and_leaving_the_group_removes_the_role(world, ops2):
    person = services.identity_sign_in(issuer=ISSUER, claims=claims(groups=["arbiter-ops"]))
    person.refresh_from_db()
    assert person.site_role == SiteRole.MEMBER
    change = RuleChange.objects.get(author=person)
    assert change.status == ChangeStatus.PROPOSED
    edit = change.edits.get()
    assert (edit.content_type, edit.object_id, edit.field, edit.new_value) == (
        ContentType.objects.get_for_model(User),
        person.pk,
        "site_role",
        "ops",
    )
    # Not proposed again at every sign-in while the claim lasts.
    services.identity_sign_in(issuer=ISSUER, claims=claims(groups=["arbiter-ops"]))
    assert RuleChange.objects.filter(author=person).count() == 1
    # The person cannot approve it; ops can, then it applies.
    with pytest.raises(PermissionDenied):
        services.rule_change_approve(change=change, user=person)
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=ops2)
    person.refresh_from_db()
    assert person.site_role == SiteRole.OPS
    # Out of the ops group: a member again at once, signed by Arbiter with the claim.
    services.identity_sign_in(issuer=ISSUER, claims=claims(groups=[]))
    person.refresh_from_db()
    assert person.site_role == SiteRole.MEMBER
    assert "no longer lists a group of the ops role" in (
        person.history.first().history_change_reason
    )


def test_a_tier_ownership_claim_only_proposes(world):
    person = services.identity_sign_in(issuer=ISSUER, claims=claims(groups=["gold-owners"]))
    world.key.refresh_from_db()
    assert world.key.owner_id != person.pk
    edit = RuleChange.objects.get(author=person).edits.get()
    assert (edit.field, edit.new_value) == ("owner", person.pk)


@pytest.mark.parametrize(
    ("bad", "claim"),
    [
        ({"groups": None}, "groups"),
        ({"groups": "team-vision"}, "groups"),
        ({"sub": ""}, "sub"),
        ({"email": ["not", "text"]}, "email"),
    ],
)
def test_a_missing_or_malformed_claim_refuses_and_creates_nothing(world, bad, claim):
    before = User.objects.count()
    with pytest.raises(IdentityRefused) as refusal:
        services.identity_sign_in(issuer=ISSUER, claims=claims(**bad))
    assert refusal.value.code == "claim" and refusal.value.params["claim"] == claim
    assert User.objects.count() == before
    assert not ProviderIdentity.objects.exists()


def test_a_deactivated_account_cannot_sign_in(world, ops, ops2):
    person = services.identity_sign_in(issuer=ISSUER, claims=claims(groups=["team-vision"]))
    services.user_access_update(person=person, user=ops, reason="Left", data={"is_active": False})
    with pytest.raises(IdentityRefused) as refusal:
        services.identity_sign_in(issuer=ISSUER, claims=claims(groups=["team-speech"]))
    assert refusal.value.code == "inactive"
    assert not Membership.objects.filter(user=person, project=world.speech).exists()


def test_locales_map_to_the_sites_languages():
    from governance.services.identity import language_from_locale

    assert language_from_locale("zh-CN") == "zh-hans"
    assert language_from_locale("zh_Hans") == "zh-hans"
    assert language_from_locale("zh-TW") == ""
    assert language_from_locale("en-GB") == "en"
    assert language_from_locale("fr") == ""


def test_a_provider_disabled_account_loses_its_tokens(world):
    person = services.identity_sign_in(issuer=ISSUER, claims=claims())
    token = services.personal_token_create(user=person, name="laptop", scopes=["read"])
    services.identity_disable(
        identity=ProviderIdentity.objects.get(user=person), detail="invalid_grant"
    )
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert "gone or disabled" in token.history.first().history_change_reason


def test_a_recheck_applies_the_refreshed_groups_and_takes_a_role_away_at_once(world, ops2):
    person = services.identity_sign_in(
        issuer=ISSUER, claims=claims(groups=["arbiter-ops"]), refresh_token="rt-1"
    )
    change = RuleChange.objects.get(author=person)
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=ops2)
    identity = ProviderIdentity.objects.get(user=person)
    asked: list[str] = []

    def redeem(refresh_token):
        asked.append(refresh_token)
        return "rt-2", claims(groups=["team-speech"])

    # Confirmed a moment ago: not asked again.
    assert not services.identity_recheck(identity=identity, redeem=redeem, min_age_seconds=60)
    assert asked == []
    assert not services.identity_recheck(identity=identity, redeem=redeem, min_age_seconds=0)
    assert asked == ["rt-1"]
    person.refresh_from_db()
    assert person.site_role == SiteRole.MEMBER
    assert Membership.objects.filter(user=person, project=world.speech).exists()
    identity.refresh_from_db()
    assert services.refresh_token_open(identity.refresh_token) == "rt-2"
    assert identity.groups == ["team-speech"]


def test_a_recheck_the_provider_refuses_disables_and_one_it_cannot_answer_does_not(world):
    person = services.identity_sign_in(issuer=ISSUER, claims=claims(), refresh_token="rt-1")
    identity = ProviderIdentity.objects.get(user=person)

    def silent(refresh_token):
        raise services.ProviderSilent("connection refused")

    def refused(refresh_token):
        raise services.ProviderSaysNo("invalid_grant")

    assert not services.identity_recheck(identity=identity, redeem=silent, min_age_seconds=0)
    identity.refresh_from_db()
    assert identity.disabled_at is None
    assert services.identity_recheck(identity=identity, redeem=refused, min_age_seconds=0)
    identity.refresh_from_db()
    assert identity.disabled_at is not None and identity.refresh_token == ""
