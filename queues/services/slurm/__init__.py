"""The Slurm backend: effective rules compiled into QOS, accounts and user associations.

What Arbiter creates (all names lowercase, as Slurm stores them):

* ``<tier>``: a QOS per priority tier. ``Priority`` is the tier's scheduler value,
  ``GrpTRES=gres/gpu=<tier cap>``, ``MaxTRESPerJob=gres/gpu=<per-job cap>`` (per job only),
  ``Preempt=`` the plain QOS of the tiers it may preempt (and the
  pools' borrow QOS), ``PreemptMode=requeue``.
* ``<tier>-protected``: the same tier for work whose preemption class is *forbidden*. It is
  in no QOS's ``Preempt`` list, so that work is never preempted.
* ``<pool>.borrow``: one shared, preemptible QOS per pool for work *above* a project's
  guarantee (priority 0, ``PreemptMode=requeue``, ``GraceTime`` the largest reclaim grace of
  its quotas); ``<pool>.borrow.<class>`` for each cautious preemption class, with
  ``PreemptExemptTime`` its minimum runtime before preemption.
* ``<tier>.<class>``: a preemptible tier's QOS for a cautious class with a minimum runtime:
  the same settings plus ``PreemptExemptTime``, in the same ``Preempt`` lists; the class's
  projects get it instead of the tier's QOS, so their work is exempt wherever it runs.
* ``<pool>.<project>.guarantee``: a QOS per project with a guarantee, capped with
  ``MaxTRESPerAccount`` (typed per GRES type of the pool, and the untyped total), at the
  project's tier priority, that may preempt the pool's borrow QOS.
* Accounts ``arbiter`` → ``<pool>`` → ``<pool>.<project>`` (``Organization=arbiter``), with
  ``Fairshare`` the sum of the project's fair-share weights in the pool and ``GrpTRES`` its
  maximum: the untyped total and one typed limit per GRES type of the pool, ``0`` for the
  types it has no quota for.
* A user association per project member and account, with the QOS its tiers allow (the
  ``-protected`` ones for forbidden-class work), its guarantee QOS and, unless its work may
  not be preempted, its borrow QOS; ``DefaultQOS`` is the project's effective tier.

Why this shape (measured on Slurm 22.05): Slurm uses, per TRES and per kind of limit, the
first limit it finds (partition QOS, job QOS, user association, accounts upward), so a QOS
``GrpTRES`` on ``gres/gpu`` switches the account's ``gres/gpu`` limit off; and untyped GPU
requests are checked against untyped limits only. Typed requests are therefore held natively
everywhere; untyped ones natively except on GPU types without quota and in capped tiers.
There Arbiter's ``job_submit`` Lua plugin (``submit.py``, ``job_submit.lua``) rewrites an
untyped request to the one GPU type the project may use, or refuses it with a message, before
the job exists; the guard (``guard.py``) stays as a backstop for a plugin not installed or a
table older than the rules. ``enforcement.py`` lists, per rule, how it is enforced.

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

QOS are created already marked by a ``Description`` that starts with ``arbiter:`` (in the
same ``add`` command), accounts by ``Organization=arbiter``; user associations under a
managed account may be Arbiter's. What is Arbiter's own is the cluster's *ledger* (the names
it created): a marked object that is neither wanted nor in the ledger was made by hand and
is shown as drift, never deleted (ops may remove one explicitly, with a reason). A name
clash with an unmarked object is a *conflict*: the sync "needs attention" and stays due.
"""

from queues.schedulers.slurm.config import slurm_conf_lines
from queues.schedulers.slurm.values import parse_tres

from .backend import SlurmBackend
from .commands import SlurmCommands, backend_timeout, commands_for

__all__ = [
    "SlurmBackend",
    "SlurmCommands",
    "backend_timeout",
    "commands_for",
    "parse_tres",
    "slurm_conf_lines",
]
