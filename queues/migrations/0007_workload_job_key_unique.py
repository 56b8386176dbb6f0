"""Jobs are unique per ``(source, key)`` (filled by 0006); the job id stays indexed for search;
a project's recent waits read ``(project, submitted_at)``."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("queues", "0006_workload_job_key")]

    operations = [
        migrations.RemoveConstraint(model_name="workloadjob", name="job_unique_per_source"),
        migrations.AddConstraint(
            model_name="workloadjob",
            constraint=models.UniqueConstraint(
                fields=("source", "key"), name="job_key_unique_per_source"
            ),
        ),
        migrations.AddIndex(
            model_name="workloadjob",
            index=models.Index(fields=["source", "job_id"], name="job_source_job_id"),
        ),
        migrations.AddIndex(
            model_name="workloadjob",
            index=models.Index(fields=["project", "submitted_at"], name="job_project_submitted"),
        ),
    ]
