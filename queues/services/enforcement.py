"""What the per-rule enforcement tables of every backend share (``slurm.enforcement``,
``kueue.enforcement``): a row, how a rule is enforced, and the words of the rules both tables
name the same way. Each backend says how it enforces a rule; what the rule is, is said here."""

from __future__ import annotations

from django.utils.translation import gettext as _

from governance.models import PreemptionClass
from queues.models import Enforcement

NATIVE = Enforcement.NATIVE.value
NOT_ENFORCED = Enforcement.NOT_ENFORCED.value
ARBITER = Enforcement.ARBITER.value
GUARD = Enforcement.GUARD.value
SUBMIT = Enforcement.SUBMIT.value


def enforcement_row(rule: str, how: str, detail: str) -> dict[str, str]:
    """One row of a plan's enforcement table: the rule, how it is enforced, and the detail."""
    return {"rule": rule, "how": how, "detail": detail}


def cautious_rule(*, project: str, klass: PreemptionClass, grace_minutes: int | None) -> str:
    """A cautious class's minimum runtime and its quota's reclaim grace, as a rule."""
    return _(
        "%(project)s: class %(klass)s, %(minutes)d minutes before preemption, %(grace)d "
        "minutes grace"
    ) % {
        "project": project,
        "klass": klass.name,
        "minutes": klass.min_runtime_minutes or 0,
        "grace": grace_minutes or 0,
    }


def daily_maximum_rule(*, project: str, klass: PreemptionClass) -> str:
    """A class's daily preemption maximum, as a rule."""
    return _("%(project)s: class %(klass)s, at most %(count)d preemptions a day") % {
        "project": project,
        "klass": klass.name,
        "count": klass.max_preemptions_per_day,
    }
