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

from .backend import SlurmBackend
from .commands import SlurmCommands, backend_timeout
from .config import slurm_conf_lines
from .values import parse_tres

__all__ = [
    "SlurmBackend",
    "SlurmCommands",
    "backend_timeout",
    "parse_tres",
    "slurm_conf_lines",
]
