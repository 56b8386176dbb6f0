"""A job's identity includes its submit time where the scheduler reuses ids.

Slurm restarts its job ids after its state is reset, so ``(source, job_id)`` no longer names
one job: jobs get a ``key`` unique per source, ``<id>@<submit epoch>`` for jobs the Slurm
collector recorded (and their events' ids follow), the job id for every other source.
"""

from django.db import migrations, models
from django.db.models import Value
from django.db.models.functions import Concat, Substr


def fill_keys(apps, schema_editor):
    Job = apps.get_model("queues", "WorkloadJob")
    Event = apps.get_model("queues", "WorkloadEvent")
    slurm = Job.objects.filter(cluster__backend="slurm", submitted_at__isnull=False)
    for job in slurm.only("pk", "job_id", "submitted_at").iterator():
        key = f"{job.job_id}@{int(job.submitted_at.timestamp())}"
        Job.objects.filter(pk=job.pk).update(key=key)
        # The collector's event ids start with the job id: they now start with the key.
        Event.objects.filter(job_id=job.pk, event_id__startswith=f"{job.job_id}:").update(
            event_id=Concat(Value(key), Substr("event_id", len(job.job_id) + 1))
        )
    Job.objects.filter(key="").update(key=models.F("job_id"))


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0008_project_name_index"),
        ("queues", "0005_merge_workload_evidence"),
    ]

    operations = [
        migrations.AddField(
            model_name="workloadjob",
            name="key",
            field=models.CharField(
                default="",
                help_text=(
                    "The job's identity within its source: the scheduler's job id, with the "
                    "submit time where the scheduler reuses ids (Slurm: <id>@<submit epoch>)."
                ),
                max_length=250,
                verbose_name="job key",
            ),
            preserve_default=False,
        ),
        migrations.RunPython(fill_keys, migrations.RunPython.noop),
    ]
