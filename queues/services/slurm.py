"""The Slurm backend: effective rules compiled into QOS, accounts and user associations.

What Arbiter creates (all names lowercase, as Slurm stores them):

* ``<tier>``: a QOS per priority tier. ``Priority`` is the tier's scheduler value,
  ``GrpTRES=gres/gpu=<tier cap>``, ``MaxTRESPerJob`` and ``MaxTRESPerUser`` both
  ``gres/gpu=<per-job cap>`` (the tier's cap on one job is also what one user may hold in
  the tier at a time), ``Preempt=`` the plain QOS of the tiers it may preempt (and the
  pools' borrow QOS), ``PreemptMode=requeue``.
* ``<tier>-protected``: the same tier for work whose preemption class is *forbidden*. It is
  in no QOS's ``Preempt`` list, so that work is never preempted. Made only for tiers such
  projects, or named jobs with a stricter class, may use.
* ``<pool>.borrow``: one shared, preemptible QOS per pool for work *above* a project's
  guarantee (priority 0, ``PreemptMode=requeue``). Each project's account ``GrpTRES`` caps
  what it borrows.
* ``<pool>.<project>.guarantee``: a QOS per project with a guarantee, capped at the
  guarantee (``GrpTRES``, typed per flavor), at the project's tier priority, that may
  preempt the pool's borrow QOS: submitting within the guarantee reclaims lent GPUs.
* Accounts ``arbiter`` → ``<pool>`` → ``<pool>.<project>`` (``Organization=arbiter`` marks
  them), with ``Fairshare`` the sum of the project's fair-share weights in the pool and
  ``GrpTRES`` its maximum (guarantee + borrow limit, the pool's capacity when borrowing is
  unbounded), typed ``gres/gpu:<type>`` per flavor and always the untyped total as well
  (untyped requests bypass typed limits).
* A user association per project member and account, with the QOS its tiers allow (the
  ``-protected`` ones for forbidden-class work), its guarantee QOS and, unless its work may
  not be preempted, the borrow QOS; ``DefaultQOS`` is the default tier's QOS.

Named jobs: a priority upgrade or queue jump that names jobs, and a preemption protection
that names jobs, move each named job that is still *pending* with
``scontrol update JobId=<ids> QOS=<qos>`` (one call per target QOS): to the granted tier's
QOS (never lower than the tier it is in), ``-protected`` when its class is forbidden. The
job's user association gets that QOS in its list while the grant lasts (Slurm refuses a job
QOS its association does not allow). Running, finished and unknown jobs, and jobs of other
projects, are skipped and reported in the plan. Arbiter keeps what it moved in the last
applied state (``job``: the QOS it set and the one the job had); when the grant ends a job
still pending there is moved back to its old QOS (or its association's ``DefaultQOS`` when
that one is no longer allowed).

Placement: work within the guarantee is submitted with ``-q <pool>.<project>.guarantee``,
work above it with ``-q <pool>.borrow``, and ``-q <tier>`` orders work by tier as usual; the
cluster page lists each project's account and QOS.

QOS are marked managed by a ``Description`` that starts with ``arbiter:``, accounts by
``Organization=arbiter``; user associations under a managed account are managed. Nothing
else is ever changed or deleted: a name clash with a hand-made object is a *conflict*.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.utils.translation import gettext as _

from governance.models import Pool, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveRules

from .backends import (
    JOB,
    Action,
    ApplyResult,
    Change,
    DriftItem,
    FieldChange,
    LiveState,
    Progress,
    SchedulerError,
    SchedulerUnavailable,
    State,
    drift_items,
    plan_changes,
)

QOS = "qos"
ACCOUNT = "account"
ASSOCIATION = "association"
KINDS = (QOS, ACCOUNT, ASSOCIATION)
PROTECTED = "-protected"
PENDING = "PENDING"
# Plain and array-task job ids (``123``, ``123_4``): the ones ``scontrol update`` moves.
JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
# ``scontrol update`` reports each job it could not change on a line of its own.
JOB_FAILURE = re.compile(r"^(?P<error>.+?) for job (?P<job>\S+)\s*$", re.MULTILINE)
NO_SUCH_JOBS = re.compile(r"Invalid job id specified")

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

# Signs in sacctmgr/scontrol output that the daemons did not answer (retry later).
UNAVAILABLE = re.compile(
    r"Connection refused|Problem talking to the database|Unable to contact slurm controller"
    r"|persistent connection|Socket timed out|Zero Bytes were transmitted|Munge (en|de)code"
    r"|Connection timed out|No route to host|Could not establish a connection",
    re.IGNORECASE,
)
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


# --- running commands ---------------------------------------------------------------------------


@dataclass
class SlurmCommands:
    """Runs Slurm's client commands for one cluster and counts them."""

    slurm_conf: str = ""
    prefix: str = ""
    timeout: float = 60.0
    calls: int = 0
    writes: int = 0
    log: list[list[str]] = field(default_factory=list)

    def run(
        self,
        args: list[str],
        *,
        write: bool = False,
        stdin: str | None = None,
        tolerate: re.Pattern[str] | None = None,
    ) -> str:
        """Run one command; a failure whose output matches ``tolerate`` returns the output."""
        command = [*shlex.split(self.prefix), *args]
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        self.calls += 1
        self.writes += int(write)
        self.log.append(args)
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as error:
            raise SchedulerUnavailable(
                _("Cannot run %(command)s: %(error)s")
                % {"command": command[0], "error": error.strerror}
            ) from error
        except subprocess.TimeoutExpired as error:
            raise SchedulerUnavailable(
                _("%(command)s did not answer within %(seconds)d s")
                % {"command": " ".join(args[:3]), "seconds": self.timeout}
            ) from error
        output = (done.stdout or "") + (done.stderr or "")
        deleting = args[:3] == ["sacctmgr", "-i", "delete"]
        if done.returncode != 0 and deleting and "Nothing deleted" in output:
            return done.stdout  # already gone: deleting is idempotent
        tolerated = tolerate is not None and tolerate.search(output)
        if done.returncode != 0 and tolerated and not UNAVAILABLE.search(output):
            return output
        if done.returncode != 0:
            message = _("%(command)s failed (exit %(code)d): %(output)s") % {
                "command": " ".join(args[:4]),
                "code": done.returncode,
                "output": output.strip()[-600:] or _("no output"),
            }
            if UNAVAILABLE.search(output):
                raise SchedulerUnavailable(message)
            raise SchedulerError(message)
        if UNAVAILABLE.search(done.stderr or ""):
            raise SchedulerUnavailable(done.stderr.strip()[-600:])
        return done.stdout

    def sacctmgr_read(self, *args: str) -> list[list[str]]:
        out = self.run(["sacctmgr", "-n", "-P", *args])
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def sacctmgr_write(self, *args: str, stdin: str | None = None) -> str:
        return self.run(["sacctmgr", "-i", *args], write=True, stdin=stdin)

    def squeue_jobs(self, ids: Iterable[str]) -> list[list[str]]:
        """Id, state, QOS, account and user of the given jobs (unknown ones are left out)."""
        out = self.run(
            ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%q|%a|%u"],
            tolerate=NO_SUCH_JOBS,
        )
        if NO_SUCH_JOBS.search(out):
            return []
        return [line.split("|") for line in out.splitlines() if line.count("|") == 4]

    def move_jobs(self, ids: list[str], qos: str) -> dict[str, str]:
        """``scontrol update`` the jobs' QOS; returns the jobs it could not move, and why."""
        out = self.run(
            ["scontrol", "update", f"JobId={','.join(ids)}", f"QOS={qos}"],
            write=True,
            tolerate=JOB_FAILURE,
        )
        return {match["job"]: match["error"] for match in JOB_FAILURE.finditer(out)}


# --- the backend ---------------------------------------------------------------------------------


class SlurmBackend:
    kinds: tuple[str, ...] = KINDS

    def __init__(self, *, cluster_name: str, commands: SlurmCommands) -> None:
        self.cluster_name = cluster_name
        self.commands = commands

    @property
    def calls(self) -> int:
        return self.commands.calls

    # -- read --

    def read_live(self, *, jobs: Iterable[str] = ()) -> LiveState:
        """Three read calls (QOS, accounts with their associations, users), and one
        ``squeue`` for the named jobs when there are any."""
        objects: State = {QOS: {}, ACCOUNT: {}, ASSOCIATION: {}, JOB: {}}
        managed: dict[str, set[str]] = {QOS: set(), ACCOUNT: set(), ASSOCIATION: set()}
        for row in self.commands.sacctmgr_read(
            "show",
            "qos",
            "format=name,description,priority,preempt,preemptmode,grptres,maxtres,maxtrespu",
        ):
            name, descr, priority, preempt, mode, grp, max_job, max_user = (row + [""] * 8)[:8]
            objects[QOS][name] = {
                "description": descr,
                "priority": priority,
                "preempt": format_list(v for v in preempt.split(",") if v),
                "preempt_mode": mode,
                "grp_tres": format_tres(parse_tres(grp)),  # type: ignore[arg-type]
                "max_tres_per_job": format_tres(parse_tres(max_job)),  # type: ignore[arg-type]
                "max_tres_per_user": format_tres(parse_tres(max_user)),  # type: ignore[arg-type]
            }
            if descr.lower().startswith(MARK):
                managed[QOS].add(name)
        for row in self.commands.sacctmgr_read(
            "show",
            "account",
            "withassoc",
            "format=account,description,organization,parentname,user,share,grptres,qos,defaultqos",
            "where",
            f"cluster={self.cluster_name}",
        ):
            account, descr, org, parent, user, share, grp, qos, default_qos = (row + [""] * 9)[:9]
            if not user:
                objects[ACCOUNT][account] = {
                    "description": descr,
                    "organization": org,
                    "parent": parent,
                    "fairshare": share,
                    "grp_tres": format_tres(parse_tres(grp)),  # type: ignore[arg-type]
                }
                if org.lower() == ORGANIZATION:
                    managed[ACCOUNT].add(account)
            else:
                name = association_name(user, account)
                objects[ASSOCIATION][name] = {
                    "qos": format_list(v for v in qos.split(",") if v),
                    "default_qos": default_qos,
                }
                if org.lower() == ORGANIZATION:
                    managed[ASSOCIATION].add(name)
        users = {row[0] for row in self.commands.sacctmgr_read("show", "user", "format=user")}
        ids = sorted({job for job in jobs if JOB_ID.match(job)})
        if ids:
            for job, state, qos_name, account, user in self.commands.squeue_jobs(ids):
                objects[JOB][job] = {
                    "state": state,
                    "qos": qos_name,
                    "account": account,
                    "user": user,
                }
        return LiveState(objects=objects, managed=managed, extra={"users": users})

    # -- desired --

    def desired_state(
        self,
        *,
        rules: EffectiveRules,
        pools: Iterable[Pool],
        capacities: dict[tuple[int, int], int],
    ) -> State:
        pools = sorted(pools, key=lambda pool: pool.slug)
        pool_ids = {pool.pk for pool in pools}
        qos: dict[str, dict[str, str]] = {}
        accounts: dict[str, dict[str, str]] = {}
        associations: dict[str, dict[str, str]] = {}
        jobs: dict[str, dict[str, str]] = {}
        if not pools:
            return {QOS: qos, ACCOUNT: accounts, ASSOCIATION: associations, JOB: jobs}

        accounts[ROOT_ACCOUNT] = self._account("managed by arbiter", "root", 1, {})
        protected_tiers: set[int] = set()
        # One entry per (pool, project): what its account, guarantee QOS and members get.
        plans = []
        for slug, project in sorted(rules.projects.items()):
            by_pool: dict[int, list] = defaultdict(list)
            for quota in project.quotas:
                if quota.quota.pool_id in pool_ids:
                    by_pool[quota.quota.pool_id].append(quota)
            for pool in pools:
                quotas = by_pool.get(pool.pk)
                if not quotas:
                    continue
                forbidden = any(q.preemption_class.kind == PreemptionKind.FORBIDDEN for q in quotas)
                borrows = not forbidden and any(
                    q.borrow_limit is None or q.borrow_limit > 0 for q in quotas
                )
                if forbidden:
                    protected_tiers.update(tier.pk for tier in project.allowed_tiers)
                plans.append((pool, slug, project, quotas, forbidden, borrows))
        for slug, project in sorted(rules.projects.items()):
            mine = [(project_account(pool, s), f) for pool, s, _p, _q, f, _b in plans if s == slug]
            if mine:
                jobs.update(self._job_requests(slug, project, mine, protected_tiers))

        for pool in pools:
            accounts[pool_account(pool)] = self._account(f"pool {pool.name}", ROOT_ACCOUNT, 1, {})
            # Always there, so that the Preempt lists naming it never have to be emptied
            # (Slurm 22.05 mishandles an emptied list); who may use it depends on the quotas.
            qos[borrow_qos(pool)] = {
                "description": description(f"borrowed gpus in pool {pool.name}"),
                "priority": "0",
                "preempt": "",
                "preempt_mode": "requeue",
                "grp_tres": "",
                "max_tres_per_job": "",
                "max_tres_per_user": "",
            }
        borrow_names = [borrow_qos(pool) for pool in pools]

        for tier in rules.tiers:
            victims = (
                [tier_qos(t) for t in tier.preemptible_tiers.all()] if tier.may_preempt else []
            )
            if tier.may_preempt:
                victims += borrow_names
            per_job = format_tres({GPU: tier.max_gpus_per_job}) if tier.max_gpus_per_job else ""
            fields = {
                "description": description(f"tier {tier.name}"),
                "priority": str(tier.scheduler_value),
                "preempt": format_list(victims),
                "preempt_mode": "requeue",
                "grp_tres": format_tres({GPU: tier.max_gpus_total}) if tier.max_gpus_total else "",
                "max_tres_per_job": per_job,
                "max_tres_per_user": per_job,
            }
            qos[tier_qos(tier)] = fields
            if tier.pk in protected_tiers:
                qos[tier_qos(tier, protected=True)] = {
                    **fields,
                    "description": description(f"tier {tier.name} never preempted"),
                    "preempt_mode": "cluster",
                }

        default_tier = rules.default_tier
        for pool, slug, project, quotas, forbidden, borrows in plans:
            account = project_account(pool, slug)
            maximum: dict[str, int] = defaultdict(int)
            guarantee: dict[str, int] = defaultdict(int)
            for quota in quotas:
                flavor = quota.quota.flavor
                top = quota.maximum
                if top is None:
                    top = max(capacities.get((pool.pk, flavor.pk), 0), quota.guarantee)
                for key in {GPU, f"{GPU}:{flavor.gres_type}" if flavor.gres_type else GPU}:
                    maximum[key] += top
                    guarantee[key] += quota.guarantee
            accounts[account] = self._account(
                f"project {project.project.name} in pool {pool.name}",
                pool_account(pool),
                sum(q.quota.fair_share_weight for q in quotas),
                dict(maximum),
            )
            allowed = [tier_qos(t, protected=forbidden) for t in project.allowed_tiers]
            names = list(allowed)
            if guarantee.get(GPU):
                top_tier = project.tier or default_tier
                g_name = guarantee_qos(pool, slug)
                qos[g_name] = {
                    # The name says whose: equal settings let one call set many of them.
                    "description": description(f"guarantee in pool {pool.name}"),
                    "priority": str(top_tier.scheduler_value if top_tier else 0),
                    "preempt": borrow_qos(pool),
                    "preempt_mode": "cluster",
                    "grp_tres": format_tres({k: v for k, v in guarantee.items() if v}),
                    "max_tres_per_job": "",
                    "max_tres_per_user": "",
                }
                names.append(g_name)
            if borrows:
                names.append(borrow_qos(pool))
            default = ""
            if default_tier is not None and default_tier in project.allowed_tiers:
                default = tier_qos(default_tier, protected=forbidden)
            elif allowed:
                default = allowed[-1]
            elif names:
                default = sorted(names)[0]
            for membership in project.project.memberships.all():
                user = membership.user.username.lower()
                if not SLURM_USER.match(user):
                    continue
                associations[association_name(user, account)] = {
                    "qos": format_list(names),
                    "default_qos": default,
                }
        return {QOS: qos, ACCOUNT: accounts, ASSOCIATION: associations, JOB: jobs}

    @staticmethod
    def _job_requests(
        slug: str,
        project: EffectiveProject,
        accounts: list[tuple[str, bool]],
        protected_tiers: set[int],
    ) -> dict[str, dict[str, str]]:
        """What the project's grants ask for its named jobs (resolved by ``settle``).

        ``tier``: the granted tier's QOS (empty: protection only); ``protect``: the job's
        class forbids preemption; ``accounts``: where the project's jobs run on this cluster
        (``protected_accounts``: those of forbidden-class quotas); ``base``: the tier a
        protected job keeps when its own QOS is no tier's.
        """
        protect = {
            job
            for job, klass in project.job_preemption_classes.items()
            if klass.kind == PreemptionKind.FORBIDDEN
        }
        any_forbidden = any(forbidden for _account, forbidden in accounts)
        requests = {}
        for job in sorted(set(project.job_tiers) | protect):
            tier = project.job_tiers.get(job)
            if job in protect:
                protected_tiers.update(t.pk for t in project.allowed_tiers)
            if tier is not None and (job in protect or any_forbidden):
                protected_tiers.add(tier.pk)
            requests[job] = {
                "project": slug,
                "tier": tier_qos(tier) if tier else "",
                "protect": "yes" if job in protect else "",
                "accounts": format_list(account for account, _f in accounts),
                "protected_accounts": format_list(account for account, f in accounts if f),
                "base": tier_qos(project.tier) if project.tier else "",
            }
        return requests

    @staticmethod
    def _account(text: str, parent: str, fairshare: int, tres: dict[str, int]) -> dict[str, str]:
        return {
            "description": description(text),
            "organization": ORGANIZATION,
            "parent": parent,
            "fairshare": str(fairshare),
            "grp_tres": format_tres(tres),  # type: ignore[arg-type]
        }

    # -- named jobs --

    def settle(
        self, *, desired: State, live: LiveState, applied: State
    ) -> tuple[State, list[Change]]:
        """Resolve the named jobs against the live queue.

        Returns the desired state with ``JOB`` holding, per job Arbiter moves (or keeps
        where it put it), the QOS it wants and the one to move back to, the user associations
        that must allow those QOS, and the named jobs left alone (``skip`` changes).
        """
        qos = desired.get(QOS, {})
        found_jobs = live.objects.get(JOB, {})
        associations = {name: dict(f) for name, f in desired.get(ASSOCIATION, {}).items()}
        tracked = applied.get(JOB, {})
        settled: dict[str, dict[str, str]] = {}
        skipped: list[Change] = []

        def allowed(association: str) -> set[str]:
            fields = associations.get(association) or live.objects[ASSOCIATION].get(association, {})
            return {name for name in fields.get("qos", "").split(",") if name}

        def tier_of(name: str) -> str:
            base = unprotected(name)
            return base if "." not in base and base in qos else ""

        for job, request in sorted(desired.get(JOB, {}).items(), key=_job_order):
            found = found_jobs.get(job)
            why = ""
            if not JOB_ID.match(job):
                why = _("not a Slurm job id")
            elif found is None:
                why = _("not in the queue (finished long ago, or never submitted here)")
            elif found["state"] != PENDING:
                why = _("%(state)s: only pending jobs are moved") % {
                    "state": found["state"].lower()
                }
            elif found["account"] not in request["accounts"].split(","):
                why = _("runs under account %(account)s, not one of project %(project)s") % {
                    "account": found["account"],
                    "project": request["project"],
                }
            if why or found is None:
                skipped.append(Change(kind=JOB, name=job, action=Action.SKIP, note=str(why)))
                if found is not None and job in tracked:
                    # Started while its grant lasts: still allowed, moved back if requeued later.
                    settled[job] = tracked[job]
                    association = association_name(found["user"], found["account"])
                    if association in associations:
                        associations[association]["qos"] = format_list(
                            allowed(association) | {tracked[job]["qos"]}
                        )
                continue
            current = tier_of(found["qos"])
            base = request["tier"] or current or request["base"]
            if request["tier"] and current and _priority(qos, current) > _priority(qos, base):
                base = current  # a grant only ever raises a job
            protect = request["protect"] or found["account"] in request["protected_accounts"]
            target = base + PROTECTED if protect and base else base
            association = association_name(found["user"], found["account"])
            if target not in qos:
                why = _("no QOS %(qos)s is managed here") % {"qos": target or "-"}
            elif target not in allowed(association) and association not in associations:
                why = _(
                    "the association of %(user)s with %(account)s is not Arbiter's and does "
                    "not allow QOS %(qos)s"
                ) % {"user": found["user"], "account": found["account"], "qos": target}
            if why:
                skipped.append(Change(kind=JOB, name=job, action=Action.SKIP, note=str(why)))
                continue
            if association in associations:
                associations[association]["qos"] = format_list(allowed(association) | {target})
            restore = tracked.get(job, {}).get("restore") or found["qos"]
            settled[job] = {"qos": target, "restore": restore}

        # Grants that ended: a job still pending where Arbiter put it goes back; one that
        # runs stays tracked until it leaves the queue (a requeued job is pending again).
        for job, previous in tracked.items():
            found = found_jobs.get(job)
            if (
                job in desired.get(JOB, {})
                or previous["qos"] == previous["restore"]
                or found is None
                or found["qos"] != previous["qos"]
            ):
                continue
            if found["state"] != PENDING:
                settled[job] = previous
                continue
            association = association_name(found["user"], found["account"])
            restore = previous["restore"]
            if restore not in allowed(association):
                fields = associations.get(association) or live.objects[ASSOCIATION].get(
                    association, {}
                )
                restore = fields.get("default_qos", "")
            if restore and restore != found["qos"]:
                settled[job] = {"qos": restore, "restore": restore}
        return {**desired, ASSOCIATION: associations, JOB: settled}, skipped

    # -- plan, drift --

    def plan(self, *, desired: State, live: LiveState) -> list[Change]:
        """The object changes, then a ``job`` update per pending job to move."""
        changes = plan_changes(kinds=KINDS, desired=desired, live=live, equal=values_equal)
        found_jobs = live.objects.get(JOB, {})
        for job, fields in sorted(desired.get(JOB, {}).items(), key=_job_order):
            found = found_jobs.get(job)
            target = fields.get("qos", "")
            if not target or not found or found["state"] != PENDING or found["qos"] == target:
                continue
            back = target == fields.get("restore")
            changes.append(
                Change(
                    kind=JOB,
                    name=job,
                    action=Action.UPDATE,
                    fields=(FieldChange(field="qos", live=found["qos"], desired=target),),
                    note=str(_("moved back: its grant ended") if back else _("named by a grant")),
                )
            )
        return changes

    def drift(self, *, applied: State, live: LiveState) -> list[DriftItem]:
        return drift_items(kinds=KINDS, applied=applied, live=live, equal=values_equal)

    # -- apply --

    def apply(self, *, plan: list[Change], desired: State, progress: Progress) -> ApplyResult:
        """Write the plan in as few ``sacctmgr -i`` calls as Slurm allows.

        1. one ``add qos a,b,...`` for new QOS, then their settings and the changed ones,
           grouped by identical settings (one ``modify qos`` per group);
        2. named jobs whose grant ended back to their old QOS (``scontrol update``, one call
           per QOS);
        3. one ``load`` for every new account and user association;
        4. account and association updates, grouped by identical settings;
        5. named jobs to the QOS their grants give them, one call per QOS;
        6. deletes: associations, then accounts (children first), then QOS.
        """
        start_writes = self.commands.writes
        warnings: list[str] = []
        by_action: dict[tuple[str, str], list[Change]] = defaultdict(list)
        for change in plan:
            by_action[(change.kind, change.action)].append(change)

        new_qos = by_action[(QOS, Action.CREATE)]
        if new_qos:
            progress(_("creating %(count)d QOS") % {"count": len(new_qos)})
            self.commands.sacctmgr_write("add", "qos", ",".join(change.name for change in new_qos))
        qos_sets: dict[tuple[tuple[str, str], ...], list[str]] = defaultdict(list)
        for change in new_qos + by_action[(QOS, Action.UPDATE)]:
            assignments = []
            for item in change.fields:
                value = item.desired
                if item.field in TRES_FIELDS:
                    value = _tres_assignment(item.live, item.desired)
                elif item.field == "preempt" and not value:
                    if change.action == Action.CREATE:
                        continue
                    # Slurm 22.05: emptying a Preempt list upsets slurmdbd's QOS cache.
                    warnings.append(
                        _(
                            "Cleared the Preempt list of QOS %(name)s: on Slurm 22.05 restart "
                            "slurmdbd before another QOS may preempt it."
                        )
                        % {"name": change.name}
                    )
                    value = CLEAR
                elif not value and change.action == Action.CREATE:
                    continue
                assignments.append((QOS_OPTIONS[item.field], value))
            if assignments:
                qos_sets[tuple(assignments)].append(change.name)
        for qos_assignments, names in qos_sets.items():
            progress(_("setting QOS %(names)s") % {"names": ", ".join(names[:5])})
            self.commands.sacctmgr_write(
                "modify",
                "qos",
                "where",
                f"name={','.join(names)}",
                "set",
                *_options(qos_assignments),
            )

        # Jobs go back to their old QOS before associations may stop allowing the one
        # Arbiter moved them to; raised jobs move once their associations allow the new one.
        moves = by_action[(JOB, Action.UPDATE)]
        backs = [c for c in moves if desired[JOB][c.name]["qos"] == desired[JOB][c.name]["restore"]]
        self._move_jobs(backs, warnings, progress)

        new_accounts = by_action[(ACCOUNT, Action.CREATE)]
        new_associations = by_action[(ASSOCIATION, Action.CREATE)]
        if new_accounts or new_associations:
            progress(
                _("loading %(accounts)d accounts and %(associations)d user associations")
                % {"accounts": len(new_accounts), "associations": len(new_associations)}
            )
            self.commands.sacctmgr_write(
                "load",
                "file=/dev/stdin",
                stdin=self._load_file(new_accounts, new_associations, desired),
            )

        account_sets: dict[tuple[tuple[str, str], ...], list[str]] = defaultdict(list)
        for change in by_action[(ACCOUNT, Action.UPDATE)]:
            account_assignments = tuple(
                (
                    ACCOUNT_OPTIONS[item.field],
                    _tres_assignment(item.live, item.desired)
                    if item.field in TRES_FIELDS
                    else item.desired,
                )
                for item in change.fields
            )
            account_sets[account_assignments].append(change.name)
        for account_assignments, names in account_sets.items():
            progress(_("updating accounts %(names)s") % {"names": ", ".join(names[:5])})
            self.commands.sacctmgr_write(
                "modify",
                "account",
                "where",
                f"name={','.join(names)}",
                f"cluster={self.cluster_name}",
                "set",
                *_options(account_assignments),
            )

        association_sets: dict[tuple, list[str]] = defaultdict(list)
        for change in by_action[(ASSOCIATION, Action.UPDATE)]:
            user, account = split_association(change.name)
            # QOS and DefaultQOS go together: the default must be in the list.
            fields = desired[ASSOCIATION][change.name]
            user_assignments = tuple((ASSOCIATION_OPTIONS[f], v) for f, v in fields.items())
            association_sets[(account, user_assignments)].append(user)
        for (account, user_assignments), users in association_sets.items():
            progress(_("updating users of %(account)s") % {"account": account})
            self.commands.sacctmgr_write(
                "modify",
                "user",
                "where",
                f"name={','.join(users)}",
                f"account={account}",
                f"cluster={self.cluster_name}",
                "set",
                *_options(user_assignments),
            )

        self._move_jobs([c for c in moves if c not in backs], warnings, progress)

        removed_users: dict[str, list[str]] = defaultdict(list)
        for change in by_action[(ASSOCIATION, Action.DELETE)]:
            user, account = split_association(change.name)
            removed_users[account].append(user)
        deleted_accounts = {change.name for change in by_action[(ACCOUNT, Action.DELETE)]}
        for account, users in removed_users.items():
            if account in deleted_accounts:
                continue  # deleting the account removes its associations
            progress(_("removing users from %(account)s") % {"account": account})
            self.commands.sacctmgr_write(
                "delete",
                "user",
                "where",
                f"name={','.join(users)}",
                f"account={account}",
                f"cluster={self.cluster_name}",
            )
        if deleted_accounts:
            # Children before parents: project accounts, pool accounts, then the root one.
            depth = {name: name.count(".") + (name != ROOT_ACCOUNT) for name in deleted_accounts}
            for level in sorted(set(depth.values()), reverse=True):
                names = sorted(name for name in deleted_accounts if depth[name] == level)
                progress(_("deleting accounts %(names)s") % {"names": ", ".join(names[:5])})
                # Accounts are global in slurmdbd: deleting only this cluster's association
                # would leave an account that a later "add" skips as existing.
                self.commands.sacctmgr_write(
                    "delete", "account", "where", f"name={','.join(names)}"
                )
        old_qos = [change.name for change in by_action[(QOS, Action.DELETE)]]
        if old_qos:
            progress(_("deleting QOS %(names)s") % {"names": ", ".join(old_qos[:5])})
            self.commands.sacctmgr_write("delete", "qos", "where", f"name={','.join(old_qos)}")
        return ApplyResult(
            calls=self.commands.calls,
            writes=self.commands.writes - start_writes,
            warnings=[str(w) for w in warnings],
        )

    def _move_jobs(self, changes: list[Change], warnings: list, progress: Progress) -> None:
        """One ``scontrol update`` per target QOS; a job that started meanwhile is reported."""
        by_qos: dict[str, list[str]] = defaultdict(list)
        for change in changes:
            by_qos[change.fields[0].desired].append(change.name)
        for qos, jobs in sorted(by_qos.items()):
            progress(
                _("moving jobs %(jobs)s to QOS %(qos)s") % {"jobs": ", ".join(jobs[:5]), "qos": qos}
            )
            for job, error in sorted(self.commands.move_jobs(jobs, qos).items()):
                warnings.append(
                    _("Job %(job)s was not moved to QOS %(qos)s: %(error)s")
                    % {"job": job, "qos": qos, "error": error}
                )

    def _load_file(self, accounts: list[Change], associations: list[Change], desired: State) -> str:
        """A ``sacctmgr load`` file: new accounts under their parents, then new users."""
        lines = [f"Cluster - '{self.cluster_name}'"]
        # Parents first: the root account, then pool accounts, then project accounts.
        new = sorted(
            (change.name for change in accounts),
            key=lambda name: (name != ROOT_ACCOUNT, name.count("."), name),
        )
        parent = None
        for name in new:
            fields = desired[ACCOUNT][name]
            if fields["parent"] != parent:
                parent = fields["parent"]
                lines.append(f"Parent - '{parent}'")
            options = [
                f"Description='{fields['description']}'",
                f"Organization='{fields['organization']}'",
                f"Fairshare={fields['fairshare']}",
            ]
            if fields["grp_tres"]:
                options.append(f"GrpTRES='{fields['grp_tres']}'")
            lines.append(f"Account - '{name}':" + ":".join(options))
        by_account: dict[str, list[str]] = defaultdict(list)
        for change in associations:
            user, account = split_association(change.name)
            by_account[account].append(user)
        for account in sorted(by_account):
            lines.append(f"Parent - '{account}'")
            for user in sorted(by_account[account]):
                fields = desired[ASSOCIATION][association_name(user, account)]
                options = [f"QOS='{fields['qos']}'"]
                if fields["default_qos"]:
                    options.append(f"DefaultQOS='{fields['default_qos']}'")
                lines.append(f"User - '{user}':" + ":".join(options))
        return "\n".join(lines) + "\n"

    def verify(self, *, desired: State) -> list[Change]:
        """Read back: the changes that remain (empty when the scheduler holds the plan)."""
        live = self.read_live(jobs=desired.get(JOB, {}))
        return [
            change
            for change in self.plan(desired=desired, live=live)
            if change.action not in (Action.CONFLICT, Action.SKIP)
        ]

    # -- slurm.conf --

    def config_lines(self, *, rules: EffectiveRules) -> list[str]:
        return slurm_conf_lines(rules.tiers)


def _job_order(item: tuple[str, object]) -> tuple[int, str]:
    return (len(item[0]), item[0])  # numeric ids of the same length sort as numbers


def _priority(qos: dict[str, dict[str, str]], name: str) -> int:
    value = qos.get(name, {}).get("priority", "")
    return int(value) if value.isdigit() else 0


def _tres_assignment(live: str, desired: str) -> str:
    """Set the desired TRES and clear (``=-1``) the ones no longer wanted: Slurm merges."""
    wanted: dict[str, int | str] = dict(parse_tres(desired))
    for key in parse_tres(live):
        wanted.setdefault(key, -1)
    return format_tres(wanted) if wanted else ""


def _options(assignments: Iterable[tuple[str, str]]) -> list[str]:
    return [
        f"{option}=" if value == CLEAR else f"{option}={value}"
        for option, value in assignments
        if value != ""
    ]


def slurm_conf_lines(tiers: Iterable[PriorityTier]) -> list[str]:
    """The multifactor settings that express the tiers' aging (Arbiter does not edit them).

    Slurm ages every pending job alike: the age factor grows from 0 at submit to 1 at
    ``PriorityMaxAge``. So ``PriorityMaxAge`` is the earliest wait after which a tier ages,
    and ``PriorityWeightAge`` is the smallest raise a tier may get before its cap, in the
    units of ``PriorityWeightQOS`` (which must dominate, see deploy/slurm). Aging never
    preempts: with ``preempt/qos`` only a job's QOS decides what it may preempt.
    """
    tiers = list(tiers)
    top = max((tier.scheduler_value for tier in tiers), default=0)
    aging = [tier for tier in tiers if tier.aging_after_minutes and tier.aging_cap_id]
    lines = ["PriorityType=priority/multifactor", "PriorityWeightQOS=100000"]
    if not aging or not top:
        return [*lines, "PriorityWeightAge=0"]
    weight_qos = 100000
    raises = []
    for tier in aging:
        cap = tier.aging_cap
        room = (cap.scheduler_value - tier.scheduler_value) if cap else 0
        score_gap = max((cap.score - tier.score) if cap else 0, 1)
        step = (tier.aging_step or 0) / score_gap * room
        # Never reach the cap tier's own priority: one point below the gap at most.
        raise_value = max(min(step, room - 1), 0)
        raises.append(int(weight_qos * raise_value / top))
    minutes = min(tier.aging_after_minutes or 0 for tier in aging)
    days, rest = divmod(minutes, 24 * 60)
    return [
        *lines,
        f"PriorityWeightAge={min(raises)}",
        f"PriorityMaxAge={days}-{rest // 60:02d}:{rest % 60:02d}:00",
    ]


def backend_timeout() -> float:
    return float(getattr(settings, "ARBITER_SLURM_TIMEOUT", 60))
