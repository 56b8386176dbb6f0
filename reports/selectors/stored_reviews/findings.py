"""The review's frozen findings in the reader's words, with their links."""

from typing import Any

from django.urls import NoReverseMatch, reverse

from reports.models import MonthlyReview
from reports.selectors.findings import finding_text, finding_title


def _url(name: str, args: list[Any]) -> str | None:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def review_findings_shown(
    *, review: MonthlyReview, project: str | None = None, can_edit_rules: bool = True
) -> list[dict[str, Any]]:
    """The frozen findings in words, with their links (only ``project``'s when given). Ops
    propose a rule change on the rule's edit page; a lead (``can_edit_rules`` false) asks for
    one with a request for the project."""
    shown = []
    for finding in review.findings:
        if project is not None and finding.get("project") != project:
            continue
        evidence = finding["evidence"]
        if evidence["url"] == "report_detail":
            # The section of the dashboard (of the project's view, which shows lending with
            # its service) that holds the numbers.
            anchor = evidence["anchor"]
            if project is None:
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
        shown.append(
            {
                "kind": finding["kind"],
                "title": finding_title(finding),
                "text": finding_text(finding),
                "evidence_url": evidence_url,
                "propose_url": (
                    (_url(propose["url"], propose["args"]) or "") + propose.get("query", "")
                    if propose
                    else None
                ),
            }
        )
    return shown
