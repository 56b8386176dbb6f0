"""Slurm object names, sacctmgr field options and value formats."""

from __future__ import annotations

import re
from collections.abc import Iterable

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
)
TRES_FIELDS = {"grp_tres", "max_tres_per_job", "max_tres_per_user"}
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
}
ACCOUNT_OPTIONS = {
    "description": "Description",
    "organization": "Organization",
    "parent": "Parent",
    "fairshare": "Fairshare",
    "grp_tres": "GrpTRES",
}
ASSOCIATION_OPTIONS = {"qos": "QOS", "default_qos": "DefaultQOS"}
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


def description(text: str) -> str:
    """A Description that survives sacctmgr's parsing and lowercasing unchanged."""
    cleaned = re.sub(r"[^a-z0-9 ._:/-]+", " ", f"{MARK} {text}".lower())
    return re.sub(r"\s+", " ", cleaned).strip()[:120]


def values_equal(name: str, live: str, desired: str) -> bool:
    if name in TRES_FIELDS:
        return parse_tres(live) == parse_tres(desired)
    if name in LIST_FIELDS:
        return {v for v in live.split(",") if v} == {v for v in desired.split(",") if v}
    if name == "preempt_mode":
        return (live or "cluster").lower() == (desired or "cluster").lower()
    return live.strip().lower() == desired.strip().lower()


# --- names --------------------------------------------------------------------------------------


def tier_qos(tier: PriorityTier, *, protected: bool = False) -> str:
    return f"{tier.slug}-protected" if protected else tier.slug


def borrow_qos(pool: Pool) -> str:
    return f"{pool.slug}.borrow"


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
