"""The home page (per role, what needs attention first) and the stored monthly reviews."""

import csv
import gzip
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import plotly
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache as django_cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from approvals import selectors as approval_selectors
from approvals.models import RequestState
from governance import selectors as governance
from governance.models import ProjectRole
from governance.toolkit.paging import paginate
from queues.services import REPLAYABLE, change_replay_start, change_replay_start_problem
from reports import selectors, services
from reports.forms import CompareForm, ReviewRequestForm
from reports.models import MonthlyReview
from reports.selectors import change_replay as replay_selectors
from reports.selectors import home_cache
from reports.selectors import stored_reviews as review_selectors
from reports.selectors.month_to_date import month_to_date_review
from reports.selectors.replay_models import replay_models

# plotly.js as the installed plotly package ships it: no CDN, and always the version the
# Python figures are built for.
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLOTLY_VERSION = plotly.__version__
# Rows of each list on the home page (the list's own page has the rest).
HOME_ROWS = 10
# How long the home page's kept parts live at most (a changed fingerprint replaces them first).
HOME_CACHE_SECONDS = 3600


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """What needs the reader's attention first. The parts read from the rules, requests and
    reviews are rendered once and kept until any of them changes (``home_cache``); a
    project's jobs and the grants in force are read on every request."""
    user = governance.signed_in_user(request)
    today = timezone.localdate()
    key = home_cache.home_cache_key(
        user_id=user.pk,
        language=get_language() or "",
        today=today,
        fingerprint=home_cache.home_fingerprint(),
    )
    kept = django_cache.get(key)
    if kept is None:
        kept = _home_attention(request, user, today)
        django_cache.set(key, kept, HOME_CACHE_SECONDS)
    summaries = selectors.project_summaries(user=user, memberships=kept["memberships"])
    led = [summary for summary in summaries if summary.is_lead]
    return render(
        request,
        "reports/home.html",
        {
            **kept,
            "led_projects": led,
            "member_projects": [summary for summary in summaries if not summary.is_lead],
            "latest_review": kept["latest_review"] if kept["is_ops"] or led else None,
        },
    )


def _home_attention(request: HttpRequest, user: Any, today: date) -> dict[str, Any]:
    """The home page's parts read from the rules, requests and reviews: its first sections
    rendered (``reports/includes/home_attention.html``), and what the rest needs of them."""
    context: dict[str, Any] = {"today": today, "is_ops": False}
    if governance.user_can_edit_rules(user):
        usage = governance.pool_usage()
        context.update(
            is_ops=True,
            usage=usage,
            plotly_src=reverse("plotly_js", args=[PLOTLY_VERSION]),
            due_tiers=list(governance.tiers_due_for_review(today=today)),
        )
    owned_tiers = list(governance.tiers_owned(user=user))
    context["show_owned_tiers"] = bool(owned_tiers or user.is_approver)
    if context["show_owned_tiers"]:
        # Ops have read every tier due: theirs are among them (one query fewer).
        due = context.get("due_tiers")
        context.update(
            owned_tiers=owned_tiers,
            owned_due=(
                [tier for tier in due if tier.owner_id == user.pk]
                if due is not None
                else list(governance.tiers_due_for_review(today=today).filter(owner=user))
            ),
        )
    memberships = list(governance.user_memberships(user=user))
    led = [m.project for m in memberships if m.role == ProjectRole.LEAD]
    context["latest_review"] = (
        review_selectors.latest_review() if context["is_ops"] or led else None
    )
    # Requests waiting for this person's decision (approvers, tier owners, ops) and, for a
    # lead, their projects' requests waiting for someone else's.
    waiting = approval_selectors.inbox(user=user)
    context["inbox"] = list(waiting[:HOME_ROWS])
    context["inbox_count"] = (
        waiting.count() if len(context["inbox"]) == HOME_ROWS else len(context["inbox"])
    )
    if led:
        context["led_waiting"] = list(
            approval_selectors.request_list_for(user=user, state=RequestState.SUBMITTED)
            .filter(project__in=led)
            .order_by("submitted_at", "pk")[:HOME_ROWS]
        )
    attention = render_to_string("reports/includes/home_attention.html", context, request)
    return {
        "attention": attention,
        "is_ops": context["is_ops"],
        "show_owned_tiers": context["show_owned_tiers"],
        "latest_review": context["latest_review"],
        "memberships": memberships,
    }


@login_required
@require_GET
def home_pool_usage(request: HttpRequest) -> JsonResponse:
    """The home page's chart of pool capacity against guarantees, loaded when it is shown
    (ops only; the same figures as the table beside it)."""
    user = governance.signed_in_user(request)
    if not governance.user_can_edit_rules(user):
        raise PermissionDenied
    usage = governance.pool_usage()
    return JsonResponse(selectors.pool_usage_figure(usage=usage))


@cache
def _plotly_js_gzip() -> bytes:
    return gzip.compress(PLOTLY_JS.read_bytes(), compresslevel=6, mtime=0)


@require_GET
def plotly_js(request: HttpRequest, version: str) -> HttpResponse:
    """plotly.js from the installed package, cached for a year (the URL names the version)."""
    if version != PLOTLY_VERSION:
        raise Http404
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(_plotly_js_gzip(), content_type="text/javascript")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(PLOTLY_JS.read_bytes(), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    response["Vary"] = "Accept-Encoding"
    return response


# ---------------------------------------------------------------------------- stored reviews


def _figure_context() -> dict[str, Any]:
    return {"plotly_src": reverse("plotly_js", args=[PLOTLY_VERSION])}


@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    """Every stored review (ops), or the built ones whose project views a lead may read; ops
    ask for a new one here."""
    user = governance.signed_in_user(request)
    reviews = review_selectors.review_list(user=user)
    form = ReviewRequestForm(request.POST or None) if user.is_ops else None
    status = 200
    if request.method == "POST":
        if form is None:
            raise PermissionDenied(_("Only ops may build a review."))
        if form.is_valid():
            start, end = form.cleaned_data["window"]
            pool, project = form.cleaned_data["pool"], form.cleaned_data["project"]
            try:
                review = services.review_request(
                    user=user,
                    start=start,
                    end=end,
                    pool=pool.slug if pool else "",
                    project=project.slug if project else "",
                )
            except ValidationError as error:
                # The window's errors belong to the field the person filled in: the month
                # when they gave one (not the empty "Last day").
                by_month = bool((form.cleaned_data.get("month") or "").strip())
                _add_errors(form, error, window_field="month" if by_month else "end")
                status = 400
            else:
                messages.success(request, _("The review is queued; this page shows its progress."))
                return redirect(review.get_absolute_url())
        else:
            status = 400
    page = paginate(request, reviews)
    led = sorted(review_selectors.led_project_slugs(user=user))
    links = review_selectors.review_project_links(led=led, reviews=page.object_list)
    for review in page.object_list:
        review.project_links = links.get(review.pk, [])
    context = {
        "reviews": page,
        "form": form,
        "led_projects": led,
        "is_ops": user.is_ops,
        "choices": review_selectors.review_choices() if user.is_ops else [],
    }
    return render(request, "reports/review_list.html", context, status=status)


def _add_errors(form: Any, error: ValidationError, *, window_field: str = "end") -> None:
    if hasattr(error, "error_dict"):
        for field, errors in error.error_dict.items():
            if field in ("start", "end"):
                field = window_field if field == "end" or window_field == "month" else field
            for message in errors:
                form.add_error(field if field in form.fields else None, message)
    else:
        for text in error.messages:
            form.add_error(None, text)


def _review_context(
    review: MonthlyReview,
    project: str | None,
    *,
    can_edit_rules: bool = True,
    absolute: Any = None,
) -> dict[str, Any]:
    metrics = review.project_metrics[project] if project else review.metrics
    tables = review_selectors.review_tables(metrics=metrics, project=project, human=True)
    figures = review_selectors.review_figures(metrics=metrics, project=project)
    return {
        "review": review,
        "project": project,
        "metrics": metrics,
        "tables": tables,
        "figures": figures,
        "findings": review_selectors.review_findings_shown(
            review=review,
            project=project,
            can_edit_rules=can_edit_rules,
            absolute=absolute,
        ),
        **_figure_context(),
    }


@login_required
def report_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The review's dashboard once built; before that, its progress (refreshing itself)."""
    user = governance.signed_in_user(request)
    review = review_selectors.review_get(user=user, pk=pk)
    if not review.is_built:
        return render(request, "reports/review_progress.html", {"review": review})
    context = _review_context(review, None, absolute=request.build_absolute_uri)
    trend = review_selectors.review_trend(review=review)
    context["tables"]["waits_trend"] = review_selectors.trend_table(trend)
    context["figures"]["waits_trend"] = review_selectors.trend_figure(trend)
    context["versions"] = review_selectors.review_versions(review=review)
    context["projects"] = review_selectors.review_projects(metrics=review.metrics)
    context["choices"] = [
        choice for choice in review_selectors.review_choices() if choice.pk != review.pk
    ]
    return render(request, "reports/review_detail.html", context)


@login_required
@require_GET
def report_month_to_date(request: HttpRequest) -> HttpResponse:
    """This month so far: the review's sections from the evidence up to the last full hour,
    computed now and never stored (not frozen); ops only, as the site's review."""
    user = governance.signed_in_user(request)
    if not review_selectors.user_can_read_reviews(user):
        raise PermissionDenied(_("Only ops read the whole review."))
    live = month_to_date_review()
    review = live.review
    metrics = review.metrics
    trend = review_selectors.review_trend(review=review)
    tables = review_selectors.review_tables(metrics=metrics, project=None, human=True)
    figures = review_selectors.review_figures(metrics=metrics, project=None)
    tables["waits_trend"] = review_selectors.trend_table(trend)
    figures["waits_trend"] = review_selectors.trend_figure(trend)
    context = {
        "review": review,
        "rollup_at": live.rollup_at,
        "metrics": metrics,
        "tables": tables,
        "figures": figures,
        "findings": review_selectors.review_findings_shown(
            review=review, absolute=request.build_absolute_uri
        ),
        **_figure_context(),
    }
    return render(request, "reports/review_month_to_date.html", context)


@login_required
def report_project(request: HttpRequest, pk: int, slug: str) -> HttpResponse:
    """One project's view of a review, for its leads (and ops)."""
    user = governance.signed_in_user(request)
    review = review_selectors.review_get(user=user, pk=pk, project=slug)
    if not review.is_built:
        return render(request, "reports/review_progress.html", {"review": review})
    context = _review_context(
        review, slug, can_edit_rules=user.is_ops, absolute=request.build_absolute_uri
    )
    context["project_name"] = next(
        (
            row["name"]
            for row in review.metrics["service"]["by_project"]
            + review.metrics["waits"]["by_project"]
            if row["project"] == slug
        ),
        slug,
    )
    return render(request, "reports/review_project.html", context)


@login_required
def report_print(request: HttpRequest, pk: int) -> HttpResponse:
    """The whole review on one printable page (tables and findings; print CSS)."""
    user = governance.signed_in_user(request)
    review = review_selectors.review_get(user=user, pk=pk)
    if not review.is_built:
        raise Http404(_("The review is not built yet."))
    return render(request, "reports/review_print.html", _review_context(review, None))


def _cell(value: Any) -> Any:
    """A CSV cell; text that a spreadsheet would run as a formula is quoted as text."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def csv_response(rows: list[list[Any]], filename: str) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.write("\ufeff")  # spreadsheets read the Chinese headers as UTF-8
    writer = csv.writer(response)
    writer.writerows([_cell(value) for value in row] for row in rows)
    return response


@login_required
def report_csv(
    request: HttpRequest, pk: int, key: str | None = None, slug: str | None = None
) -> HttpResponse:
    """The whole review as one CSV, or one figure's table (``key``); a project's view with
    ``slug``."""
    user = governance.signed_in_user(request)
    review = review_selectors.review_get(user=user, pk=pk, project=slug)
    if not review.is_built:
        raise Http404(_("The review is not built yet."))
    stem = f"review-{review.pk}-v{review.version}" + (f"-{slug}" if slug else "")
    if key is None:
        rows = review_selectors.review_csv_rows(review=review, project=slug)
        return csv_response(rows, f"{stem}.csv")
    metrics = review.project_metrics[slug] if slug else review.metrics
    tables = review_selectors.review_tables(metrics=metrics, project=slug)
    if key == "waits_trend" and slug is None:
        tables[key] = review_selectors.trend_table(review_selectors.review_trend(review=review))
    table = tables.get(key)
    if table is None:
        raise Http404(_("The review has no such table."))
    return csv_response([table.columns, *table.rows], f"{stem}-{key}.csv")


@login_required
def report_compare(request: HttpRequest) -> HttpResponse:
    """Two built reviews side by side, the changes highlighted."""
    user = governance.signed_in_user(request)
    form = CompareForm(request.GET)
    if not form.is_valid():
        return render(
            request,
            "reports/review_compare.html",
            {"form": form, "choices": review_selectors.review_choices()},
            status=400,
        )
    a = review_selectors.review_get(user=user, pk=form.cleaned_data["a"])
    b = review_selectors.review_get(user=user, pk=form.cleaned_data["b"])
    if not (a.is_built and b.is_built):
        form.add_error(None, _("Only built reviews can be compared."))
        return render(
            request,
            "reports/review_compare.html",
            {"form": form, "choices": review_selectors.review_choices()},
            status=400,
        )
    context = {
        "form": form,
        "a": a,
        "b": b,
        "sections": review_selectors.review_compare(a=a, b=b),
        "choices": review_selectors.review_choices(),
    }
    return render(request, "reports/review_compare.html", context)


# ---------------------------------------------------------------------------- change replay


@login_required
def change_replay(request: HttpRequest, pk: int) -> HttpResponse:
    """A rule change's what-if replay: "Replay this change" (POST) and the latest result, in
    force and with the change side by side (GET)."""
    change = governance.rule_change_get(user=request.user, pk=pk)
    if request.method == "POST":
        user = governance.signed_in_user(request)
        try:
            _run, queued = change_replay_start(change=change, user=user)
        except ValidationError as error:
            for message in error.messages:
                messages.error(request, message)
        else:
            messages.success(
                request,
                _("The replay is queued; this page shows its progress.")
                if queued
                else _("These inputs were replayed already: the stored run is shown."),
            )
        return redirect("change_replay", pk=change.pk)
    page = replay_selectors.change_replay_page(change=change)
    return render(
        request,
        "reports/change_replay.html",
        {
            "change": change,
            "page": page,
            "run": page.run,
            "models": replay_models(run=page.run),
            "replayable": change.status in REPLAYABLE,
            "may_start": change_replay_start_problem(change=change, user=request.user) is None,
            **_figure_context(),
        },
    )
