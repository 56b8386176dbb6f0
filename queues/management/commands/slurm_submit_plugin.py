"""``python manage.py slurm_submit_plugin [--output FILE]``: Arbiter's Slurm job_submit plugin.

Ops install it once beside slurm.conf as ``job_submit.lua`` (with ``JobSubmitPlugins=lua``);
the rules reach it through the table each sync writes (see queues/services/slurm/submit.py).
"""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues.services.slurm.submit import plugin_source, plugin_version


class Command(BaseCommand):
    help = "Print (or write) Arbiter's Slurm job_submit.lua plugin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", help="Write the plugin to this file instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        source = plugin_source()
        if not options["output"]:
            self.stdout.write(source, ending="")
            return
        target = Path(options["output"])
        if not target.parent.is_dir():
            raise CommandError(f"The directory {target.parent} does not exist.")
        try:
            target.write_text(source, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"Cannot write {target}: {error.strerror}") from error
        self.stderr.write(f"Wrote {plugin_version(source)} to {target}.")
