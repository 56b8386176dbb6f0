"""Load ColdFront with the shape of bench/pages.py's organisation (for bench/peer_coldfront.py).

Runs in ColdFront's own virtual environment with ColdFront's settings
(``coldfront.config.settings``, database from ``DB_URL``), never in Arbiter's: it imports
ColdFront, which Arbiter never does.
bench/peer_coldfront.py starts it as ``<peer venv>/bin/python bench/peer_coldfront_load.py
--projects N --changes C --requests R``, after ``coldfront initial_setup`` (migrations and
ColdFront's default choices) on an empty database.

The organisation, per project as in bench/pages.py: 3 users (the lead as ColdFront's PI and
project manager, two members as project users), 2 allocations (one on each of 2 cluster
resources, "Train (A100)" and "Infer (H100)", like Arbiter's 2 quotas in 2 pools), each with
the 3 project users as allocation users and 2 attributes (the guarantee and the borrow limit).
Arbiter's rule changes become allocation change requests (pending, each with an attribute
change), as many as Arbiter has; Arbiter's upgrade requests become allocation requests, a
third allocation of status "New" on as many projects (the allocation request list shows those).
Plus the signed-in user: ``bench-ops``, staff and superuser (Arbiter's ops sees everything too).
Rows are bulk-created, with history rows where ColdFront keeps history.
"""

import argparse
import os
from datetime import date, timedelta
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coldfront.config.settings")

import django

django.setup()

from coldfront.core.allocation import models as am  # type: ignore[import-not-found]  # noqa: E402
from coldfront.core.project import models as pm  # type: ignore[import-not-found]  # noqa: E402
from coldfront.core.resource import models as rm  # type: ignore[import-not-found]  # noqa: E402
from coldfront.core.user.models import UserProfile  # type: ignore[import-not-found]  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import transaction  # noqa: E402
from simple_history.utils import bulk_create_with_history  # noqa: E402

FINISHED = "bench-fixture-finished"


def _bulk(model: Any, rows: list[Any]) -> list[Any]:
    if hasattr(model, "history"):
        return list(bulk_create_with_history(rows, model, batch_size=2000))
    return list(model.objects.bulk_create(rows, batch_size=2000))


@transaction.atomic
def load(projects: int, changes: int, requests: int) -> None:
    ops = User.objects.create_user(
        username="bench-ops", is_staff=True, is_superuser=True, first_name="Bench", last_name="Ops"
    )
    del ops
    cluster = rm.ResourceType.objects.get(name="Cluster")
    resources = [
        rm.Resource.objects.create(
            name=name, description=f"{name} GPU pool", resource_type=cluster, is_allocatable=True
        )
        for name in ("Train (A100)", "Infer (H100)")
    ]
    users = User.objects.bulk_create(
        [
            User(username=f"user-{i}-{n}", first_name=f"User {i}.{n}", email=f"u{i}{n}@example.org")
            for i in range(projects)
            for n in (0, 1, 2)
        ],
        batch_size=2000,
    )
    UserProfile.objects.bulk_create(
        [UserProfile(user=u, is_pi=u.username.endswith("-0")) for u in users], batch_size=2000
    )
    UserProfile.objects.get_or_create(user=User.objects.get(username="bench-ops"))
    active = pm.ProjectStatusChoice.objects.get(name="Active")
    created = _bulk(
        pm.Project,
        [
            pm.Project(
                title=f"Project {i:05d}",
                pi=users[3 * i],
                description="Benchmark project",
                status=active,
            )
            for i in range(projects)
        ],
    )
    created = list(pm.Project.objects.order_by("pk"))
    manager = pm.ProjectUserRoleChoice.objects.get(name="Manager")
    member = pm.ProjectUserRoleChoice.objects.get(name="User")
    pu_active = pm.ProjectUserStatusChoice.objects.get(name="Active")
    _bulk(
        pm.ProjectUser,
        [
            pm.ProjectUser(
                project=p,
                user=users[3 * i + n],
                role=manager if n == 0 else member,
                status=pu_active,
            )
            for i, p in enumerate(created)
            for n in (0, 1, 2)
        ],
    )
    today = date.today()
    status = {s.name: s for s in am.AllocationStatusChoice.objects.all()}
    rows = [
        am.Allocation(
            project=p,
            status=status["Active"],
            quantity=2,
            start_date=today - timedelta(days=30),
            end_date=today + timedelta(days=180 - i % 200),
            justification="Benchmark quota",
            is_changeable=True,
        )
        for i, p in enumerate(created)
        for _ in resources
    ]
    # Arbiter's upgrade requests: a new allocation waiting for review on as many projects.
    rows += [
        am.Allocation(
            project=created[(25 * k) % projects],
            status=status["New"],
            quantity=4,
            start_date=today + timedelta(days=1),
            end_date=today + timedelta(days=3),
            justification="Benchmark",
        )
        for k in range(requests)
    ]
    _bulk(am.Allocation, rows)
    allocations = list(am.Allocation.objects.select_related("project").order_by("pk"))
    through = am.Allocation.resources.through
    through.objects.bulk_create(
        [
            through(allocation_id=a.pk, resource_id=resources[k % 2].pk)
            for k, a in enumerate(allocations)
        ],
        batch_size=2000,
    )
    au_active = am.AllocationUserStatusChoice.objects.get(name="Active")
    index = {p.pk: i for i, p in enumerate(created)}
    _bulk(
        am.AllocationUser,
        [
            am.AllocationUser(
                allocation=a, user=users[3 * index[a.project_id] + n], status=au_active
            )
            for a in allocations
            for n in (0, 1, 2)
        ],
    )
    guarantee = am.AllocationAttributeType.objects.get(name="Core Usage (Hours)")
    borrow = am.AllocationAttributeType.objects.get(name="slurm_specs")
    guarantee.is_changeable = True
    guarantee.save()
    attributes = _bulk(
        am.AllocationAttribute,
        [
            am.AllocationAttribute(allocation_attribute_type=kind, allocation=a, value=value)
            for a in allocations[: 2 * projects]
            for kind, value in ((guarantee, "2"), (borrow, "GrpTRES=gres/gpu=4"))
        ],
    )
    attributes = list(
        am.AllocationAttribute.objects.filter(allocation_attribute_type=guarantee).order_by(
            "allocation_id"
        )
    )
    pending = am.AllocationChangeStatusChoice.objects.get(name="Pending")
    picked = [attributes[(40 * k) % len(attributes)] for k in range(changes)]
    made = _bulk(
        am.AllocationChangeRequest,
        [
            am.AllocationChangeRequest(
                allocation_id=a.allocation_id, status=pending, justification="Benchmark"
            )
            for a in picked
        ],
    )
    made = list(am.AllocationChangeRequest.objects.order_by("pk"))
    _bulk(
        am.AllocationAttributeChangeRequest,
        [
            am.AllocationAttributeChangeRequest(
                allocation_change_request=c, allocation_attribute=a, new_value="3"
            )
            for c, a in zip(made, picked, strict=True)
        ],
    )
    User.objects.create_user(username=FINISHED, is_active=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", type=int, required=True)
    parser.add_argument("--changes", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True)
    args = parser.parse_args()
    load(args.projects, args.changes, args.requests)
    print(
        f"coldfront: loaded {args.projects} projects, {args.changes} change requests,"
        f" {args.requests} requests"
    )


if __name__ == "__main__":
    main()
