"""GET /api/v1/placement/: where and how a project submits, and whether it may right now.

No scheduler runs here: placement reads the rules and the workload evidence in the database
and the names the Slurm and Kueue compilers generate from them.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone, translation
from rest_framework.test import APIClient

from governance import services
from governance.models import GrantKind, Terms
from queues import services as queue_services
from queues.models import Cluster, JobState, WorkloadJob
from queues.selectors.placement import compiled_placement, placement
from tests.conftest import token_for

pytestmark = pytest.mark.django_db

REASON = "Test set-up"
URL = reverse("api_placement")


@pytest.fixture
def place(world, ops, settings, tmp_path):
    """The world, served by a Slurm cluster (both pools) and a Kueue cluster (training), and
    an untyped flavor ``t4`` in the inference pool that vision also has a quota of."""
    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    (tmp_path / "token").write_text("t")
    kw = {"user": ops, "reason": REASON}
    t4 = services.flavor_create(**kw, slug="t4", name="T4", gpu_model="NVIDIA T4", memory_gb=16)
    services.pool_capacity_set(**kw, pool=world.inference, flavor=t4, gpus=8)
    services.quota_create(
        **kw,
        project=world.vision,
        pool=world.inference,
        flavor=t4,
        guarantee=4,
        borrow_limit=2,
        preemption_class=world.allowed,
    )
    services.tier_update(tier=world.key, **kw, data={"max_gpus_per_job": 8})
    queue_services.cluster_create(
        **kw, name="hpc", slurm_cluster="hpc", pools=[world.training, world.inference]
    )
    queue_services.cluster_create(
        **kw,
        name="k8s",
        backend="kueue",
        kube_api_server="https://127.0.0.1:9",
        kube_credentials_file="token",
        pools=[world.training],
    )
    world.t4 = t4
    return world


def _get(client, **params):
    return client.get(URL, params)


@pytest.fixture
def client(api_client, lead):
    api_client.force_authenticate(lead)
    return api_client


def _grant(world, project, kind, *, start, end, **terms):
    return services.grant_create(
        user=world.ops,
        reason="Approved request",
        project=project,
        terms=Terms(kind=kind, starts_at=start, ends_at=end, **terms),
        now=min(start, timezone.now()),
    )


def _running(world, project, gpus, flavor, job="1"):
    now = timezone.now()
    WorkloadJob.objects.create(
        source="hpc",
        job_id=job,
        key=job,
        project=project,
        gpus=gpus,
        flavor=flavor,
        state=JobState.RUNNING,
        started_at=now,
        last_event_at=now,
    )


FLAVORS = {
    # flavor: (account, gres prefix, Kueue route?)
    "a100-80g": ("training.vision", "gpu:a100:", True),
    "t4": ("inference.vision", "gpu:", False),
}
# Without a grant vision (tier key) may use key and the tiers below it.
TIERS = {"exploratory": True, "regular": True, "key": True, "production": False}
GRANTS = ("none", "upgrade_active", "upgrade_expired", "upgrade_scheduled")


@pytest.mark.parametrize("grant", GRANTS)
@pytest.mark.parametrize("flavor", sorted(FLAVORS))
@pytest.mark.parametrize("tier", sorted(TIERS))
def test_each_tier_flavor_and_grant_state(client, place, tier, flavor, grant):
    now = timezone.now()
    windows = {
        "upgrade_active": (now - timedelta(hours=1), now + timedelta(hours=1)),
        "upgrade_expired": (now - timedelta(hours=3), now - timedelta(hours=1)),
        "upgrade_scheduled": (now + timedelta(hours=1), now + timedelta(hours=3)),
    }
    if grant in windows:
        start, end = windows[grant]
        _grant(
            place,
            place.vision,
            GrantKind.PRIORITY_UPGRADE,
            start=start,
            end=end,
            tier=place.production,
        )

    response = _get(client, project="vision", tier=tier, gpus=4, flavor=flavor)

    assert response.status_code == 200, response.content
    body = response.json()
    expected = TIERS[tier] or grant == "upgrade_active"
    assert body["allowed"] is expected
    codes = [refusal["code"] for refusal in body["refusals"]]
    assert codes == ([] if expected else ["tier_not_allowed"])
    assert body["project_tier"] == ("production" if grant == "upgrade_active" else "key")
    account, gres, on_kueue = FLAVORS[flavor]
    (route,) = body["slurm"]
    assert route["cluster"] == "hpc"
    assert route["account"] == account
    assert route["qos"] == tier
    assert route["gres"] == gres + "4"
    assert route["sbatch"] == f"--account={account} --qos={tier} --gres={gres}4"
    assert route["sbatch_options"] == [f"--account={account}", f"--qos={tier}", f"--gres={gres}4"]
    assert route["partition"] is None
    if on_kueue:
        (kube,) = body["kubernetes"]
        assert kube["namespace"] == "vision"
        assert kube["local_queue"] == "training"
        assert kube["labels"] == {
            "kueue.x-k8s.io/queue-name": "training",
            "kueue.x-k8s.io/priority-class": tier,
        }
        assert kube["resources"] == {"nvidia.com/gpu": "4"}
    else:
        assert body["kubernetes"] == []
    assert [g["kind"] for g in body["grants"]] == (
        ["priority_upgrade"] if grant == "upgrade_active" else []
    )


def test_the_clusters_partition_is_in_the_route_and_the_sbatch_options(client, place):
    hpc = Cluster.objects.get(name="hpc")
    queue_services.cluster_update(
        cluster=hpc, user=place.ops, reason=REASON, data={"slurm_partition": "gpu-a100"}
    )

    body = _get(client, project="vision", tier="key", gpus=2, flavor="a100-80g").json()

    (route,) = body["slurm"]
    assert route["partition"] == "gpu-a100"
    assert route["sbatch_options"] == [
        "--account=training.vision",
        "--partition=gpu-a100",
        "--qos=key",
        "--gres=gpu:a100:2",
    ]
    assert route["sbatch"] == " ".join(route["sbatch_options"])


def test_the_effective_tier_is_used_when_no_tier_is_given(client, place):
    body = _get(client, project="speech", gpus=2).json()

    assert body["tier"]["slug"] == "regular"  # speech has no tier: the default one
    assert body["tier_given"] is False
    assert body["flavor"]["slug"] == "a100-80g"  # its only flavor
    assert body["allowed"] is True
    assert body["slurm"][0]["sbatch"] == (
        "--account=training.speech --qos=regular --gres=gpu:a100:2"
    )


def test_over_the_tiers_per_job_cap(client, place):
    body = _get(client, project="vision", tier="key", gpus=9, flavor="a100-80g").json()

    assert body["allowed"] is False
    assert [r["code"] for r in body["refusals"]] == ["over_job_cap"]
    assert "at most 8 GPUs per job" in body["refusals"][0]["detail"]
    assert _get(client, project="vision", tier="regular", gpus=9, flavor="a100-80g").json()[
        "allowed"
    ]


def test_headroom_and_the_maximum_from_running_jobs_and_a_quota_exception(client, place):
    _running(place, place.vision, 30, place.a100, job="1")
    _running(place, place.vision, 6, place.a100, job="2")
    _running(place, place.speech, 16, place.a100, job="3")  # another project's: not counted

    fits = _get(client, project="vision", tier="regular", gpus=4, flavor="a100-80g").json()
    assert fits["allowed"] is True
    assert fits["headroom"] == {
        "flavor": "a100-80g",
        "running_gpus": 36,
        "guarantee": 24,
        "maximum": 40,
        "borrow_limit_lifted": False,
        "under_guarantee": 0,
        "under_maximum": 4,
        "within_guarantee": False,
        "changed_by_grants": [],
    }
    over = _get(client, project="vision", tier="regular", gpus=5, flavor="a100-80g").json()
    assert [r["code"] for r in over["refusals"]] == ["over_maximum"]

    now = timezone.now()
    grant = _grant(
        place,
        place.vision,
        GrantKind.QUOTA_EXCEPTION,
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=1),
        pool=place.training,
        flavor=place.a100,
        extra_gpus=8,
    )
    raised = _get(client, project="vision", tier="regular", gpus=5, flavor="a100-80g").json()
    assert raised["allowed"] is True
    assert raised["headroom"]["maximum"] == 48
    assert raised["headroom"]["changed_by_grants"] == [grant.pk]

    services.grant_revoke(grant=grant, user=place.ops, reason="No longer needed")
    again = _get(client, project="vision", tier="regular", gpus=5, flavor="a100-80g").json()
    assert [r["code"] for r in again["refusals"]] == ["over_maximum"]


def test_untyped_running_jobs_count_for_a_project_with_one_flavor(client, place):
    _running(place, place.speech, 60, None)

    body = _get(client, project="speech", gpus=8).json()

    assert body["untyped_running_gpus"] == 60
    assert body["headroom"]["running_gpus"] == 60
    assert body["headroom"]["maximum"] == 64  # no borrow limit: the pool's capacity
    assert body["headroom"]["borrow_limit_lifted"] is True
    assert [r["code"] for r in body["refusals"]] == ["over_maximum"]


def test_a_flavor_without_quota_and_several_refusals_at_once(client, place):
    body = _get(client, project="vision", tier="production", gpus=4, flavor="h100-80g").json()

    assert body["allowed"] is False
    assert [r["code"] for r in body["refusals"]] == ["tier_not_allowed", "unknown_flavor"]
    assert body["slurm"] == [] and body["kubernetes"] == []


def test_forbidden_class_work_gets_the_protected_qos(client, place):
    now = timezone.now()
    _grant(
        place,
        place.speech,
        GrantKind.PREEMPTION_PROTECTION,
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=1),
        preemption_class=place.forbidden,
    )

    route = _get(client, project="speech", gpus=2).json()["slurm"][0]

    assert route["qos"] == "regular-protected"
    assert route["borrow_qos"] == []


def test_no_cluster_serves_the_pool(client, place):
    queue_services.cluster_update(
        cluster=Cluster.objects.get(name="hpc"),
        user=place.ops,
        reason=REASON,
        data={"enabled": False},
    )

    body = _get(client, project="vision", tier="key", gpus=1, flavor="t4").json()

    assert [r["code"] for r in body["refusals"]] == ["no_cluster"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"project": "vision", "flavor": "t4"}, "gpus"),
        ({"project": "vision", "gpus": 0, "flavor": "t4"}, "gpus"),
        ({"project": "vision", "gpus": "x", "flavor": "t4"}, "gpus"),
        ({"gpus": 1}, "project"),
        ({"project": "vision", "gpus": 1, "tier": "gold", "flavor": "t4"}, "tier"),
        ({"project": "vision", "gpus": 1, "flavor": "v100"}, "flavor"),
        ({"project": "vision", "gpus": 1}, "flavor"),  # two flavors: say which
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(client, place, params, field):
    response = _get(client, **params)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert field in response.json()["fields"]


def test_an_unknown_project_is_a_404_and_anonymous_is_a_401(client, api_client, place):
    assert _get(client, project="nope", gpus=1).status_code == 404
    api_client.force_authenticate(None)
    assert _get(api_client, project="vision", gpus=1, flavor="t4").status_code == 401


def test_a_token_client(place, api_client, ci_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")

    response = _get(api_client, project="speech", gpus=1)

    assert response.status_code == 200
    assert response.json()["allowed"] is True


def test_refusals_are_translated(client, place):
    response = client.get(
        URL,
        {"project": "vision", "tier": "production", "gpus": 1, "flavor": "t4"},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    )

    (refusal,) = response.json()["refusals"]
    assert refusal["code"] == "tier_not_allowed"
    assert "production" in refusal["detail"] and "may not" not in refusal["detail"]


def test_one_query_once_compiled(client, place, django_assert_num_queries):
    _get(client, project="vision", tier="key", gpus=1, flavor="t4")  # compiles

    # The fingerprint with the project (by its slug) and its running GPUs.
    with django_assert_num_queries(1):
        response = _get(client, project="vision", tier="key", gpus=1, flavor="t4")
    assert response.status_code == 200
    with django_assert_num_queries(1):
        assert _get(client, project="nope", gpus=1).status_code == 404


def test_one_query_with_a_token_and_a_revoked_token_is_refused_at_once(
    place, api_client, ci_token, django_assert_num_queries
):
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {ci_token.key}")
    _get(api_client, project="vision", tier="key", gpus=1, flavor="t4")  # compiles, last use

    # The token (with its last use, written at most once a minute), the fingerprint, the
    # project and its running GPUs: one query.
    with django_assert_num_queries(1):
        response = _get(api_client, project="vision", tier="key", gpus=1, flavor="t4")
    assert response.status_code == 200
    with django_assert_num_queries(1):
        assert _get(api_client, project="nope", gpus=1).status_code == 404

    services.api_token_revoke(token=ci_token, user=place.ops, reason="Leaked")

    assert _get(api_client, project="vision", tier="key", gpus=1, flavor="t4").status_code == 401


QUESTIONS = [
    {"project": "vision", "tier": "key", "gpus": 2, "flavor": "t4"},
    {"project": "vision", "tier": "production", "gpus": 9, "flavor": "a100-80g"},
    {"project": "vision", "gpus": 3},  # no flavor: the project's quotas settle it, or a 400
    {"project": "speech", "gpus": 1, "flavor": "a100-80g"},
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_token_gets_the_answer_a_session_gets(place, lead, question):
    _running(place, place.vision, 3, place.t4)
    session, with_token = APIClient(), APIClient()
    session.force_authenticate(lead)
    by_session = _get(session, **question)
    with_token.credentials(HTTP_AUTHORIZATION=token_for(lead, "read"))

    for _ in range(2):  # cold, then with the compiled rules
        by_token = _get(with_token, **question)

        assert by_token.status_code == by_session.status_code
        assert {**by_token.json(), "at": None} == {**by_session.json(), "at": None}


def test_a_question_read_otherwise_than_asked_is_read_again(
    place, api_client, ci_token, django_assert_num_queries
):
    # " vision" is read as "vision" (whitespace trimmed): the row read with the token was
    # of another question, so the answer reads its own.
    _running(place, place.vision, 3, place.t4)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {ci_token.key}")
    ask = {"tier": "key", "gpus": 2, "flavor": "t4"}
    _get(api_client, project="vision", **ask)  # compiles, last use

    with django_assert_num_queries(2):
        trimmed = _get(api_client, project=" vision", **ask)

    assert trimmed.status_code == 200
    assert trimmed.json()["headroom"]["running_gpus"] == 3
    assert {**trimmed.json(), "at": None} == {
        **_get(api_client, project="vision", **ask).json(),
        "at": None,
    }


def test_the_running_gpus_read_with_the_token_are_the_latest(place, api_client, ci_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {ci_token.key}")
    ask = {"project": "vision", "tier": "key", "gpus": 2, "flavor": "t4"}
    assert _get(api_client, **ask).json()["headroom"]["running_gpus"] == 0

    _running(place, place.vision, 3, place.t4)

    assert _get(api_client, **ask).json()["headroom"]["running_gpus"] == 3


@pytest.mark.parametrize(
    "header, status",
    [
        ("Bearer arb_nosuchprefix_secret", 401),  # no token has that prefix
        ("Bearer not-a-token", 401),
        ("Bearer", 401),
    ],
)
def test_a_bad_token_is_refused_before_placement_reads(place, api_client, header, status):
    api_client.credentials(HTTP_AUTHORIZATION=header)

    response = _get(api_client, project="vision", tier="key", gpus=1, flavor="t4")

    assert response.status_code == status
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_token_of_the_right_prefix_but_another_secret_is_refused(place, api_client, ci_token):
    prefix, _secret = ci_token.key.rsplit("_", 1)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {prefix}_{'x' * 20}")

    assert _get(api_client, project="vision", tier="key", gpus=1).status_code == 401


def test_a_token_without_the_read_scope_is_refused(place, api_client, lead):
    token = services.personal_token_create(user=lead, name="ingest only", scopes=["ingest"])
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")

    assert _get(api_client, project="vision", tier="key", gpus=1).status_code == 403


def test_a_token_with_bad_parameters_is_a_400(place, api_client, ci_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {ci_token.key}")

    assert _get(api_client, gpus=1).json()["fields"]["project"]
    assert _get(api_client, project="vision", gpus="x").json()["fields"]["gpus"]


def test_the_compiled_rules_follow_applied_changes(client, place):
    before = _get(client, project="vision", tier="key", gpus=9, flavor="a100-80g").json()
    assert [r["code"] for r in before["refusals"]] == ["over_job_cap"]

    services.tier_update(
        tier=place.key, user=place.ops, reason="Bigger jobs", data={"max_gpus_per_job": 16}
    )

    after = _get(client, project="vision", tier="key", gpus=9, flavor="a100-80g").json()
    assert after["allowed"] is True


def test_a_grant_made_now_shows_in_the_next_answer(client, place):
    ask = {"project": "vision", "tier": "production", "gpus": 1, "flavor": "t4"}
    assert _get(client, **ask).json()["allowed"] is False  # compiled

    now = timezone.now()
    _grant(
        place,
        place.vision,
        GrantKind.PRIORITY_UPGRADE,
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=2),
        tier=place.production,
    )

    assert _get(client, **ask).json()["allowed"] is True


def test_a_grant_applies_at_its_start_before_the_beat_task_records_it(place):
    start = timezone.now() + timedelta(hours=1)
    _grant(
        place,
        place.vision,
        GrantKind.PRIORITY_UPGRADE,
        start=start,
        end=start + timedelta(hours=2),
        tier=place.production,
    )
    ask = {"project": place.vision, "tier": "production", "gpus": 1, "flavor": "t4"}

    before = placement(**ask, now=start - timedelta(seconds=1))
    compiled = compiled_placement(now=start - timedelta(seconds=1))
    assert compiled.valid_until == start
    at_start = placement(**ask, now=start)
    after_end = placement(**ask, now=start + timedelta(hours=2))

    assert before["allowed"] is False
    assert at_start["allowed"] is True
    assert after_end["allowed"] is False


def test_the_answer_has_the_documented_shape(client, place):
    from queues.apis.placement import PlacementApi

    for params in (
        {"project": "vision", "tier": "key", "gpus": 2, "flavor": "a100-80g"},
        {"project": "vision", "tier": "production", "gpus": 20, "flavor": "h100-80g"},
        {"project": "speech", "gpus": 1},
    ):
        body = _get(client, **params).json()
        answer = placement(
            project=place.vision if params["project"] == "vision" else place.speech,
            gpus=params["gpus"],
            tier=params.get("tier"),
            flavor=params.get("flavor"),
        )
        shaped = PlacementApi.OutputSerializer(answer).data
        assert set(body) == set(shaped)
        assert {k: v for k, v in body.items() if k != "at"} == {
            k: v for k, v in shaped.items() if k != "at"
        }


def test_a_repeated_question_follows_running_jobs_the_language_and_the_clock(client, place):
    ask = {"project": "vision", "tier": "production", "gpus": 4, "flavor": "t4"}
    first = _get(client, **ask).json()
    again = _get(client, **ask).json()
    assert {**first, "at": None} == {**again, "at": None}
    assert again["at"] > first["at"]

    _running(place, place.vision, 3, place.t4)
    after = _get(client, **ask).json()
    assert after["headroom"]["running_gpus"] == first["headroom"]["running_gpus"] + 3
    assert "over_maximum" in [r["code"] for r in after["refusals"]]

    # The locale middleware leaves the request's language active: restore it afterwards.
    with translation.override(translation.get_language()):
        chinese = client.get(URL, ask, HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert chinese["refusals"][0]["detail"] != after["refusals"][0]["detail"]


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"project": "vision"},
        {"project": "bad slug!", "gpus": "x", "tier": "-", "flavor": "a" * 64},
        {"project": "vision", "gpus": "0"},
        {"project": "vision", "gpus": "100001", "tier": ""},
        {"project": "vision", "gpus": "2", "tier": "key", "flavor": "t4"},
    ],
)
def test_the_input_is_read_as_the_input_serializer_reads_it(params, language):
    from django.http import QueryDict
    from rest_framework.exceptions import ValidationError

    from queues.apis.placement import PlacementApi, _parse

    query = QueryDict(mutable=True)
    query.update(params)
    with translation.override(language):
        serializer = PlacementApi.InputSerializer(data=query)
        if serializer.is_valid():
            assert _parse(query) == serializer.validated_data
        else:
            with pytest.raises(ValidationError) as error:
                _parse(query)
            assert error.value.detail == serializer.errors


def test_a_question_read_again_comes_from_the_cache_unchanged():
    from django.http import QueryDict

    from queues.apis.placement import _parse, _parse_valid

    query = QueryDict("project=vision&gpus=1&gpus=2&tier=key")
    first = _parse(query)
    first["gpus"] = 99  # the caller's copy
    hits = _parse_valid.cache_info().hits

    assert _parse(query) == {"project": "vision", "gpus": 2, "tier": "key"}  # the last value
    assert _parse_valid.cache_info().hits == hits + 1
