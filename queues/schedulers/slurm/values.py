"""Slurm object names, sacctmgr field options and value formats."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from governance.models import Pool, PriorityTier

QOS = "qos"
ACCOUNT = "account"
ASSOCIATION = "association"
KINDS = (QOS, ACCOUNT, ASSOCIATION)
PROTECTED = "-protected"
PENDING = "PENDING"
# Plain and array-task job ids (``123``, ``123_4``): the ones ``scontrol update`` moves.
JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")

MARK = "arbiter:"
ORGANIZATION = "arbiter"
ROOT_ACCOUNT = "arbiter"
GPU = "gres/gpu"
CLEAR = "<clear>"  # an option given with an empty value (Preempt=)

QOS_FIELDS = (
    "description",
    "priority",
    "preempt",
    "preempt_mode",
    "grp_tres",
    "max_tres_per_job",
    "max_tres_per_user",
    "max_tres_per_account",
    "grace_time",
    "preempt_exempt_time",
)
TRES_FIELDS = {"grp_tres", "max_tres_per_job", "max_tres_per_user", "max_tres_per_account"}
# Durations are kept in seconds; sacctmgr shows ``[D-]HH:MM:SS`` (empty: not set).
TIME_FIELDS = {"grace_time", "preempt_exempt_time"}
LIST_FIELDS = {"preempt", "qos"}
# sacctmgr's option names for each field, per kind.
QOS_OPTIONS = {
    "description": "Description",
    "priority": "Priority",
    "preempt": "Preempt",
    "preempt_mode": "PreemptMode",
    "grp_tres": "GrpTRES",
    "max_tres_per_job": "MaxTRESPerJob",
    "max_tres_per_user": "MaxTRESPerUser",
    "max_tres_per_account": "MaxTRESPerAccount",
    "grace_time": "GraceTime",
    "preempt_exempt_time": "PreemptExemptTime",
}
ACCOUNT_OPTIONS = {
    "description": "Description",
    "organization": "Organization",
    "parent": "Parent",
    "fairshare": "Fairshare",
    "grp_tres": "GrpTRES",
}
# Limits Arbiter does not set on accounts and associations, read and compared all the same:
# one set by hand (``MaxJobs=0``, ``GrpTRES=gres/gpu=1`` on a member) is drift, and a sync
# clears it (``-1``). ``grp_tres`` is the account's own rule; on associations it is a limit.
LIMIT_OPTIONS = {
    "grp_jobs": "GrpJobs",
    "grp_submit": "GrpSubmit",
    "max_jobs": "MaxJobs",
    "max_submit": "MaxSubmit",
    "max_tres_per_job": "MaxTRES",
    "max_wall": "MaxWall",
}
# sacctmgr's column names for them, in this order, after grptres.
LIMIT_COLUMNS = "grpjobs,grpsubmit,maxjobs,maxsubmit,maxtres,maxwall"
ACCOUNT_OPTIONS.update(LIMIT_OPTIONS)
ASSOCIATION_OPTIONS = {
    "qos": "QOS",
    "default_qos": "DefaultQOS",
    "grp_tres": "GrpTRES",
    **LIMIT_OPTIONS,
}
SLURM_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


# --- values -----------------------------------------------------------------------------------


def parse_tres(value: str) -> dict[str, str]:
    """``gres/gpu:a100=4,gres/gpu=7`` → ``{"gres/gpu:a100": "4", "gres/gpu": "7"}``."""
    result = {}
    for item in value.split(","):
        key, sep, amount = item.strip().partition("=")
        if sep and key:
            result[key] = amount
    return result


def format_tres(tres: dict[str, int | str]) -> str:
    return ",".join(f"{key}={tres[key]}" for key in sorted(tres))


def format_list(names: Iterable[str]) -> str:
    return ",".join(sorted(set(names)))


def parse_seconds(value: str) -> str:
    """``1-02:03:04`` / ``02:03:04`` / ``03:04`` → seconds as a string; empty stays empty."""
    value = value.strip()
    if not value:
        return ""
    days, _sep, clock = value.rpartition("-")
    parts = [int(part or 0) for part in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts[-3:]
    return str(int(days or 0) * 86400 + hours * 3600 + minutes * 60 + seconds)


def format_duration(seconds: str) -> str:
    """Seconds → ``D-HH:MM:SS`` as sacctmgr takes it."""
    total = int(seconds or 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def description(text: str) -> str:
    """A Description that survives sacctmgr's parsing and lowercasing unchanged."""
    cleaned = re.sub(r"[^a-z0-9 ._:/-]+", " ", f"{MARK} {text}".lower())
    return re.sub(r"\s+", " ", cleaned).strip()[:120]


def values_equal(name: str, live: str, desired: str) -> bool:
    if name in TRES_FIELDS:
        return parse_tres(live) == parse_tres(desired)
    if name in LIST_FIELDS:
        return {v for v in live.split(",") if v} == {v for v in desired.split(",") if v}
    if name in TIME_FIELDS:
        return int(live or 0) == int(desired or 0)
    if name == "preempt_mode":
        return (live or "cluster").lower() == (desired or "cluster").lower()
    return live.strip().lower() == desired.strip().lower()


# --- names --------------------------------------------------------------------------------------


def tier_qos(tier: PriorityTier, *, protected: bool = False) -> str:
    return f"{tier.slug}-protected" if protected else tier.slug


def cautious_qos(tier: PriorityTier, klass: str) -> str:
    """A preemptible tier's QOS for a cautious class: the same, with its PreemptExemptTime."""
    return f"{tier.slug}.{klass}"


@dataclass(frozen=True)
class TierQos:
    """One QOS Arbiter compiles for a tier: ``klass`` is the cautious class's slug of a
    ``<tier>.<class>`` copy ("" otherwise), ``protected`` a ``<tier>-protected`` copy."""

    tier: PriorityTier
    klass: str = ""
    protected: bool = False


def tier_qos_family(
    tier: PriorityTier, *, classes: Iterable[str] = (), protected: bool = False
) -> dict[str, TierQos]:
    """Every QOS name Arbiter makes for ``tier``: the tier's own, one per cautious class
    (``classes``: their slugs) and, with ``protected``, the never-preempted copy.

    The one place these names are made: the compiler builds its QOS from it and the workload
    collector reads job QOS back to tier and class through it (``qos_roles``), so a copy
    cannot be compiled without being mapped back. All of a family's QOS share the tier's
    GPU cap (``tiercap``)."""
    family = {tier_qos(tier): TierQos(tier)}
    for klass in sorted({c.lower() for c in classes if c}):
        family[cautious_qos(tier, klass)] = TierQos(tier, klass=klass)
    if protected:
        family[tier_qos(tier, protected=True)] = TierQos(tier, protected=True)
    return family


def parse_tier_qos(name: str) -> tuple[str, str, bool] | None:
    """The inverse of ``tier_qos_family``'s names: ``(tier slug, class slug, protected)``,
    or None for a name no tier family makes. The one place these names are read (the
    workload collector, the tier-cap rebalancer); a pool's borrow and guarantee QOS also
    have dots, so callers look those up first."""
    if name.endswith(PROTECTED):
        base = name.removesuffix(PROTECTED)
        return (base, "", True) if base and "." not in base else None
    base, _sep, klass = name.partition(".")
    if not base or "." in klass:
        return None
    return base, klass, False


def cap_families(qos: dict[str, dict[str, str]]) -> dict[str, tuple[int, list[str]]]:
    """The QOS of a state that share one tier GPU cap: tier QOS name → (cap, its family's
    names, the tier's own first). Only tiers with a cap and at least one copy."""
    families: dict[str, tuple[int, list[str]]] = {}
    for name, fields in qos.items():
        parsed = parse_tier_qos(name)
        cap = parse_tres(fields.get("grp_tres", "")).get(GPU)
        if parsed is None or not cap or parsed[0] not in qos:
            continue
        base = parsed[0]
        if parse_tres(qos[base].get("grp_tres", "")).get(GPU) != cap:
            continue
        members = families.setdefault(base, (int(cap), [base]))[1]
        if name != base:
            members.append(name)
    return {
        base: (cap, sorted(m, key=lambda n: (n != base, n)))
        for base, (cap, m) in families.items()
        if len(m) > 1
    }


def borrow_qos(pool: Pool, klass: str = "") -> str:
    """The pool's borrow QOS; a cautious preemption class gets one of its own."""
    return f"{pool.slug}.borrow.{klass}" if klass else f"{pool.slug}.borrow"


def pool_account(pool: Pool) -> str:
    return pool.slug


def project_account(pool: Pool, project_slug: str) -> str:
    return f"{pool.slug}.{project_slug}"


def guarantee_qos(pool: Pool, project_slug: str) -> str:
    return f"{project_account(pool, project_slug)}.guarantee"


def unprotected(qos: str) -> str:
    return qos.removesuffix(PROTECTED)


def association_name(user: str, account: str) -> str:
    return f"{user}@{account}"


def split_association(name: str) -> tuple[str, str]:
    user, _sep, account = name.partition("@")
    return user, account
