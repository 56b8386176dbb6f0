"""``python manage.py import_trace --format FORMAT FILE [--project-map KEY=SLUG ...]``.

Imports a public GPU-cluster trace as workload events. ``--project-map`` maps the trace's
group (openb: the QoS class; v2025: the app; Philly: the virtual cluster; ITP: the cluster)
onto project slugs, ``--tier-map`` the QoS class onto tier slugs; ``*`` is the default for
keys not named. See ``queues/services/workload/traces.py`` for what each format cannot give.
"""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.models import PriorityTier, Project
from queues.services.workload.traces import FORMATS, TraceError, TraceMapping, trace_import


def parse_map(values: list[str], option: str) -> dict[str, str]:
    result = {}
    for value in values:
        for pair in value.split(","):
            key, sep, slug = pair.partition("=")
            if not sep or not key.strip() or not slug.strip():
                raise CommandError(f"{option}: {pair!r} is not KEY=SLUG (use * for the default).")
            result[key.strip()] = slug.strip()
    return result


class Command(BaseCommand):
    help = "Import a GPU-cluster trace (Alibaba openb/v2025, Philly, ITP) as workload events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("file", help="The trace file (.csv or .csv.gz).")
        parser.add_argument(
            "--project-map", action="append", default=[], help="KEY=SLUG[,KEY=SLUG]; * = default."
        )
        parser.add_argument(
            "--tier-map", action="append", default=[], help="QOS=SLUG[,...]; * = default."
        )
        parser.add_argument(
            "--start",
            default="2026-01-01T00:00:00+00:00",
            help="The instant the trace's second 0 maps to (ISO 8601; not used by Philly).",
        )
        parser.add_argument(
            "--end",
            default="",
            help=(
                "The instant the trace's observation ends (ISO 8601; default: its latest time). "
                "Alibaba jobs still open then are closed there as censored."
            ),
        )
        parser.add_argument("--source", default="", help="Source name (default trace:FORMAT).")

    def handle(self, *args: Any, fmt: str, file: str, **options: Any) -> None:
        try:
            start = datetime.fromisoformat(options["start"])
        except ValueError:
            raise CommandError(f"--start: {options['start']!r} is not an ISO 8601 time.") from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        end = None
        if options["end"]:
            try:
                end = datetime.fromisoformat(options["end"])
            except ValueError:
                raise CommandError(f"--end: {options['end']!r} is not an ISO 8601 time.") from None
            if end.tzinfo is None:
                end = end.replace(tzinfo=UTC)
        projects = parse_map(options["project_map"], "--project-map")
        tiers = parse_map(options["tier_map"], "--tier-map")
        found_projects = Project.objects.in_bulk(set(projects.values()), field_name="slug")
        found_tiers = PriorityTier.objects.in_bulk(set(tiers.values()), field_name="slug")
        unknown = sorted(set(projects.values()) - set(found_projects)) + sorted(
            set(tiers.values()) - set(found_tiers)
        )
        if unknown:
            raise CommandError(f"No project or tier with the slug: {', '.join(unknown)}.")
        mapping = TraceMapping(
            projects={key: found_projects[slug] for key, slug in projects.items()},
            tiers={key: found_tiers[slug] for key, slug in tiers.items()},
        )
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"No file {file!r}.")
        try:
            result = trace_import(
                path=path,
                fmt=fmt,
                mapping=mapping,
                start=start,
                end=end,
                source=options["source"],
            )
        except TraceError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"{fmt}: {result.received} events read, {result.stored} stored, "
            f"{result.duplicates} already there; {result.jobs_created} jobs new, "
            f"{result.jobs_updated} updated."
        )
