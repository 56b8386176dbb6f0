"""``manage.py seed_demo_approvals``: demo policies and requests (idempotent; after seed_demo and
seed_demo_workload: each request's evidence is fixed when it is submitted, from the job
history there is then)."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from approvals import services


class Command(BaseCommand):
    help = (
        "Load demo approval policies and requests: pending requests in the approvers' inboxes, "
        "an active grant that ends within a day, a rejected request. Run after seed_demo. "
        "Safe to run again: what exists is left alone."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            created = services.demo_approvals_seed()
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        if not created:
            self.stdout.write("Demo approvals already loaded; nothing to add.")
            return
        summary = ", ".join(f"{count} {kind}" for kind, count in created.items())
        self.stdout.write(self.style.SUCCESS(f"Demo approvals loaded: {summary}."))
