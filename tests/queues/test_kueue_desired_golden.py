"""The compiled Kueue objects of a fixed organisation, pinned byte for byte.

The desired objects and their validation are tuned for speed (bench/sync_kueue.py); this
test keeps every such change a pure speed-up: the manifests (as the export writes them),
the rule behind each field and the notes must stay what they were when the file
``data/kueue_desired_golden.yaml`` was written (by the code before the speed work).
Regenerate it only for a deliberate change of the objects:
``ARBITER_GOLDEN_WRITE=1 .venv/bin/pytest tests/queues/test_kueue_desired_golden.py``.
"""

import os
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from governance import services as rules
from governance.models import GrantKind, PoolCapacity, Terms
from governance.selectors import effective_rules
from queues.schedulers.kueue.desired import DesiredObjects, desired_objects
from queues.services.kueue.export import dump
from queues.services.kueue.schema import validate
from tests.conftest import REASON

GOLDEN = Path(__file__).parent / "data" / "kueue_desired_golden.yaml"


def _grant(org, project, **terms):
    now = timezone.now()
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=project,
        terms=Terms(
            starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=2), **terms
        ),
    )


def _organisation(org) -> None:
    """Projects of every shape: both pools, both flavors, no borrow limit, lending limits, a
    forbidden class, a project without quotas in a pool, a slug with ``_``, and grants of
    every kind (a quota exception, a lifted limit, tier upgrades for all and for named jobs,
    protection for all and for named jobs)."""
    vision, _q = org.project("vision", guarantee=8, borrow=4, lending=2)
    org.project("vision", flavor=org.h100, guarantee=2, borrow=None)
    serving, _q = org.project(
        "serving", guarantee=4, preemption_class=org.forbidden, tier=org.production
    )
    org.project("eu_team", pool=org.child, guarantee=0, borrow=6)
    org.project("eu_team", pool=org.pool, flavor=org.h100, guarantee=1, borrow=0, lending=0)
    nlp, _q = org.project("nlp", tier=org.regular, guarantee=3, borrow=None)
    org.project("nlp", pool=org.child, flavor=org.h100, guarantee=2, borrow=1)
    _grant(
        org, vision, kind=GrantKind.QUOTA_EXCEPTION, pool=org.pool, flavor=org.a100, extra_gpus=6
    )
    _grant(
        org,
        nlp,
        kind=GrantKind.QUOTA_EXCEPTION,
        pool=org.pool,
        flavor=org.a100,
        lift_borrow_limit=True,
    )
    _grant(org, nlp, kind=GrantKind.PRIORITY_UPGRADE, tier=org.production)
    _grant(org, vision, kind=GrantKind.PRIORITY_UPGRADE, tier=org.production, job_ids=("41",))
    _grant(org, vision, kind=GrantKind.PREEMPTION_PROTECTION, preemption_class=org.forbidden)
    _grant(
        org,
        serving,
        kind=GrantKind.PREEMPTION_PROTECTION,
        preemption_class=org.forbidden,
        job_ids=("7", "8"),
    )


def _yaml(value: object) -> str:
    """As ``export.dump`` writes a manifest."""
    return yaml.safe_dump(
        value, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100
    )


def golden_objects(org, template: str, mutating: bool) -> DesiredObjects:
    """The desired objects of the golden organisation's cluster, at revision 41."""
    pools = list(org.cluster.pools.all())
    capacities = {
        (c.pool_id, c.flavor_id): c.gpus for c in PoolCapacity.objects.filter(pool__in=pools)
    }
    return desired_objects(
        rules=effective_rules(at=timezone.now()),
        pools=pools,
        capacities=capacities,
        namespace_template=template,
        revision=41,
        mutating=mutating,
    )


def _compiled(org, template: str, mutating: bool) -> str:
    objects = golden_objects(org, template, mutating)
    assert validate(objects) == []
    return "".join(
        [f"# {template} mutating={mutating}\n"]
        + [f"---\n{dump(manifest)}" for manifest in objects.manifests]
        + ["--- # sources\n", dump({f"{k} {n}": s for (k, n), s in objects.sources.items()})]
        + ["--- # notes\n", _yaml([list(note) for note in objects.notes])]
    )


def test_the_compiled_objects_are_the_pinned_ones(org):
    _organisation(org)
    text = "".join(
        _compiled(org, template, mutating)
        for template, mutating in (("{project}", True), ("{project}-{pool}", False))
    )
    if os.environ.get("ARBITER_GOLDEN_WRITE"):
        GOLDEN.write_text(text)
        pytest.skip("golden file written")
    assert text == GOLDEN.read_text()
