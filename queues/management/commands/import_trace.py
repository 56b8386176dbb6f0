"""``python manage.py import_trace --format FORMAT FILE [--project-map KEY=SLUG ...]``.

Imports a public GPU-cluster trace as workload events. Each map takes ``KEY=SLUG`` pairs
(``*`` is the default for keys not named), keyed by what the trace has:

- ``--project-map``: openb the QoS class, v2025 the app, Philly the virtual cluster, ITP the
  cluster;
- ``--tier-map``: openb the QoS class, v2025 ``LS``; Philly and ITP have none (``*`` only);
- ``--pool-map``: Philly the virtual cluster, ITP the cluster; openb and v2025 are one
  cluster (``*`` only). Without it a job's pool is its project's quota pool for its flavor;
- ``--flavor-map``: openb the GPU model asked for (``gpu_spec``, mostly empty: ``*``); the
  other formats name none (``*`` only).

Before it writes, the command reads the whole file and says how many jobs each map leaves
without a project, tier, pool or flavor, and under which keys. It then refuses (exit 1,
nothing written) unless ``--allow-unmapped``; ``--dry-run`` only says it. Importing the same
file again stores no event twice and brings the stored jobs to the maps given now. See
``queues/services/workload/traces/`` for what each format cannot give.
"""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.models import GpuFlavor, Pool, PriorityTier, Project
from queues.services.workload.traces import (
    DIMENSIONS,
    FORMATS,
    TraceError,
    TraceMapping,
    TraceSummary,
    TraceUnmapped,
    trace_import,
)

MODELS = {"project": Project, "tier": PriorityTier, "pool": Pool, "flavor": GpuFlavor}


def parse_map(values: list[str], option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for value in values:
        for pair in value.split(","):
            key, sep, slug = pair.partition("=")
            if not sep or not key.strip() or not slug.strip():
                raise CommandError(f"{option}: {pair!r} is not KEY=SLUG (use * for the default).")
            if key.strip() in result and result[key.strip()] != slug.strip():
                raise CommandError(f"{option}: {key.strip()!r} is mapped twice.")
            result[key.strip()] = slug.strip()
    return result


def parse_time(value: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{option}: {value!r} is not an ISO 8601 time.") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def unmapped_lines(summary: TraceSummary) -> list[str]:
    lines = []
    for dimension in DIMENSIONS:
        count = summary.unmapped_jobs(dimension)
        if not count:
            continue
        keys = ", ".join(
            f"{key or '(none)'} ({jobs})"
            for key, jobs in summary.unmapped[dimension].most_common(10)
        )
        more = len(summary.unmapped[dimension]) - 10
        lines.append(
            f"  no {dimension} for {count} jobs; their keys: {keys}"
            + (f" and {more} more" if more > 0 else "")
            + f" (add --{dimension}-map KEY=SLUG, or * for all)"
        )
    return lines


class Command(BaseCommand):
    help = "Import a GPU-cluster trace (Alibaba openb/v2025, Philly, ITP) as workload events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("file", help="The trace file (.csv or .csv.gz).")
        for dimension, key in (
            ("project", "KEY"),
            ("tier", "QOS"),
            ("pool", "CLUSTER"),
            ("flavor", "MODEL"),
        ):
            parser.add_argument(
                f"--{dimension}-map",
                action="append",
                default=[],
                help=f"{key}=SLUG[,{key}=SLUG]; * = default.",
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
        parser.add_argument(
            "--allow-unmapped",
            action="store_true",
            help="Store jobs the maps leave without a project, tier, pool or flavor.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Read the file and say what it would store."
        )

    def handle(self, *args: Any, fmt: str, file: str, **options: Any) -> None:
        start = parse_time(options["start"], "--start")
        end = parse_time(options["end"], "--end") if options["end"] else None
        mapping = TraceMapping()
        unknown = []
        for dimension in DIMENSIONS:
            pairs = parse_map(options[f"{dimension}_map"], f"--{dimension}-map")
            found = MODELS[dimension]._default_manager.in_bulk(
                set(pairs.values()), field_name="slug"
            )
            unknown += [
                f"--{dimension}-map: no {dimension} {slug!r}"
                for slug in sorted(set(pairs.values()) - set(found))
            ]
            setattr(
                mapping,
                dimension + "s",
                {key: found[slug] for key, slug in pairs.items() if slug in found},
            )
        if unknown:
            raise CommandError("; ".join(unknown) + ".")
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"No file {file!r}.")
        try:
            summary = trace_import(
                path=path,
                fmt=fmt,
                mapping=mapping,
                start=start,
                end=end,
                source=options["source"],
                allow_unmapped=options["allow_unmapped"],
                dry_run=options["dry_run"],
                on_scanned=self.scanned,
            )
        except TraceUnmapped:
            raise CommandError(
                "Nothing written: the maps leave jobs unmapped (above). Add the maps, or "
                "--allow-unmapped to store them so."
            ) from None
        except TraceError as error:
            raise CommandError(str(error)) from None
        if not summary.written:
            self.stdout.write("Dry run: nothing written.")
            return
        result = summary.ingest
        self.stdout.write(
            f"{fmt}: {result.received} events read, {result.stored} stored, "
            f"{result.duplicates} already there; {result.jobs_created} jobs new, "
            f"{result.jobs_updated} updated; {summary.remapped} stored jobs remapped."
        )

    def scanned(self, summary: TraceSummary) -> None:
        """What the file holds and what the maps leave out, said before anything is written."""
        end = f"; trace end {summary.end.isoformat()}" if summary.end else ""
        self.stdout.write(
            f"Read {summary.jobs} jobs: {summary.censored} still open at the trace's end "
            f"(closed there as censored), {summary.waits_not_recorded} without a recorded "
            f"wait{end}."
        )
        lines = unmapped_lines(summary)
        if lines:
            self.stdout.write("Unmapped:")
            for line in lines:
                self.stdout.write(line)
        else:
            self.stdout.write("Every job has a project, tier, pool and flavor.")
