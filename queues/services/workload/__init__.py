"""Workload evidence: classify why jobs wait, record their events, collect them from Slurm."""

from .classify import QuotaPosition, Verdict, classify
from .ingest import IngestResult, JobEvent, events_ingest

__all__ = ["IngestResult", "JobEvent", "QuotaPosition", "Verdict", "classify", "events_ingest"]
