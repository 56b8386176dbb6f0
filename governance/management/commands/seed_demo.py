"""``manage.py seed_demo``: load the demo organisation (idempotent)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance import services
from governance.services.demo import DEMO_PASSWORD


class Command(BaseCommand):
    help = (
        "Load a demo organisation: people, two pools, three GPU flavors, four tiers, three "
        "preemption classes, twelve projects and their quotas. Safe to run again: what "
        "exists is left alone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--password",
            default=DEMO_PASSWORD,
            help="Password of the demo users created by this run (default: %(default)s).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        created = services.demo_seed(password=options["password"])
        if not created:
            self.stdout.write("Demo data already loaded; nothing to add.")
            return
        summary = ", ".join(f"{count} {kind}" for kind, count in created.items())
        self.stdout.write(self.style.SUCCESS(f"Demo data loaded: {summary}."))
