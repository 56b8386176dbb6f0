"""Reads of the alerts: their subject and body in the reader's language, and who sees which."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.utils.translation import gettext_lazy

from queues.models import Alert, AlertKind, AlertRecipient

ALERT_SUBJECTS = {
    AlertKind.OUT_OF_SYNC: gettext_lazy("Cluster %(cluster)s is out of sync"),
    AlertKind.LONG_WAIT: gettext_lazy("Job %(job)s of %(project)s waits past its tier's threshold"),
    AlertKind.RULE_NOT_ENFORCED: gettext_lazy("A rule is not enforced on cluster %(cluster)s"),
    AlertKind.GUARD_ACTION: gettext_lazy("Arbiter's guard held job %(job)s on %(cluster)s"),
    AlertKind.SUBMIT_TABLE_EXPIRED: gettext_lazy(
        "The submit table of cluster %(cluster)s has expired"
    ),
}
ALERT_BODIES = {
    AlertKind.OUT_OF_SYNC: gettext_lazy(
        "The rules of cluster %(cluster)s have been due for a sync for %(minutes)s minutes. "
        "Last error: %(error)s"
    ),
    AlertKind.LONG_WAIT: gettext_lazy(
        "Job %(job)s of project %(project)s in tier %(tier)s has been pending for "
        "%(minutes)s minutes since it last became pending (its current wait; threshold "
        "%(threshold)s minutes). Why it waits: %(category)s (%(reason)s)."
    ),
    AlertKind.RULE_NOT_ENFORCED: gettext_lazy(
        "On cluster %(cluster)s, %(project)s: %(rule)s (allowed %(allowed)s, seen %(seen)s)."
    ),
    AlertKind.GUARD_ACTION: gettext_lazy(
        "On cluster %(cluster)s the guard ran “scontrol %(action)s” on job %(job)s of account "
        "%(account)s (%(over)s): an untyped GPU request got past the job_submit plugin. Check "
        "that the plugin is installed and its table current (cluster page)."
    ),
    AlertKind.SUBMIT_TABLE_EXPIRED: gettext_lazy(
        "The job_submit plugin's table on cluster %(cluster)s expired at %(expired_at)s "
        "(delivery: %(delivery)s; last fetch by the pull agent: %(fetched_at)s). Until a "
        "current table arrives the plugin %(consequence)s. Check that the sync succeeds and, "
        "for a pulled table, that the agent on the controller host reaches Arbiter."
    ),
}

# What the plugin does with an expired table, as the alert says it.
EXPIRY_CONSEQUENCES = {
    "refuse": gettext_lazy("refuses GPU jobs of governed projects"),
    "native": gettext_lazy(
        "accepts GPU jobs under Slurm's native limits only; Arbiter's guard holds what "
        "goes past a quota"
    ),
}


RULE_TEXTS = {
    "over_maximum": gettext_lazy("runs more %(flavor)s GPUs than its maximum"),
    "qos_not_allowed": gettext_lazy("job %(job)s runs in a QOS the project may not use"),
    "forbidden_preempted": gettext_lazy("job %(job)s of a never-preempt class was preempted"),
}


class _Blank(dict):  # type: ignore[type-arg]
    """Formatting parameters where a missing detail reads as a dash, never a KeyError."""

    def __missing__(self, key: str) -> str:
        return "–"


def alert_text(alert: Alert) -> tuple[str, str]:
    """The alert's subject and body in the active language, from its kind and details."""
    params = _Blank({key: value for key, value in alert.details.items() if value not in ("", None)})
    kind = AlertKind(alert.kind)
    if kind == AlertKind.RULE_NOT_ENFORCED and alert.details.get("rule") in RULE_TEXTS:
        params["rule"] = str(RULE_TEXTS[alert.details["rule"]]) % params
    if kind == AlertKind.SUBMIT_TABLE_EXPIRED:
        params["consequence"] = str(
            EXPIRY_CONSEQUENCES.get(alert.details.get("on_expiry", ""), "–")
        )
    return str(ALERT_SUBJECTS[kind]) % params, str(ALERT_BODIES[kind]) % params


def alert_list(*, user: Any, state: str = "open") -> QuerySet[Alert]:
    """The alerts addressed to ``user`` (all alerts for ops), newest first; ``state`` is
    ``open``, ``closed`` or ``all``. Annotated with ``unread`` for the user."""
    alerts = Alert.objects.select_related("cluster")
    if not getattr(user, "is_ops", False):
        alerts = alerts.filter(deliveries__user=user)
    if state == "open":
        alerts = alerts.filter(closed_at=None)
    elif state == "closed":
        alerts = alerts.exclude(closed_at=None)
    unread = AlertRecipient.objects.filter(alert=OuterRef("pk"), user=user, read_at=None)
    return alerts.annotate(unread=Exists(unread)).order_by("-opened_at", "-pk")
