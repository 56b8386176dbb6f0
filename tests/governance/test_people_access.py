"""People and roles are governed: site roles, activation, superuser status and project roles
change only through a rule change someone else approves, with history; nobody grants power
to anyone (themselves included) through the admin, a page or the API; nobody handles another
person's token or password."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from governance import services
from governance.models import ChangeStatus, RuleChange, SiteRole, User
from governance.services import EditSpec
from tests.conftest import login

pytestmark = pytest.mark.django_db

ACCESS_POSTS = [
    {"site_role": "ops"},
    {"is_superuser": "on"},
    {"is_staff": "on"},
    {"is_active": "on"},
    {"site_role": "approver", "is_superuser": "on", "is_staff": "on", "is_active": "on"},
]


def _admin_change_post(client, target: User, extra: dict) -> int:
    data = {
        "username": target.username,
        "email": target.email,
        "first_name": target.first_name,
        "last_name": target.last_name,
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        **extra,
    }
    return client.post(reverse("admin:governance_user_change", args=[target.pk]), data).status_code


@pytest.mark.parametrize("extra", ACCESS_POSTS)
@pytest.mark.parametrize("target_name", ["self", "member", "approver"])
def test_ops_cannot_set_roles_or_superuser_in_the_admin(ops, member, approver, extra, target_name):
    target = {"self": ops, "member": member, "approver": approver}[target_name]
    before = User.objects.values("site_role", "is_superuser", "is_staff", "is_active").get(
        pk=target.pk
    )
    client = login(ops)

    assert _admin_change_post(client, target, extra) == 403

    after = User.objects.values("site_role", "is_superuser", "is_staff", "is_active").get(
        pk=target.pk
    )
    assert after == before


def test_the_admin_shows_access_read_only_and_no_password(ops, member):
    page = login(ops).get(reverse("admin:governance_user_change", args=[member.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    for name in ("site_role", "is_superuser", "is_staff", "is_active", "password"):
        assert f'name="{name}"' not in html
    assert member.password not in html
    assert (
        login(ops)
        .post(
            reverse("admin:auth_user_password_change", args=[member.pk]),
            {"password1": "Hijack-1234!", "password2": "Hijack-1234!"},
        )
        .status_code
        == 403
    )
    member.refresh_from_db()
    assert member.check_password("pw-member")


@pytest.mark.parametrize(
    "extra", [{}, {"site_role": "ops", "is_superuser": "on", "is_active": "on"}]
)
def test_an_account_made_in_the_admin_starts_without_power(ops, extra):
    client = login(ops)
    response = client.post(
        reverse("admin:governance_user_add"),
        {"username": "newcomer", "email": "n@example.com", "reason": "New hire", **extra},
    )
    assert response.status_code == 302
    newcomer = User.objects.get(username="newcomer")
    assert newcomer.site_role == SiteRole.MEMBER
    assert not newcomer.is_active
    assert not newcomer.is_superuser
    assert not newcomer.is_staff
    assert not newcomer.has_usable_password()
    row = newcomer.history.get()
    assert row.history_user == ops
    assert row.history_change_reason == "New hire"


@pytest.mark.parametrize("persona", ["member", "approver"])
def test_only_ops_make_accounts(request, persona):
    client = login(request.getfixturevalue(persona))
    response = client.post(
        reverse("admin:governance_user_add"), {"username": "sneaky", "reason": "x"}
    )
    assert response.status_code == 302  # to the admin's login page
    assert not User.objects.filter(username="sneaky").exists()


def test_a_second_ops_account_made_by_ops_cannot_approve_that_ops_change(world, ops2):
    ops = world.ops
    client = login(ops)
    client.post(
        reverse("admin:governance_user_add"),
        {"username": "sock", "email": "s@example.com", "reason": "Helper"},
    )
    sock = User.objects.get(username="sock")
    # ops proposes to make the new account an active operator, and cannot approve it alone.
    grant = services.rule_change_create(
        user=ops,
        reason="Second pair of hands",
        edits=[
            EditSpec(target=sock, field="site_role", value="ops"),
            EditSpec(target=sock, field="is_active", value=True),
        ],
    )
    with pytest.raises(PermissionDenied):
        services.rule_change_approve(change=grant, user=ops)
    sock.refresh_from_db()
    assert not sock.is_ops
    # The sock account, not being ops, cannot approve ops' quota change.
    quota_change = services.rule_change_create(
        user=ops,
        reason="More GPUs",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
    )
    with pytest.raises(PermissionDenied):
        services.rule_change_approve(change=quota_change, user=sock)
    # Only after another person approved the grant does the account become ops.
    services.rule_change_approve(change=grant, user=ops2)
    services.rule_change_apply(change=grant, user=ops)
    sock.refresh_from_db()
    assert sock.is_ops
    services.rule_change_approve(change=quota_change, user=sock)


def test_ops_cannot_approve_a_change_of_their_own_access(ops, ops2, member):
    demote = services.rule_change_create(
        user=ops2,
        reason="Rotation",
        edits=[EditSpec(target=ops, field="site_role", value="member")],
    )
    with pytest.raises(PermissionDenied, match="your own account"):
        services.rule_change_approve(change=demote, user=ops)


def test_a_role_change_is_a_rule_change_with_history(ops, ops2, member, approver):
    change = services.rule_change_create(
        user=ops,
        reason="Joins the approvers' rota",
        edits=[EditSpec(target=member, field="site_role", value="approver")],
    )
    member.refresh_from_db()
    assert member.site_role == SiteRole.MEMBER  # not before approval and apply
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=ops2)

    member.refresh_from_db()
    assert member.site_role == SiteRole.APPROVER
    row = member.history.latest("history_date")
    assert row.history_user == ops2
    assert row.history_change_reason == "Joins the approvers' rota"
    assert row.rule_change_id == change.pk
    assert change.edits.get().kind == "access"
    # The person's history page shows who and why.
    page = login(approver).get(reverse("person_history", args=[member.username]))
    assert "Joins the approvers&#x27; rota" in page.content.decode()


@pytest.mark.parametrize("target_name", ["self", "member"])
def test_superuser_is_never_granted_by_a_change(ops, member, target_name):
    target = ops if target_name == "self" else member
    with pytest.raises(ValidationError) as raised:
        services.rule_change_create(
            user=ops,
            reason="Power",
            edits=[EditSpec(target=target, field="is_superuser", value=True)],
        )
    assert "is_superuser" in raised.value.message_dict
    target.refresh_from_db()
    assert not target.is_superuser


@pytest.mark.parametrize("persona", ["member", "approver", "lead"])
def test_only_ops_propose_access_changes(request, world, persona):
    user = request.getfixturevalue(persona)
    with pytest.raises(PermissionDenied):
        services.rule_change_create(
            user=user, reason="Me", edits=[EditSpec(target=user, field="site_role", value="ops")]
        )


@pytest.mark.parametrize(
    "value", [{"field": "site_role", "value": "ops"}, {"field": "is_superuser", "value": True}]
)
@pytest.mark.parametrize("target_name", ["ops", "member"])
def test_the_api_never_grants_power_directly(ops, member, api_client, value, target_name):
    api_client.force_authenticate(ops)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "Power",
            "edits": [{"object_type": "user", "object": target_name, **value}],
        },
        format="json",
    )
    target = User.objects.get(username=target_name)
    if value["field"] == "is_superuser":
        assert response.status_code == 400
        assert "is_superuser" in response.json()["fields"]
    elif target_name == "ops":
        assert response.status_code == 400  # already ops: nothing would change
    else:
        assert response.status_code == 201
        assert response.json()["status"] == ChangeStatus.PROPOSED
        assert response.json()["edits"][0]["kind"] == "access"
        approve = api_client.post(reverse("api_change_approve", args=[response.json()["id"]]))
        assert approve.status_code == 403
    target.refresh_from_db()
    assert not target.is_superuser
    assert target.site_role == ("ops" if target_name == "ops" else "member")


def test_the_access_page_proposes_a_change(ops, member):
    client = login(ops)
    response = client.post(
        reverse("person_edit", args=[member.username]),
        {
            "site_role": "approver",
            "is_active": "on",
            "is_superuser": "on",  # disabled field: ignored
            "reason": "Rota",
            "change-observation_days": 0,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    member.refresh_from_db()
    assert member.site_role == SiteRole.MEMBER
    assert not member.is_superuser
    change = RuleChange.objects.get()
    assert change.author == ops
    assert change.status == ChangeStatus.PROPOSED
    assert [edit.field for edit in change.edits.all()] == ["site_role"]


@pytest.mark.parametrize("persona", ["member", "approver", "lead"])
def test_the_access_page_is_for_ops(request, world, member, persona):
    client = login(request.getfixturevalue(persona))
    assert client.get(reverse("person_edit", args=[member.username])).status_code == 403
    assert client.get(reverse("person_detail", args=[member.username])).status_code == 200


def test_there_is_no_token_admin(ops, member):
    services.personal_token_create(user=member, name="script", scopes=["read"])
    client = login(ops)
    index = client.get(reverse("admin:index")).content.decode()
    assert "authtoken" not in index
    assert "apitoken" not in index and "serviceaccount" not in index
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404
    assert client.get("/admin/authtoken/tokenproxy/add/").status_code == 404
