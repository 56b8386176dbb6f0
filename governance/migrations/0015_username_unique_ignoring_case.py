"""Usernames unique whatever their case, after Unicode NFKC normalisation.

Existing data first: every username is NFKC-normalised; where two accounts then share a
username ignoring case (``Ops`` beside ``ops``), the oldest keeps it and each other one is
renamed ``<username>-<id>``. Each account renamed gets a history row (signed by Arbiter's
own account, the reason naming the rule), then the database constraint is added. Nothing is
deleted; going back removes the constraint and keeps the new names.
"""

import unicodedata

import django.db.models.functions.text
from django.db import migrations, models
from django.utils import timezone

SYSTEM_USERNAME = "arbiter"  # governance.services.grants.SYSTEM_USERNAME
REASON = (
    "Usernames are unique whatever their case, after Unicode NFKC normalisation: "
    "%(old)r became %(new)r"
)


def _free(taken: set[str], wanted: str, pk: int) -> str:
    name = unicodedata.normalize("NFKC", wanted)
    if name.lower() not in taken:
        return name
    candidate = f"{name}-{pk}"[:150]
    suffix = 1
    while candidate.lower() in taken:
        candidate = f"{name}-{pk}-{suffix}"[:150]
        suffix += 1
    return candidate


def normalise_usernames(apps, schema_editor):
    User = apps.get_model("governance", "User")
    Historical = apps.get_model("governance", "HistoricalUser")
    history_fields = {field.attname for field in Historical._meta.concrete_fields}
    user_fields = [
        field.attname
        for field in User._meta.concrete_fields
        if field.attname in history_fields and field.attname != "history_id"
    ]
    taken: set[str] = set()
    renamed = []
    for user in User.objects.order_by("pk"):
        new = _free(taken, user.username, user.pk)
        taken.add(new.lower())
        if new != user.username:
            renamed.append((user, user.username, new))
    if not renamed:
        return
    system = User.objects.filter(username=SYSTEM_USERNAME).first()
    if system is None:
        system = User.objects.create(
            username=SYSTEM_USERNAME, first_name="Arbiter", password="!", site_role="member"
        )
    now = timezone.now()
    # Renamed in two steps, so that no intermediate name clashes with another's old one.
    for user, _old, _new in renamed:
        user.username = f"~renaming~{user.pk}"
        user.save(update_fields=["username"])
    for user, old, new in renamed:
        user.username = new
        user.save(update_fields=["username"])
        Historical.objects.create(
            **{name: getattr(user, name) for name in user_fields},
            history_date=now,
            history_type="~",
            history_user_id=system.pk,
            history_change_reason=REASON % {"old": old, "new": new},
        )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("governance", "0014_provider_identity"),
    ]

    operations = [
        migrations.RunPython(normalise_usernames, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="user",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.Lower("username"),
                name="user_username_unique_ignoring_case",
                violation_error_message=(
                    "A user with that username already exists (usernames are unique whatever "
                    "their case, after Unicode NFKC normalisation)."
                ),
            ),
        ),
    ]
