"""The home page: per role, what needs attention first."""

import gzip
from functools import cache
from pathlib import Path

import plotly
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from governance import selectors as governance
from reports import selectors

# plotly.js as the installed plotly package ships it: no CDN, and always the version the
# Python figures are built for.
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLOTLY_VERSION = plotly.__version__


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = governance.signed_in_user(request)
    today = timezone.localdate()
    context: dict = {"today": today}
    if governance.user_can_edit_rules(user):
        usage = governance.pool_usage()
        context.update(
            is_ops=True,
            usage=usage,
            usage_figure=selectors.pool_usage_figure(usage=usage) if usage else None,
            plotly_src=reverse("plotly_js", args=[PLOTLY_VERSION]),
            due_tiers=governance.tiers_due_for_review(today=today),
        )
    owned_tiers = list(governance.tier_list().filter(owner=user))
    if owned_tiers or user.is_approver:
        context.update(
            owned_tiers=owned_tiers,
            show_owned_tiers=True,
            owned_due=governance.tiers_due_for_review(today=today).filter(owner=user),
        )
    summaries = selectors.project_summaries(user=user)
    context.update(
        led_projects=[summary for summary in summaries if summary.is_lead],
        member_projects=[summary for summary in summaries if not summary.is_lead],
    )
    return render(request, "reports/home.html", context)


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
