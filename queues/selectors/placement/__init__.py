"""Placement: where and how a project submits a job, and whether it may right now.

``placement`` answers ``GET /api/v1/placement/`` (the hot path of CI pipelines). The names it
gives are the ones the scheduler compilers generate: the Slurm accounts, QOS and user
associations of ``slurm.desired.desired_state`` and the namespaces, LocalQueues and
WorkloadPriorityClasses of ``kueue.desired.desired_objects``, both compiled from the
effective rules (``governance.selectors.effective_rules``, grants included).

Compiling the whole organisation takes a while, so the result is kept per process and reused
while it is still right. It is right while

* no governed rule changed: the *fingerprint* is the newest history row of every governed
  model placement reads (rules, grants, clusters) and the newest rules revision, read in one
  query of index-only lookups per request. Every write of a governed row makes a history row
  (house rule), so an applied change, a grant made, revoked, started or ended by the beat
  task, a seed or an admin edit all change it;
* the next grant boundary has not passed: a grant starts or ends at its own instant, before
  the beat task records it, so the compiled rules are valid only until the earliest
  ``starts_at``/``ends_at``/``revoked_at`` after the instant they were compiled at.

The project (by its slug) and the workload evidence (running GPUs) are read per request, in
the same query as the fingerprint (``placement_for``, the API's; on PostgreSQL a statement
prepared once per connection). So a warm answer costs that one query, whatever the size of
the organisation. With an API token, the API reads the token in that same query too
(``token_read_placement``): the hot path makes one query, as a request that only
authenticates its token does.

``compiled`` holds the cache and the compilation, ``answer`` one answer, ``routes`` the
Slurm or Kueue route it gives.
"""

from .answer import (
    PlacementInputError,
    PreRead,
    Refusal,
    placement,
    placement_for,
    token_read_placement,
)
from .compiled import compiled_placement, placement_cache_clear

__all__ = [
    "PlacementInputError",
    "PreRead",
    "Refusal",
    "compiled_placement",
    "placement",
    "placement_cache_clear",
    "placement_for",
    "token_read_placement",
]
