"""``python manage.py sync_scheduler [--cluster NAME] [--dry-run] [--force-conflicts]``:
sync here and now; ``--cluster NAME --export DIR`` writes the cluster's Kueue objects as
YAML files into DIR (GitOps) instead, touching no cluster."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues import services
from queues.models import Cluster, SyncStatus


class Command(BaseCommand):
    help = "Sync the effective rules to the enabled clusters (or one), or show the plan."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="Only this cluster (by name), even if disabled.")
        parser.add_argument("--dry-run", action="store_true", help="Show the plan; write nothing.")
        parser.add_argument(
            "--force-conflicts",
            action="store_true",
            help="Kueue: apply every object forced. A plain sync already takes back the fields "
            "of Arbiter's own objects; objects Arbiter did not make are never applied.",
        )
        parser.add_argument(
            "--export",
            metavar="DIR",
            help="Write the Kueue objects of --cluster as YAML files into DIR; sync nothing.",
        )

    def handle(
        self,
        *args: Any,
        cluster: str | None,
        dry_run: bool,
        force_conflicts: bool = False,
        export: str | None = None,
        **options: Any,
    ) -> None:
        if export is not None:
            self._export(cluster, export)
            return
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
            run = services.sync_now(
                cluster=target, user=None, dry_run=dry_run, force_conflicts=force_conflicts
            )
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

    def _export(self, cluster: str | None, directory: str) -> None:
        if not cluster:
            raise CommandError("--export needs --cluster NAME.")
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No cluster named {cluster!r} (known: {known}).")
        if not Path(directory).is_dir():
            raise CommandError(f"The export directory {directory!r} does not exist.")
        try:
            result = services.sync_export(cluster=target, directory=directory)
        except services.SchedulerError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            self.style.SUCCESS(
                f"{target.name}: {len(result.written)} written, {len(result.unchanged)} "
                f"unchanged, {len(result.removed)} removed in {directory}"
            )
        )
        for name in result.written:
            self.stdout.write(f"  wrote   {name}")
        for name in result.removed:
            self.stdout.write(f"  removed {name}")
