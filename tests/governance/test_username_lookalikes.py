"""Usernames are unique whatever their case, after Unicode NFKC normalisation: a provider
account never becomes ``Ops`` beside ``ops`` (nor a full-width ``ｏｐｓ``), an account made by
hand is refused naming the rule, the database refuses what slips past, and pickers show the
username beside the name (two "Sam Okafor" stay two people)."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from governance import forms, services
from governance.models import User
from tests.conftest import REASON

pytestmark = pytest.mark.django_db
ISSUER = "https://id.example.com"
RULE = "usernames are unique whatever their case, after Unicode NFKC normalisation"


@pytest.mark.parametrize("claimed", ["Ops", "OPS", "ｏｐｓ", "Ｏｐｓ"])
def test_a_provider_account_never_becomes_a_look_alike_of_ops(ops, claimed):
    person = services.identity_sign_in(
        issuer=ISSUER,
        claims={"sub": f"s-{claimed}", "preferred_username": claimed, "groups": []},
    )
    assert person.username.lower() != "ops"
    assert person.username.lower().startswith("ops-")  # the claim, NFKC, with a digest
    assert User.objects.filter(username__iexact="ops").get() == ops


def test_an_account_made_by_hand_is_refused_naming_the_rule(ops):
    with pytest.raises(ValidationError) as refused:
        services.user_create(user=ops, reason=REASON, username="OPS")
    assert RULE in " ".join(refused.value.messages)
    with pytest.raises(ValidationError) as refused:
        services.user_create(user=ops, reason=REASON, username="ｏｐｓ")
    assert RULE in " ".join(refused.value.messages)
    # Normalised as it is saved: full-width letters are stored as plain ones.
    made = services.user_create(user=ops, reason=REASON, username="ｓａｍ")
    assert made.username == "sam"


def test_the_database_refuses_what_skips_the_services(ops):
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create(username="oPs")


def test_the_admins_add_form_says_so(ops, client: Client):
    ops.is_staff = ops.is_superuser = True
    ops.save()
    client.force_login(ops)
    response = client.post(
        reverse("admin:governance_user_add"),
        {"username": "OPS", "reason": REASON, "email": ""},
    )
    assert response.status_code == 200
    assert RULE in response.content.decode()
    assert User.objects.filter(username__iexact="ops").count() == 1


def test_pickers_show_the_username_beside_the_name(world, member, outsider, api_client):
    for person in (member, outsider):
        person.first_name, person.last_name = "Sam", "Okafor"
        person.save()
    api_client.force_authenticate(member)
    found = api_client.get(reverse("api_lookup", args=["users"]), {"q": "Sam"}).data
    labels = sorted(row["label"] for row in found["results"])
    assert labels == ["Sam Okafor (member)", "Sam Okafor (outsider)"]
    for person in (member, outsider):
        services.membership_set(
            project=world.vision, member=person, role="member", user=world.ops, reason=REASON
        )
    form = forms.MembershipRemoveForm(project=world.vision)
    choices = [str(label) for _value, label in form.fields["membership"].choices]
    assert "Sam Okafor (member), Member" in choices
    assert "Sam Okafor (outsider), Member" in choices


@pytest.mark.django_db(transaction=True)
def test_the_migration_renames_look_alikes_keeping_the_oldest_with_a_history_row():
    before = [("governance", "0014_provider_identity")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    OldUser = old.get_model("governance", "User")
    first = OldUser.objects.create(username="ops", password="!")
    second = OldUser.objects.create(username="Ops", password="!")
    third = OldUser.objects.create(username="ｗｅｉ", password="!")
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    names = dict(User.objects.values_list("pk", "username"))
    assert names[first.pk] == "ops"
    assert names[second.pk] == f"Ops-{second.pk}"
    assert names[third.pk] == "wei"
    row = User.objects.get(pk=second.pk).history.first()
    assert row.history_user.username == "arbiter"
    assert "unique whatever their case" in row.history_change_reason
    assert "'Ops' became" in row.history_change_reason
    assert not User.objects.get(pk=first.pk).history.exists()  # the oldest is untouched
