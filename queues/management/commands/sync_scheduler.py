"""``python manage.py sync_scheduler [--cluster NAME] [--dry-run]``: sync here and now."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues import services
from queues.models import Cluster, SyncStatus


class Command(BaseCommand):
    help = "Sync the effective rules to the enabled clusters (or one), or show the plan."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="Only this cluster (by name), even if disabled.")
        parser.add_argument("--dry-run", action="store_true", help="Show the plan; write nothing.")

    def handle(self, *args: Any, cluster: str | None, dry_run: bool, **options: Any) -> None:
        if cluster:
            clusters = list(Cluster.objects.filter(name=cluster))
            if not clusters:
                known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"No cluster named {cluster!r} (known: {known}).")
        else:
            clusters = list(Cluster.objects.filter(enabled=True))
            if not clusters:
                raise CommandError("No enabled cluster: add one on the Clusters page first.")
        failed = []
        for target in clusters:
            run = services.sync_now(cluster=target, user=None, dry_run=dry_run)
            self.stdout.write(f"{target.name}: {run.get_trigger_display()} #{run.pk}")
            for change in run.plan:
                self.stdout.write(f"  {change['action']:8} {change['kind']} {change['name']}")
                for item in change["fields"]:
                    self.stdout.write(
                        f"      {item['field']}: {item['live'] or '-'} -> {item['desired'] or '-'}"
                    )
                if change["note"]:
                    self.stdout.write(f"      {change['note']}")
            if run.status == SyncStatus.SUCCEEDED:
                summary = ", ".join(f"{k}={v}" for k, v in run.result.items() if k != "warnings")
                self.stdout.write(self.style.SUCCESS(f"  {run.get_status_display()}: {summary}"))
                for warning in run.result.get("warnings", []):
                    self.stdout.write(self.style.WARNING(f"  {warning}"))
            else:
                self.stderr.write(f"  {run.get_status_display()}: {run.error}")
                failed.append(target.name)
        if failed:
            raise CommandError(f"Sync failed for {', '.join(failed)}.")
