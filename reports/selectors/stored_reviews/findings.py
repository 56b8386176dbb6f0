"""The review's frozen findings in the reader's words, with their links."""

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _

from reports.models import MonthlyReview
from reports.selectors.findings import finding_text, finding_title


def _url(name: str, args: list[Any]) -> str | None:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


# The most of a finding a proposed change's reason carries (its field holds 1,000 characters).
REASON_LENGTH = 900


def review_findings_shown(
    *,
    review: MonthlyReview,
    project: str | None = None,
    can_edit_rules: bool = True,
    absolute: Callable[[str], str] | None = None,
) -> list[dict[str, Any]]:
    """The frozen findings in words, with their links (only ``project``'s when given). Ops
    propose a rule change on the rule's edit page; a lead (``can_edit_rules`` false) asks for
    one with a request for the project.

    The proposal's link carries the finding (``?reason=``: the rule pages prefill their
    reason with it): its title, its figures in words and the address of its evidence
    (``absolute`` makes it a full address, a link on the change's page). A review not stored
    (this month so far: no ``pk``) links its evidence within its own page."""
    shown = []
    for finding in review.findings:
        if project is not None and finding.get("project") != project:
            continue
        evidence = finding["evidence"]
        if evidence["url"] == "report_detail":
            # The section of the dashboard (of the project's view, which shows lending with
            # its service) that holds the numbers.
            anchor = evidence["anchor"]
            if project is None and review.pk is None:
                evidence_url = f"#{anchor}"
            elif project is None:
                evidence_url = reverse("report_detail", args=[review.pk]) + f"#{anchor}"
            else:
                evidence_url = "#" + ("service" if anchor == "lending" else anchor)
        else:
            evidence_url = _url(evidence["url"], evidence["args"]) or ""
        propose = finding.get("propose")
        if propose and not can_edit_rules:
            slug = finding.get("project") or project
            propose = None
            if slug:
                propose = {"url": "request_create", "args": [], "query": f"?project={slug}"}
        title, text = finding_title(finding), finding_text(finding)
        propose_url = None
        if propose:
            propose_url = (_url(propose["url"], propose["args"]) or "") + propose.get("query", "")
            if review.pk is None:
                page = reverse("report_month_to_date")
            elif project is not None:  # the page its reader reads (a lead: their project's)
                page = reverse("report_project", args=[review.pk, project])
            else:
                page = review.get_absolute_url()
            evidence = page + evidence_url if evidence_url.startswith("#") else evidence_url
            link = absolute(evidence) if absolute else evidence
            reason = _("Finding of the review %(review)s (%(link)s): %(title)s. %(text)s") % {
                "review": review.window_label,
                "title": title,
                "text": text,
                "link": link,
            }
            if len(reason) > REASON_LENGTH:
                reason = reason[: REASON_LENGTH - 1] + "…"
            glue = "&" if "?" in propose_url else "?"
            propose_url += glue + urlencode({"reason": reason})
        shown.append(
            {
                "kind": finding["kind"],
                "title": title,
                "text": text,
                "evidence_url": evidence_url,
                "propose_url": propose_url,
            }
        )
    return shown
