"""Why is my job waiting: the page, the API, the project's jobs page, and who may see what."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.translation import override
from rest_framework.test import APIClient

from queues.models import EventKind, WaitCategory
from queues.selectors import job_wait_explanation, project_workload
from queues.services.workload import JobEvent, events_ingest
from tests.conftest import login


def ingest(world, job, reason, *, project=None, gpus=4, tier=None, started=False, **extra):
    now = timezone.now()
    events = [
        JobEvent(
            source="hpc",
            event_id=f"{job}:submit",
            job_id=job,
            time=now - timedelta(minutes=30),
            kind=EventKind.SUBMITTED,
            project=project or world.vision,
            tier=tier or world.key,
            flavor=world.a100,
            gpus=gpus,
            **extra,
        ),
        JobEvent(
            source="hpc",
            event_id=f"{job}:pending",
            job_id=job,
            time=now - timedelta(minutes=29),
            kind=EventKind.PENDING,
            reason=reason,
        ),
    ]
    if started:
        events.append(
            JobEvent(
                source="hpc",
                event_id=f"{job}:start",
                job_id=job,
                time=now - timedelta(minutes=20),
                kind=EventKind.STARTED,
            )
        )
    events_ingest(events=events)


@pytest.fixture
def jobs(world):
    # Vision (guarantee 24, maximum 40 A100) runs 40: at its limit.
    ingest(world, "900", "Priority", gpus=40, started=True)
    ingest(world, "901", "AssocGrpGRES", gpus=8)
    ingest(world, "902", "Dependency", gpus=1)
    ingest(world, "903", "BadConstraints", gpus=1, constraints="nvlink")
    ingest(world, "904", "Resources", gpus=2)
    ingest(world, "905", "Priority", gpus=1, tier=world.exploratory)
    ingest(world, "906", "NewReasonNobodyKnows", gpus=1)
    ingest(world, "910", "Priority", project=world.speech, gpus=2, tier=world.production)
    return world


@pytest.mark.parametrize(
    "job, category, words",
    [
        ("901", WaitCategory.QUOTA, "Your project uses 40 of 40 A100 80G GPUs in the job"),
        ("902", WaitCategory.DEPENDENCY, "jobs it depends on"),
        ("903", WaitCategory.PLACEMENT, "The constraint “nvlink” matches no node"),
        # 64 A100 in the job's pool, 40 run: 24 are free, so "resource" is not supported.
        ("904", "unknown", "(capacity 64, running 40, free 24, asked 2)"),
        ("905", WaitCategory.QUEUE_RULE, "2 jobs that compete for the same GPUs"),
        ("906", "unknown", "NewReasonNobodyKnows"),
    ],
)
def test_each_category_has_its_next_step(jobs, member, job, category, words):
    response = login(member).get("/jobs/wait/", {"job": job})
    assert response.status_code == 200
    explanation = response.context["explanation"]
    assert explanation.category == category
    assert words in explanation.next_step
    assert 28 <= explanation.waited_minutes <= 31
    assert words.split("“")[0] in response.content.decode()


def test_quota_step_links_to_a_prefilled_request(jobs, lead):
    response = login(lead).get("/jobs/wait/", {"job": "901"})
    url = response.context["explanation"].action_url
    assert url == "/requests/new/?kind=quota_exception&project=vision"
    form = login(lead).get(url).context["form"]
    assert form.initial["project"].slug == "vision" and form.initial["kind"] == "quota_exception"


def test_jobs_of_higher_tiers_ahead_and_pool_evidence(jobs):
    from queues.models import WorkloadJob

    low = WorkloadJob.objects.get(job_id="905")
    explanation = job_wait_explanation(low)
    # Only the jobs that could start and compete for the same flavor and pool: not the ones
    # held by a quota, a dependency, a constraint or an unknown reason.
    assert {j["job_id"] for j in explanation.ahead} == {"904", "910"}
    assert explanation.ahead_count == 2
    use = {u.flavor.slug: u for u in explanation.use}
    assert (use["a100-80g"].running, use["a100-80g"].guarantee, use["a100-80g"].maximum) == (
        40,
        24,
        40,
    )


def test_category_in_chinese(jobs, member):
    with override("zh-hans"):
        response = login(member).get("/jobs/wait/", {"job": "901"}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = response.content.decode()
    assert "配额限制" in page
    assert "你的项目在该作业的资源池中正在使用 40 块 A100 80G GPU 中的 40 块" in page


@pytest.mark.parametrize("job", ["910", "nope", "  "])
def test_jobs_of_other_projects_are_not_shown(jobs, member, job):
    response = login(member).get("/jobs/wait/", {"job": job})
    assert response.status_code == 200
    assert response.context["explanation"] is None
    if job.strip():
        assert response.context["not_found"]
    else:
        assert response.context["form"].errors["job"]


def test_api(jobs, member, approver, outsider):
    client = APIClient()
    client.force_authenticate(member)
    data = client.get("/api/v1/jobs/901/wait/").json()
    assert data["category"] == "quota" and data["project"] == "vision"
    assert data["quota"][0]["running"] == 40 and "request a quota exception" in data["next_step"]
    assert client.get("/api/v1/jobs/910/wait/").status_code == 404
    client.force_authenticate(approver)
    # Slurm says Priority, but no job that could start ranks ahead of the top tier's job: the
    # figures do not support "queue rule", so the answer is unknown, with the raw reason.
    top = client.get("/api/v1/jobs/910/wait/", {"source": "hpc"}).json()
    assert top["category"] == "unknown" and top["reason"] == "Priority"
    assert top["jobs_ahead_count"] == 0 and "“Priority”" in top["next_step"]
    client.force_authenticate(outsider)
    assert client.get("/api/v1/jobs/901/wait/").status_code == 404
    client.force_authenticate(None)
    assert client.get("/api/v1/jobs/901/wait/").status_code in (401, 403)


def test_project_jobs_page_groups_pending_jobs(jobs, lead, django_assert_num_queries):
    workload = project_workload(project=jobs.vision)
    groups = {
        category: [j.job_id for j in items] for category, _l, items in workload.pending_by_category
    }
    assert groups == {
        "resource": ["904"],
        "quota": ["901"],
        "queue_rule": ["905"],
        "dependency": ["902"],
        "placement": ["903"],
        "unclassified": ["906"],
    }
    assert [j.job_id for j in workload.running] == ["900"]
    client = login(lead)
    client.get("/projects/vision/workload/")  # warm the session and caches
    # +1 since the header shows "Lead" for a member who leads a project
    with django_assert_num_queries(10):
        response = client.get("/projects/vision/workload/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "904" in page and "910" not in page
    # More jobs, same number of queries.
    for n in range(20):
        ingest(jobs, f"95{n:02d}", "Resources", gpus=1)
    # +1 since the header shows "Lead" for a member who leads a project
    with django_assert_num_queries(10):
        client.get("/projects/vision/workload/")
    assert "/projects/vision/workload/" in client.get("/projects/vision/").content.decode()


def test_a_projects_workload_page_is_scoped_like_the_job_page(world, lead, member, outsider):
    """Another project's jobs are a 404 for a person outside it, as its job page is."""
    assert login(outsider).get("/projects/vision/workload/").status_code == 404
    assert login(outsider).get("/projects/nothing/workload/").status_code == 404
    assert login(member).get("/projects/vision/workload/").status_code == 200
    assert login(world.ops).get("/projects/speech/workload/").status_code == 200


def test_the_api_finds_a_kueue_job_whose_id_holds_a_slash(jobs, member):
    ingest(jobs, "vision-ns/train-7f3c", "Resources", gpus=2)
    client = APIClient()
    client.force_authenticate(member)
    for path in ("vision-ns/train-7f3c", "vision-ns%2Ftrain-7f3c"):
        response = client.get(f"/api/v1/jobs/{path}/wait/")
        assert response.status_code == 200, (path, response.content)
        assert response.json()["job_id"] == "vision-ns/train-7f3c"
    assert client.get("/api/v1/jobs/vision-ns/nothing/wait/").status_code == 404


def test_the_quota_panel_shows_the_quotas_of_the_jobs_pool_only(world):
    """Vision has A100 quotas in two pools; a job of the training pool is shown training's."""
    from governance import services as rules
    from tests.conftest import REASON

    rules.quota_create(
        user=world.ops,
        reason=REASON,
        project=world.vision,
        pool=world.inference,
        flavor=world.a100,
        guarantee=4,
        borrow_limit=0,
        preemption_class=world.allowed,
    )
    ingest(world, "950", "AssocGrpGRES", gpus=8, pool=world.training)
    ingest(world, "951", "Priority", gpus=2, pool=world.inference, started=True)
    from queues.models import WorkloadJob

    training = job_wait_explanation(WorkloadJob.objects.get(job_id="950"))
    [use] = training.use
    # Training's A100 quota alone (guarantee 24, maximum 40), not 28 / 44 over both pools,
    # and the 2 GPUs running in the inference pool are not counted.
    assert (use.guarantee, use.maximum, use.running, use.pending) == (24, 40, 0, 8)
    inference = job_wait_explanation(WorkloadJob.objects.get(job_id="951"))
    [use] = inference.use
    assert (use.guarantee, use.maximum, use.running) == (4, 4, 2)
