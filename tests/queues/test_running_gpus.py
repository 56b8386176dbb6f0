"""GPUs running have one definition (``queues.selectors.definitions.running_gpus``), fractions
kept: a job running on half a GPU shows as 0.5 on every page and API that shows what a project
runs, and counts as 0.5 where running GPUs are compared (the placement's headroom)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.selectors import workload_evidence
from queues.models import EventKind, WorkloadJob
from queues.selectors import definitions
from queues.selectors.placement import compiled
from queues.services.workload import JobEvent, events_ingest
from queues.services.workload.positions import running_gpus
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def half(world):
    """Vision runs one job on half an A100 (and nothing else)."""
    now = timezone.now()
    events_ingest(
        events=[
            JobEvent(
                source="lab",
                event_id=f"half-{kind}",
                job_id="half",
                time=now - timedelta(minutes=minutes),
                kind=kind,
                gpus=0.5,
                project=world.vision,
                flavor=world.a100,
            )
            for kind, minutes in [(EventKind.SUBMITTED, 20), (EventKind.STARTED, 10)]
        ]
    )
    compiled.placement_cache_clear()
    return world


def test_the_definition_keeps_the_fraction(half):
    jobs = WorkloadJob.objects.filter(project=half.vision)
    assert definitions.running_gpus(jobs, by=("flavor_id",)) == {(half.a100.pk,): 0.5}
    assert running_gpus()[(half.vision.pk, half.a100.pk)] == 0.5  # the quota positions


def test_the_placements_prepared_read_is_the_definition(half):
    """The placement's one query (by id, by slug, with a token) embeds the SQL Django compiles
    from the definition, and reads what it reads: half an A100, a quarter GPU without a
    flavor, and nothing of a pending job."""
    now = timezone.now()
    events_ingest(
        events=[
            JobEvent(
                source="lab",
                event_id=f"{job}-{kind}",
                job_id=job,
                time=now - timedelta(minutes=minutes),
                kind=kind,
                gpus=gpus,
                project=half.vision,
                flavor=flavor,
            )
            for job, gpus, flavor, kind, minutes in [
                ("quarter", 0.25, None, EventKind.SUBMITTED, 20),
                ("quarter", 0.25, None, EventKind.STARTED, 10),
                ("waiting", 3.0, half.a100, EventKind.SUBMITTED, 5),
            ]
        ]
    )
    jobs = WorkloadJob.objects.filter(project=half.vision)
    assert definitions.running_gpus(jobs, by=("flavor_id",)) == {
        (half.a100.pk,): 0.5,
        (None,): 0.25,
    }
    by_id = compiled._read(half.vision.pk, half.a100.pk)
    by_slug = compiled._read(None, half.a100.pk, slug="vision")
    for row in (by_id, by_slug):
        assert (float(row[-2]), float(row[-1])) == (0.5, 0.25)
    rest = compiled._read_sql()["by_id"]
    for flavor in ("%s", None):
        embedded = definitions.running_gpus_sql(project="%s", flavor=flavor)
        assert embedded in rest
        rest = rest.replace(embedded, "")
    assert "SUM(" not in rest.upper()  # no sum of its own beside the definition's


def test_the_project_workload_page_and_the_home_page_show_half_a_gpu(half, lead):
    page = login(lead).get(reverse("project_workload", args=["vision"])).content.decode()
    assert '<td class="num">0.5</td>' in page
    home = login(lead).get(reverse("home")).content.decode()
    assert "1 running (0.5 GPUs)" in home


def test_the_job_wait_page_and_api_show_half_a_gpu(half, lead, api_client):
    page = login(lead).get(reverse("job_wait"), {"job": "half", "source": "lab"})
    assert '<td class="num">0.5</td>' in page.content.decode()
    api_client.force_authenticate(lead)
    answer = api_client.get(reverse("api_job_wait", args=["half"]), {"source": "lab"}).json()
    running = {use["flavor"]: use["running"] for use in answer["quota"]}
    assert running[half.a100.slug] == 0.5, answer


def test_the_placement_api_counts_half_a_gpu(half, lead, api_client):
    api_client.force_authenticate(lead)
    answer = api_client.get(
        reverse("api_placement"),
        {"project": "vision", "tier": "key", "gpus": 1, "flavor": half.a100.slug},
    ).json()
    assert answer["headroom"]["running_gpus"] == 0.5, answer
    assert answer["headroom"]["under_guarantee"] == answer["headroom"]["guarantee"] - 0.5


def test_the_approvers_evidence_shows_half_a_gpu(half):
    evidence = workload_evidence(project=half.vision, at=timezone.now())
    flavors = {row["flavor"]: row["running"] for row in evidence["usage"]["flavors"]}
    assert flavors[str(half.a100)] == 0.5
