"""Who submitted a request (ops may submit someone's draft, and then count as its author for
four eyes); filled for the requests already submitted from their "submitted" event."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _from_events(apps, schema_editor):
    request_model = apps.get_model("approvals", "UpgradeRequest")
    event_model = apps.get_model("approvals", "RequestEvent")
    submitter = event_model.objects.filter(
        request=models.OuterRef("pk"), action="submitted"
    ).values("actor")[:1]
    # A new column filled from the timeline: no rule and no history row changes.
    request_model.objects.filter(submitted_at__isnull=False).update(
        submitted_by=models.Subquery(submitter)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_idempotency_key"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="historicalupgraderequest",
            name="submitted_by",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="submitted by",
            ),
        ),
        migrations.AddField(
            model_name="upgraderequest",
            name="submitted_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="submitted by",
            ),
        ),
        migrations.RunPython(_from_events, migrations.RunPython.noop),
    ]
