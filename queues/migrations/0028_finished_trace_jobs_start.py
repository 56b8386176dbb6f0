from django.db import migrations
from django.db.models import F

# The formats whose files have no start times (queues/services/workload/traces.py): their
# jobs, imported before a start was recorded for them, ran no GPU-second in the rollup. They
# start at their submit, as an import now records them; their rollups are reread once.
NO_START_TIMES = ("trace:philly", "trace:itp")


def start_at_submit(apps, schema_editor):
    jobs = apps.get_model("queues", "WorkloadJob")
    rollups = apps.get_model("queues", "WorkloadJobRollup")
    fixed = jobs.objects.filter(
        source__in=NO_START_TIMES,
        started_at__isnull=True,
        submitted_at__isnull=False,
        ended_at__isnull=False,
    )
    ids = list(fixed.values_list("pk", flat=True))
    for offset in range(0, len(ids), 2000):
        chunk = ids[offset : offset + 2000]
        jobs.objects.filter(pk__in=chunk).update(started_at=F("submitted_at"))
        rollups.objects.filter(job_id__in=chunk).update(open=True)


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0027_cluster_submit_table_pull"),
    ]

    operations = [
        migrations.RunPython(start_at_submit, migrations.RunPython.noop),
    ]
