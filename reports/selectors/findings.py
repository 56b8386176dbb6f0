"""Findings in words, drawn from a review's metrics at build time (and frozen with it).

A finding is stored as data — its kind, the figures it quotes, where its evidence is and which
page proposes the change — and put into words when shown, in the reader's language
(``finding_text``). The thresholds are the ones below; they are part of what a review means.
"""

from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from governance import selectors as governance
from governance.models import PreemptionKind, Project, Quota
from queues.models import Alert, AlertKind

# Starved: received less than this share of its guaranteed GPU-hours, and had jobs waiting for
# resources (the pool had no free GPUs) in at least STARVED_MIN_WAIT_HOURS hours in which it
# ran below its guarantee: its guarantee was not honoured (others borrowed it and it was not
# reclaimed). A project whose jobs wait on quota is held by its own limit (a job larger than
# what is left of its guarantee), whatever it uses: that is not starvation.
STARVED_SHARE = 0.5
STARVED_MIN_WAIT_HOURS = 1.0
# Hoarded: at least this share of the guaranteed GPU-hours sat idle (neither used nor lent)
# while another project of the pool waited on quota (and the project itself did not: idle
# guarantee of a project that waited on quota is a rule not working, not hoarding).
HOARDED_IDLE_SHARE = 0.5


class FindingKind:
    STARVED = "starved"
    HOARDED = "hoarded"
    TIER_OVER_THRESHOLD = "tier_over_threshold"
    EXCEPTIONS_OVER_POLICY = "exceptions_over_policy"
    TIER_REVIEW_OVERDUE = "tier_review_overdue"
    QUOTA_REVIEW_OVERDUE = "quota_review_overdue"
    RULE_NOT_ENFORCED = "rule_not_enforced"
    PREEMPTED_FORBIDDEN = "preempted_forbidden"
    PREEMPTED_EARLY = "preempted_early"
    OVER_CAPACITY = "over_capacity"


FINDING_TITLES = {
    FindingKind.STARVED: _("Starved project"),
    FindingKind.HOARDED: _("Hoarded guarantee"),
    FindingKind.TIER_OVER_THRESHOLD: _("Waits over the tier's threshold"),
    FindingKind.EXCEPTIONS_OVER_POLICY: _("Exceptions over the policy's count"),
    FindingKind.TIER_REVIEW_OVERDUE: _("Tier review overdue"),
    FindingKind.QUOTA_REVIEW_OVERDUE: _("Quota review overdue"),
    FindingKind.RULE_NOT_ENFORCED: _("Rule not enforced by the scheduler"),
    FindingKind.PREEMPTED_FORBIDDEN: _("Preempted although its class forbids it"),
    FindingKind.PREEMPTED_EARLY: _("Preempted before its class's minimum runtime"),
    FindingKind.OVER_CAPACITY: _("Usage above the pool's capacity"),
}

# The starved finding of a review built before it counted the hours below the guarantee.
STARVED_BEFORE_TEXT = _(
    "%(project)s received %(gpu_hours)s GPU-hours in %(pool)s against %(guaranteed)s "
    "guaranteed, while it waited on quota for %(wait_hours)s hours."
)
# The starved finding of a review built when it counted the hours waiting on quota below the
# guarantee (before the hours waiting for resources).
STARVED_QUOTA_BELOW_TEXT = _(
    "%(project)s received %(gpu_hours)s GPU-hours in %(pool)s against %(guaranteed)s "
    "guaranteed, while it waited on quota for %(below_hours)s hours in which it ran below "
    "its guarantee."
)

FINDING_TEXTS = {
    FindingKind.STARVED: _(
        "%(project)s received %(gpu_hours)s GPU-hours in %(pool)s against %(guaranteed)s "
        "guaranteed: in %(starved_hours)s hours its jobs waited for free GPUs while it ran below "
        "its guarantee."
    ),
    FindingKind.HOARDED: _(
        "%(idle)s of the %(guaranteed)s GPU-hours guaranteed to %(project)s in %(pool)s sat "
        "idle while other projects of the pool waited on quota."
    ),
    FindingKind.TIER_OVER_THRESHOLD: _(
        "%(over)s of %(jobs)s jobs of the tier %(tier)s waited longer than its threshold of "
        "%(threshold)s minutes (p90 wait: %(p90)s minutes)."
    ),
    FindingKind.EXCEPTIONS_OVER_POLICY: _(
        "%(project)s asked for %(count)s exceptions; the approval policy allows %(limit)s a month."
    ),
    FindingKind.TIER_REVIEW_OVERDUE: _("The review of the tier %(tier)s was due on %(due)s."),
    FindingKind.QUOTA_REVIEW_OVERDUE: _("The review of the quota %(quota)s was due on %(due)s."),
    FindingKind.RULE_NOT_ENFORCED: _(
        "On cluster %(cluster)s, %(project)s: %(rule)s (an open alert since %(since)s)."
    ),
    FindingKind.PREEMPTED_FORBIDDEN: _(
        "Jobs of the tier %(tier)s in the never-preempt class %(klass)s were preempted "
        "%(count)s times (%(gpu_hours)s GPU-hours lost)."
    ),
    FindingKind.PREEMPTED_EARLY: _(
        "%(early)s of %(count)s preemptions of the tier %(tier)s in the class %(klass)s came "
        "before its minimum runtime of %(minutes)s minutes."
    ),
    FindingKind.OVER_CAPACITY: _(
        "Jobs in %(pool)s ran more GPUs than the pool holds in %(hours)s hours (up to "
        "%(peak)s times its capacity): %(used)s GPU-hours used against %(available)s "
        "available. The evidence or the declared capacity is wrong."
    ),
}
# Usage above capacity in a pool that declares none.
OVER_NO_CAPACITY_TEXT = _(
    "Jobs in %(pool)s used %(used)s GPU-hours in %(hours)s hours, but the pool declares no "
    "capacity: the evidence or the declared capacity is wrong."
)


def _num(value: float) -> str:
    return f"{value:,.1f}".rstrip("0").rstrip(".") if value % 1 else f"{value:,.0f}"


def _minutes(seconds: float | None) -> str:
    return "–" if seconds is None else _num(round(seconds / 60, 1))


def _finding(
    kind: str,
    params: dict[str, Any],
    *,
    evidence: tuple[str, list[Any], str],
    propose: tuple[str, list[Any]] | None,
    project: str | None = None,
) -> dict[str, Any]:
    """``evidence``: (URL name, its args, the anchor on the review page ("" for none));
    ``propose``: the page that proposes the change (URL name and args)."""
    return {
        "kind": kind,
        "params": params,
        "project": project,
        "evidence": {"url": evidence[0], "args": evidence[1], "anchor": evidence[2]},
        "propose": {"url": propose[0], "args": propose[1]} if propose else None,
    }


def _quota_pks() -> dict[tuple[str, str], int]:
    """(project slug, pool slug) → the first quota's id (the page that proposes an edit)."""
    found: dict[tuple[str, str], int] = {}
    for project, pool, pk in Quota.objects.order_by("pk").values_list(
        "project__slug", "pool__slug", "pk"
    ):
        found.setdefault((project, pool), pk)
    return found


def _service_findings(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    findings = []
    rows = metrics["service"]["by_project"]
    quotas = _quota_pks()
    waiting_pools: dict[str | None, set[str]] = {}
    for row in rows:
        if row["quota_wait_hours"] > 0:
            waiting_pools.setdefault(row["pool"], set()).add(row["project"])
    for row in rows:
        guaranteed = row["guaranteed_gpu_hours"]
        if guaranteed <= 0:
            continue
        pool_name = row["pool"] or "–"
        quota = quotas.get((row["project"], row["pool"] or ""))
        propose = ("quota_edit", [quota]) if quota else ("project_detail", [row["project"]])
        starved = row["resource_wait_below_guarantee_hours"]
        if starved >= STARVED_MIN_WAIT_HOURS and row["gpu_hours"] < STARVED_SHARE * guaranteed:
            findings.append(
                _finding(
                    FindingKind.STARVED,
                    {
                        "project": row["name"],
                        "pool": pool_name,
                        "gpu_hours": _num(row["gpu_hours"]),
                        "guaranteed": _num(guaranteed),
                        "starved_hours": _num(starved),
                    },
                    evidence=("report_detail", [], "service"),
                    propose=propose,
                    project=row["project"],
                )
            )
        idle = guaranteed - row["within_guarantee_gpu_hours"] - row["lent_gpu_hours"]
        others_waited = waiting_pools.get(row["pool"], set()) - {row["project"]}
        waited_itself = row["quota_wait_hours"] >= STARVED_MIN_WAIT_HOURS
        if idle >= HOARDED_IDLE_SHARE * guaranteed and others_waited and not waited_itself:
            findings.append(
                _finding(
                    FindingKind.HOARDED,
                    {
                        "project": row["name"],
                        "pool": pool_name,
                        "idle": _num(round(idle, 2)),
                        "guaranteed": _num(guaranteed),
                    },
                    evidence=("report_detail", [], "lending"),
                    propose=propose,
                    project=row["project"],
                )
            )
    return findings


def _wait_findings(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    findings = []
    for row in metrics["waits"]["by_tier"]:
        if row.get("threshold_seconds") is None or not row.get("over_threshold"):
            continue
        findings.append(
            _finding(
                FindingKind.TIER_OVER_THRESHOLD,
                {
                    "tier": row["name"],
                    "over": row["over_threshold"],
                    "jobs": row["jobs"],
                    "threshold": _minutes(row["threshold_seconds"]),
                    "p90": _minutes(row["p90"]),
                },
                evidence=("report_detail", [], "waits"),
                propose=("tier_edit", [row["tier"]]) if row["tier"] else None,
            )
        )
    return findings


def _preemption_findings(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Every preemption of a class that forbids it, and of a cautious class before its
    minimum runtime, per tier and class."""
    tiers = {row["tier"]: row["name"] for row in metrics["waits"]["by_tier"]}
    findings = []
    for row in metrics["preemptions"]["by_tier_class"]:
        klass = row["preemption_class"]
        params = {
            "tier": tiers.get(row["tier"], row["tier"] or "–"),
            "klass": klass or "–",
            "count": row["count"],
        }
        propose = ("preemption_class_edit", [klass]) if klass else None
        if row.get("class_kind") == PreemptionKind.FORBIDDEN and row["count"]:
            findings.append(
                _finding(
                    FindingKind.PREEMPTED_FORBIDDEN,
                    {**params, "gpu_hours": _num(row["gpu_hours_lost"])},
                    evidence=("report_detail", [], "preemptions"),
                    propose=propose,
                )
            )
        elif row.get("early"):
            findings.append(
                _finding(
                    FindingKind.PREEMPTED_EARLY,
                    {
                        **params,
                        "early": row["early"],
                        "minutes": row.get("class_min_runtime_minutes") or "–",
                    },
                    evidence=("report_detail", [], "preemptions"),
                    propose=propose,
                )
            )
    return findings


def _capacity_findings(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pool whose jobs ran more GPUs than it holds in some hour (a review built before
    this was measured has none)."""
    return [
        _finding(
            FindingKind.OVER_CAPACITY,
            {
                "pool": row["pool_name"],
                "hours": row["hours_over"],
                "peak": _num(row["peak_ratio"]) if row["peak_ratio"] is not None else None,
                "used": _num(row["used_gpu_hours"]),
                "available": _num(row["available_gpu_hours"]),
            },
            evidence=("report_detail", [], "idle"),
            propose=("pool_capacity_edit", [row["pool"]]),
        )
        for row in metrics["capacity"].get("over_capacity", [])
    ]


def _exception_findings(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _finding(
            FindingKind.EXCEPTIONS_OVER_POLICY,
            {"project": row["name"], "count": row["count"], "limit": row["limit"]},
            evidence=("report_detail", [], "exceptions"),
            propose=("approval_policy_list", []),
            project=row["project"],
        )
        for row in metrics["exceptions"]["over_policy"]
    ]


def _review_findings_overdue(*, on: Any) -> list[dict[str, Any]]:
    findings = []
    for tier in governance.tiers_due_for_review(today=on, window_days=0).filter(
        next_review_on__lt=on
    ):
        findings.append(
            _finding(
                FindingKind.TIER_REVIEW_OVERDUE,
                {"tier": tier.name, "due": str(tier.next_review_on)},
                evidence=("tier_detail", [tier.slug], ""),
                propose=("review_tier", [tier.slug]),
            )
        )
    for quota in governance.quotas_due_for_review(today=on, window_days=0).filter(
        next_review_on__lt=on
    ):
        assert quota.next_review_on is not None
        findings.append(
            _finding(
                FindingKind.QUOTA_REVIEW_OVERDUE,
                {"quota": str(quota), "due": quota.next_review_on.isoformat()},
                evidence=("quota_detail", [quota.pk], ""),
                propose=("review_quota", [quota.pk]),
                project=quota.project.slug,
            )
        )
    return findings


def _enforcement_findings(*, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """``rule_not_enforced`` alerts open at some moment of the window."""
    from queues.selectors import RULE_TEXTS

    alerts = Alert.objects.filter(
        Q(closed_at=None) | Q(closed_at__gt=start),
        kind=AlertKind.RULE_NOT_ENFORCED,
        opened_at__lt=end,
    ).order_by("opened_at", "pk")
    projects = dict(Project.objects.values_list("name", "slug"))
    findings = []
    for alert in alerts:
        details = alert.details
        project = projects.get(details.get("project", ""))
        findings.append(
            _finding(
                FindingKind.RULE_NOT_ENFORCED,
                {
                    "cluster": details.get("cluster", "–"),
                    "project": details.get("project", "–"),
                    "rule": details.get("rule", ""),
                    "rule_params": {
                        key: value for key, value in details.items() if value not in ("", None)
                    },
                    "since": timezone.localtime(alert.opened_at).date().isoformat(),
                    "known_rule": details.get("rule") in RULE_TEXTS,
                },
                evidence=("alert_list", [], ""),
                propose=("project_edit", [project]) if project else ("cluster_list", []),
                project=project,
            )
        )
    return findings


def review_findings(*, metrics: dict[str, Any], start: datetime, end: datetime) -> list[dict]:
    """Every finding of a review, in a fixed order (the order of the issue)."""
    on = min(timezone.localdate(), timezone.localtime(end).date())
    return [
        *_service_findings(metrics),
        *_capacity_findings(metrics),
        *_wait_findings(metrics),
        *_preemption_findings(metrics),
        *_exception_findings(metrics),
        *_review_findings_overdue(on=on),
        *_enforcement_findings(start=start, end=end),
    ]


def finding_text(finding: dict[str, Any]) -> str:
    """The finding in words, in the active language."""
    from queues.selectors import RULE_TEXTS

    params = dict(finding["params"])
    if finding["kind"] == FindingKind.RULE_NOT_ENFORCED:
        rule = params.get("rule", "")
        rule_params = {key: "–" for key in ("flavor", "job")} | params.get("rule_params", {})
        params["rule"] = str(RULE_TEXTS[rule]) % rule_params if rule in RULE_TEXTS else rule
    template = FINDING_TEXTS.get(finding["kind"])
    if finding["kind"] == FindingKind.STARVED and "starved_hours" not in params:
        # Frozen by a review built before the hours waiting for resources: its own words.
        below = "below_hours" in params
        template = STARVED_QUOTA_BELOW_TEXT if below else STARVED_BEFORE_TEXT
    if finding["kind"] == FindingKind.OVER_CAPACITY and params.get("peak") is None:
        template = OVER_NO_CAPACITY_TEXT
    return str(template) % params if template else finding["kind"]


def finding_title(finding: dict[str, Any]) -> str:
    return str(FINDING_TITLES.get(finding["kind"], finding["kind"]))
