"""The Kubernetes/Kueue backend: effective rules compiled into Kueue ``v1beta2`` objects.

What Arbiter generates (names are slugs lowercased, ``_`` as ``-``):

* per tier ``<tier>``: a ``scheduling.k8s.io/v1`` ``PriorityClass`` (``value`` = the tier's
  scheduler value, ``globalDefault`` for the default tier, ``preemptionPolicy`` ``Never``
  for every tier: only Kueue preempts, for quota, and kube-scheduler never evicts pods of
  another tier; the tier order still reaches kube-scheduler as ``value``, the order of its
  queue) and a Kueue
  ``WorkloadPriorityClass`` with the same value; jobs pick a tier with
  ``priorityClassName`` / the label ``kueue.x-k8s.io/priority-class``;
* per flavor used by the cluster's quotas ``<flavor>``: a ``ResourceFlavor`` with the
  flavor's node labels, taints, and a toleration for each taint;
* per pool ``<pool>``: a ``Cohort`` (``parentName`` = the parent pool when the cluster serves
  it, ``fairSharing.weight`` 1, and as its own ``nominalQuota`` per flavor the capacity the
  projects' guarantees leave over, shared by all of them);
* per project and pool ``<project>--<pool>`` (no dots): a ``ClusterQueue`` in the pool's cohort,
  admitting the project's namespace only (``namespaceSelector`` on
  ``kubernetes.io/metadata.name``), with one resource group over ``nvidia.com/gpu``:
  per flavor ``nominalQuota`` = guarantee, ``borrowingLimit`` = borrow limit (absent =
  unlimited; ``0`` on a flavor whose preemption class is *forbidden*: work that may never be
  preempted never runs on borrowed GPUs, where reclaim would preempt it), ``lendingLimit``
  = lending limit; ``preemption`` from the project's top tier (see ``desired.preemption``);
  ``fairSharing.weight`` = the quotas' fair-share weights averaged by guarantee;
* a ``LocalQueue`` ``<pool>`` in the project's namespace pointing at that ClusterQueue (and,
  for the namespace's first pool, a second one named ``default``: with the documented Kueue
  configuration Kueue manages Jobs without a queue name in governed namespaces and puts
  them there, so no GPU Job skips the quotas), and
  the ``Namespace`` itself when it does not exist (the rule is the cluster's namespace
  template, ``{project}`` by default, with ``{pool}`` also available). Arbiter creates
  missing namespaces but never deletes one (it holds the team's workloads); an existing
  namespace is used as it is;
* per project namespace a ``ValidatingAdmissionPolicy`` and its binding
  ``arbiter-tiers-<namespace>`` (``desired.tier_policy``): Jobs there may name only the
  tiers the project's effective rules allow (grants included), by label
  ``kueue.x-k8s.io/priority-class`` or ``priorityClassName``; and a
  ``MutatingAdmissionPolicy`` (``admissionregistration.k8s.io/v1beta1``) with its binding of
  the same name: a Job created there naming no tier (neither) gets the label
  ``kueue.x-k8s.io/priority-class=<the project's effective tier>`` (grants included), not the
  cluster's default. Kubernetes 1.34 and 1.35 serve that kind only when enabled (feature gate
  and runtime-config, see deploy/k8s/up.sh); the backend asks the server (API discovery), and
  where it is not served the fallback is the validating policy refusing a Job that names no
  tier unless the project's tier is the cluster default (which Kueue gives such a Job). The
  plan's enforcement table says which of the two holds.

How Kueue enforces each rule, or that it does not and why, is the per-rule table of
``enforcement`` shown in every plan and dry run.

Every object carries ``app.kubernetes.io/managed-by: arbiter``, the rules revision that last
wrote it (``arbiter.governance/rules-revision``) and the rule it comes from (annotation
``arbiter.governance/source``). Only objects with that label are ever changed or pruned; a
name clash with a hand-made object is a *conflict*, shown and left alone.

Active grants are already in the effective rules (raised borrow limits, a higher tier, a
stricter preemption class), so they change the objects they touch and the sync after
their expiry reverts them. Grants naming jobs, and tier GPU caps, have no Kueue object:
the plan reports them.

The Kueue configuration this mapping assumes is ``deploy/k8s/kueue-config.yaml`` (the lab
runs Kueue with it): ``manageJobsWithoutQueueName`` with ``managedJobsNamespaceSelector`` on
Arbiter's label; fair sharing on (so the weights act; Kueue then ignores
``borrowWithinCohort``, which Arbiter leaves ``Never``); ``resources.excludeResourcePrefixes``
for cpu, memory and the other node resources, as the queues cover GPUs only.

Validation (``schema``) runs before anything is applied; the plan is checked with a
server-side dry run; apply is server-side apply with field manager ``arbiter``; fields of
Arbiter's own objects another manager took over are taken back (apply forced on Arbiter's
fields, the plan's note names whom from), values others added to a list or map Arbiter sets
are removed by a merge patch; objects Arbiter did not make are conflicts, left alone.
"""

from queues.schedulers.kueue.desired import DesiredObjects, desired_objects

from .backend import KueueBackend
from .client import KubeClient, KueueConnection
from .export import ExportResult, export_objects
from .schema import KueueValidationError, validate

__all__ = [
    "DesiredObjects",
    "ExportResult",
    "KubeClient",
    "KueueBackend",
    "KueueConnection",
    "KueueValidationError",
    "desired_objects",
    "export_objects",
    "validate",
]
