"""The reports app's API: a stored review's build status (what the progress page shows), its
figures (the same tables as the page) and its CSV."""

from typing import Any

from django.http import Http404, HttpResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.selectors import rule_change_get
from governance.toolkit.api import NOT_FOUND
from reports.selectors.change_replay import change_replay_page
from reports.selectors.replay_models import replay_models
from reports.selectors.replay_trigger import verdict_json
from reports.selectors.stored_reviews import review_csv_rows, review_get, review_tables
from reports.views import csv_response


class ReviewStatusApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField(help_text=gettext_lazy("queued, building, done or failed"))
        progress = serializers.IntegerField(help_text=gettext_lazy("Percent done (0-100)."))
        version = serializers.IntegerField()
        built_at = serializers.DateTimeField(allow_null=True)
        error = serializers.CharField()
        url = serializers.SerializerMethodField()

        class Meta:
            ref_name = "ReviewStatus"

        def get_url(self, obj: Any) -> str:
            return str(obj.get_absolute_url())

    @extend_schema(
        operation_id="reviews_status_retrieve",
        tags=["reviews"],
        summary=gettext_lazy("The build status of a stored monthly review (ops)"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "Building",
                value={
                    "id": 7,
                    "status": "building",
                    "progress": 40,
                    "version": 2,
                    "built_at": None,
                    "error": "",
                    "url": "/monthly-reviews/7/",
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, pk: int) -> Response:
        review = review_get(user=request.user, pk=pk)
        return Response(self.OutputSerializer(review).data)


PROJECT_PARAMETER = OpenApiParameter(
    "project",
    str,
    description=gettext_lazy("A project's view of the review (its slug): for ops and its leads."),
)


def _built(request: Request, pk: int) -> tuple[Any, str | None]:
    project = request.query_params.get("project", "").strip() or None
    review = review_get(user=request.user, pk=pk, project=project)
    if not review.is_built:
        raise Http404(_("The review is not built yet."))
    return review, project


class ReviewFiguresApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        start = serializers.DateTimeField()
        end = serializers.DateTimeField()
        pool = serializers.CharField()
        project = serializers.CharField()
        version = serializers.IntegerField()
        built_at = serializers.DateTimeField(allow_null=True)
        tables = serializers.DictField(
            child=serializers.DictField(),
            help_text=gettext_lazy(
                "Every table of the page, by key: title, columns and rows (the numbers beside "
                "each chart, as the CSV has them)."
            ),
        )
        findings = serializers.ListField(child=serializers.DictField())

        class Meta:
            ref_name = "ReviewFigures"

    @extend_schema(
        operation_id="monthly_reviews_retrieve",
        tags=["reviews"],
        summary=gettext_lazy("A built monthly review's figures: the same tables as its page"),
        parameters=[PROJECT_PARAMETER],
        responses={200: OutputSerializer, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "A month",
                value={
                    "id": 7,
                    "start": "2026-10-01T00:00:00Z",
                    "end": "2026-11-01T00:00:00Z",
                    "pool": "",
                    "project": "",
                    "version": 1,
                    "built_at": "2026-11-01T02:00:00Z",
                    "tables": {
                        "waits_by_tier": {
                            "title": "Waits by tier",
                            "columns": ["Tier", "Jobs", "p50 (min)", "p90 (min)"],
                            "rows": [["Production service", 1134, 1.0, 9.4]],
                        }
                    },
                    "findings": [],
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, pk: int) -> Response:
        review, project = _built(request, pk)
        metrics = review.project_metrics[project] if project else review.metrics
        tables = review_tables(metrics=metrics, project=project)
        data = {
            "id": review.pk,
            "start": review.start,
            "end": review.end,
            "pool": review.pool,
            "project": project or review.project,
            "version": review.version,
            "built_at": review.built_at,
            "tables": {
                key: {"title": str(t.title), "columns": [str(c) for c in t.columns], "rows": t.rows}
                for key, t in tables.items()
            },
            "findings": [
                finding
                for finding in review.findings
                if project is None or finding.get("project") in (None, "", project)
            ],
        }
        return Response(self.OutputSerializer(data).data)


class ReviewCsvApi(APIView):
    @extend_schema(
        operation_id="monthly_reviews_csv_retrieve",
        tags=["reviews"],
        summary=gettext_lazy("A built monthly review as one CSV (every table, as the page's)"),
        parameters=[PROJECT_PARAMETER],
        responses={(200, "text/csv"): OpenApiTypes.STR, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "A month",
                value="section,Tier,Jobs,p50 (min)\nwaits_by_tier,Production service,1134,1.0\n",
                response_only=True,
                media_type="text/csv",
            )
        ],
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        review, project = _built(request, pk)
        stem = f"review-{review.pk}-v{review.version}" + (f"-{project}" if project else "")
        # The same CSV as the page's download (formula-looking text quoted).
        return csv_response(review_csv_rows(review=review, project=project), f"{stem}.csv")


class ChangeReplayFiguresApi(APIView):
    """The figures of a rule change's latest finished replay: what its page shows."""

    class OutputSerializer(serializers.Serializer):
        replay = serializers.IntegerField(help_text=gettext_lazy("The replay run's id."))
        change = serializers.IntegerField()
        start = serializers.CharField()
        end = serializers.CharField()
        groups = serializers.DictField(
            child=serializers.ListField(child=serializers.DictField()),
            help_text=gettext_lazy(
                "'all', 'tiers' and 'projects': per group its slug, name and cells (label, in "
                "force, with the change, the change and its verdict: better, worse, same, "
                "neutral or unknown), as on the page."
            ),
        )
        waits = serializers.DictField(
            child=serializers.DictField(),
            help_text=gettext_lazy(
                "'in_force' and 'with_change': the monthly review's waits of the replayed "
                "jobs (overall, by tier, project, pool, flavor, category and day), computed by "
                "the review's own queries."
            ),
        )
        rollback = serializers.DictField(
            allow_null=True,
            help_text=gettext_lazy(
                "The change's own rollback trigger evaluated on this replay: the trigger, "
                "whether it would have fired (triggered; null with a problem when it cannot "
                "be evaluated), the figure in force and with the change, the value compared, "
                "the threshold, its unit and the margin past it (negative: short of it); null "
                "when the change has no rollback trigger."
            ),
        )
        models = serializers.ListField(
            child=serializers.DictField(),
            help_text=gettext_lazy(
                "Per cluster, the scheduler model that replayed its jobs: the cluster (empty "
                "for jobs of no cluster), its scheduler, the model (slurm, kueue or engine), "
                "the jobs, why the generic engine ran when it did (fallback: no_cluster, "
                "no_model or lacks, with the reason and the rules the model lacks) and the "
                "rules in use the model does not model."
            ),
        )

        class Meta:
            ref_name = "ChangeReplayFigures"

    @extend_schema(
        operation_id="changes_replay_figures_retrieve",
        tags=["changes"],
        summary=gettext_lazy("The figures of a rule change's latest finished replay"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "A replay",
                value={
                    "replay": 7,
                    "change": 12,
                    "start": "2026-10-31T00:00:00+00:00",
                    "end": "2026-11-30T00:00:00+00:00",
                    "groups": {
                        "all": [],
                        "tiers": [],
                        "projects": [
                            {
                                "slug": "medical-imaging",
                                "name": "Medical imaging",
                                "cells": [
                                    {
                                        "label": "p90 wait (min)",
                                        "in_force": 496.0,
                                        "with_change": 24.8,
                                        "change": -471.2,
                                        "verdict": "better",
                                    }
                                ],
                            }
                        ],
                    },
                    "waits": {"in_force": {}, "with_change": {}},
                    "rollback": None,
                    "models": [
                        {
                            "cluster": "hpc",
                            "scheduler": "slurm",
                            "model": "slurm",
                            "model_label": "Slurm model (main scheduler and backfill)",
                            "jobs": 1200,
                            "fallback": "",
                            "fallback_reason": "",
                            "fallback_rules": [],
                            "not_modelled": ["lending limits"],
                        }
                    ],
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, pk: int) -> Response:
        change = rule_change_get(user=request.user, pk=pk)
        page = change_replay_page(change=change)
        if page.run is None or not page.waits:
            raise Http404(_("This change has no finished replay."))
        result = page.run.result or {}

        def groups(items: list[Any]) -> list[dict[str, Any]]:
            return [
                {
                    "slug": group.slug,
                    "name": str(group.name),
                    "cells": [
                        {
                            "label": str(cell.label),
                            "in_force": cell.before,
                            "with_change": cell.after,
                            "change": cell.change,
                            "verdict": cell.verdict,
                        }
                        for cell in group.cells
                    ],
                }
                for group in items
            ]

        data = {
            "replay": page.run.pk,
            "change": change.pk,
            "start": result.get("start", ""),
            "end": result.get("end", ""),
            "groups": {
                "all": groups(page.overall),
                "tiers": groups(page.tiers),
                "projects": groups(page.projects),
            },
            "waits": page.waits,
            "rollback": verdict_json(page.rollback),
            "models": [model.as_json() for model in replay_models(run=page.run)],
        }
        return Response(self.OutputSerializer(data).data)
