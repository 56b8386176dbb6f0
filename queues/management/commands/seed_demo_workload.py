"""``manage.py seed_demo_workload [--days 90]``: the demo's job history (idempotent; after
seed_demo)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.models import Quota
from queues.services.workload.demo import demo_workload_seed


class Command(BaseCommand):
    help = (
        "Load the demo projects' job history through the ingest path: a generated workload "
        "replayed under the demo's own rules (tier order, guarantees, caps, preemption "
        "classes, grants), with jobs running and waiting now. Run after seed_demo; running "
        "it again stores nothing twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=90, help="Days of history (1-365).")

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        if not 1 <= days <= 365:
            raise CommandError("--days must be between 1 and 365.")
        if not Quota.objects.exists():
            raise CommandError("No project has a quota: run seed_demo first.")
        result = demo_workload_seed(days=days)
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo workload: {result.stored} events stored ({result.duplicates} already "
                f"there), {result.jobs_created} jobs new."
            )
        )
