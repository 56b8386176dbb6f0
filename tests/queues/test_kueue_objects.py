"""Kueue objects compiled from the effective rules: generation, quantities, grants, export.

No API server here: these run everywhere (the API server tests are in test_sync_kueue.py).
"""

from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from governance import services as rules
from governance.models import GrantKind, Terms
from governance.selectors import effective_rules
from queues import services
from queues.schedulers.kueue.values import (
    MANAGED_BY,
    REVISION_LABEL,
    flatten,
    normalise_quantity,
    values_equal,
)
from queues.services.kueue import KueueBackend, KueueConnection
from queues.services.kueue.export import export_objects, file_name
from queues.services.kueue.ownership import field_owners
from queues.services.slurm import SlurmBackend
from queues.services.sync import enforcement_for
from tests.conftest import REASON


def compile_org(org, template="{project}", mutating=True):
    """Compiled for a server that serves MutatingAdmissionPolicy (``mutating``) or not: no
    server is asked here."""
    backend = KueueBackend(
        connection=KueueConnection(namespace_template=template), mutating=mutating
    )
    state = services.desired_state_for(cluster=org.cluster, backend=backend, at=timezone.now())
    by_kind = {}
    for manifest in backend.objects.manifests:
        by_kind.setdefault(manifest["kind"], {})[manifest["metadata"]["name"]] = manifest
    return backend, state, by_kind


@pytest.mark.parametrize(
    ("value", "normal"),
    [
        ("12000m", "12"),
        ("12", "12"),
        (12, "12"),
        ("1.5", "1.5"),
        ("1500m", "1.5"),
        ("1k", "1000"),
        ("1Ki", "1024"),
        ("2e3", "2000"),
        ("0", "0"),
        ("0.000m", "0"),
        ("eight", "eight"),
    ],
)
def test_quantities_are_compared_in_normalised_form(value, normal):
    assert normalise_quantity(value) == normal


def test_a_quantity_written_differently_is_no_change():
    live = {"kind": "Cohort", "spec": {"fairSharing": {"weight": "1000m"}}}
    desired = {"kind": "Cohort", "spec": {"fairSharing": {"weight": 1}}}
    assert flatten(live) == flatten(desired)
    assert values_equal("spec.fairSharing.weight", "12000m", "12")
    assert not values_equal("spec.fairSharing.weight", "12001m", "12")


def test_every_rule_becomes_its_kueue_object(org):
    org.project("vision", guarantee=8, borrow=4, lending=2)
    org.project("vision", flavor=org.h100, guarantee=2, borrow=None)
    org.project("serving", guarantee=4, preemption_class=org.forbidden, tier=org.production)
    org.project("eu_team", pool=org.child, guarantee=0, borrow=6)
    _backend, _state, objs = compile_org(org)

    assert set(objs) == {
        "PriorityClass",
        "WorkloadPriorityClass",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "Namespace",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    }
    # One cluster-wide GPU policy: a GPU Pod in a namespace Arbiter governs that Kueue does
    # not manage is refused, naming the rule; bound by Arbiter's namespace label.
    gpu = objs["ValidatingAdmissionPolicy"]["arbiter-gpu-through-kueue"]["spec"]
    assert gpu["matchConstraints"]["resourceRules"][0]["resources"] == ["pods"]
    assert (
        "every GPU workload in a governed namespace goes through Kueue"
        in (gpu["validations"][0]["message"])
    )
    gpu_binding = objs["ValidatingAdmissionPolicyBinding"]["arbiter-gpu-through-kueue"]["spec"]
    assert gpu_binding["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"app.kubernetes.io/managed-by": "arbiter"}
    }
    assert gpu_binding["validationActions"] == ["Deny"]
    # Per project namespace a tier policy: the tiers its effective rules allow (by label and
    # by priorityClassName), and nothing more: a Job naming none is given its project's tier.
    serving_policy = objs["ValidatingAdmissionPolicy"]["arbiter-tiers-serving"]["spec"]
    rules_of = [v["expression"] for v in serving_policy["validations"]]
    assert rules_of[0].endswith("in ['exploratory', 'production', 'regular']")
    assert len(rules_of) == 2
    vision_policy = objs["ValidatingAdmissionPolicy"]["arbiter-tiers-vision"]["spec"]
    assert vision_policy["validations"][0]["expression"].endswith("in ['exploratory', 'regular']")
    assert len(vision_policy["validations"]) == 2
    binding = objs["ValidatingAdmissionPolicyBinding"]["arbiter-tiers-serving"]["spec"]
    assert binding["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "serving"}
    }
    # The mutating policy: a Job created naming no tier gets its project's own tier (serving
    # production, vision the default regular), never the cluster's default.
    label = "kueue.x-k8s.io/priority-class"
    for namespace, tier in (("serving", "production"), ("vision", "regular")):
        mutating = objs["MutatingAdmissionPolicy"][f"arbiter-tiers-{namespace}"]
        assert mutating["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
        spec = mutating["spec"]
        assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
        assert spec["matchConditions"] == [
            {
                "name": "names-no-tier",
                "expression": f"!('{label}' in (has(object.metadata.labels) ? "
                "object.metadata.labels : {})) && "
                "(!has((object.kind == 'Pod' ? object.spec : object.spec.template.spec)"
                ".priorityClassName) || (object.kind == 'Pod' && (object.kind == 'Pod' ? "
                "object.spec : object.spec.template.spec).priorityClassName == 'regular'))",
            }
        ]
        # Jobs, bare Pods (and each Pod of a Deployment or StatefulSet), Deployments and
        # StatefulSets alike.
        assert [
            (r["apiGroups"], r["resources"]) for r in spec["matchConstraints"]["resourceRules"]
        ] == [
            (["batch"], ["jobs"]),
            ([""], ["pods"]),
            (["apps"], ["deployments"]),
            (["apps"], ["statefulsets"]),
        ]
        assert spec["mutations"] == [
            {
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {
                    "expression": "Object{metadata: Object.metadata{labels: "
                    f"{{'{label}': '{tier}'}}}}}}"
                },
            }
        ]
        assert spec["reinvocationPolicy"] == "Never"
        mutating_binding = objs["MutatingAdmissionPolicyBinding"][f"arbiter-tiers-{namespace}"]
        assert mutating_binding["spec"] == {
            "policyName": f"arbiter-tiers-{namespace}",
            "matchResources": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "objectSelector": {},
            },
        }
        assert mutating["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "arbiter"
        assert mutating["metadata"]["annotations"] == {
            "arbiter.governance/source": f"tiers of project {namespace}"
        }
    # Tiers: both priority classes, the default one global; kube-scheduler never preempts
    # (only Kueue does, for quota), even for a tier that may preempt.
    assert objs["PriorityClass"]["production"]["value"] == 950
    assert objs["PriorityClass"]["production"]["preemptionPolicy"] == "Never"
    assert objs["PriorityClass"]["regular"]["preemptionPolicy"] == "Never"
    assert objs["PriorityClass"]["regular"]["globalDefault"] is True
    assert objs["PriorityClass"]["exploratory"]["globalDefault"] is False
    assert objs["WorkloadPriorityClass"]["regular"]["value"] == 400
    # Flavors: labels, taints and the toleration Kueue adds to admitted pods.
    a100 = objs["ResourceFlavor"]["a100"]["spec"]
    assert a100["nodeLabels"] == {"gpu.example.com/model": "a100"}
    assert a100["nodeTaints"] == [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]
    assert a100["tolerations"] == [
        {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    ]
    # Pools: cohorts, the nested one under its parent, the unguaranteed rest shared.
    assert "parentName" not in objs["Cohort"]["training"]["spec"]
    assert objs["Cohort"]["training-eu"]["spec"]["parentName"] == "training"
    shared = objs["Cohort"]["training"]["spec"]["resourceGroups"][0]["flavors"]
    assert shared == [
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "20"}]},
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "14"}]},
    ]
    # Queues: per project and pool, in the pool's cohort, for the project's namespace.
    vision = objs["ClusterQueue"]["vision--training"]["spec"]
    assert vision["cohortName"] == "training"
    assert vision["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "vision"}}
    assert vision["resourceGroups"] == [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "a100",
                    "resources": [
                        {
                            "name": "nvidia.com/gpu",
                            "nominalQuota": "8",
                            "borrowingLimit": "4",
                            "lendingLimit": "2",
                        }
                    ],
                },
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]},
            ],
        }
    ]
    assert vision["preemption"] == {
        "withinClusterQueue": "Never",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "Never"},
    }
    # One weight per queue: the flavors' weights (1 each here) averaged, not summed.
    assert vision["fairSharing"] == {"weight": "1"}
    # A forbidden class never borrows (reclaim would preempt it) nor preempts its own work.
    serving = objs["ClusterQueue"]["serving--training"]["spec"]
    assert serving["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] == "0"
    assert serving["preemption"]["withinClusterQueue"] == "Never"
    # No guarantee: nothing to reclaim.
    eu = objs["ClusterQueue"]["eu-team--training-eu"]["spec"]
    assert eu["preemption"]["reclaimWithinCohort"] == "Never"
    assert eu["cohortName"] == "training-eu"
    queues = {
        (m["metadata"]["namespace"], m["metadata"]["name"]): m["spec"]["clusterQueue"]
        for m in _backend.objects.manifests
        if m["kind"] == "LocalQueue"
    }
    # Per namespace also "default", where Kueue puts Jobs without a queue name.
    assert queues == {
        ("vision", "training"): "vision--training",
        ("vision", "default"): "vision--training",
        ("serving", "training"): "serving--training",
        ("serving", "default"): "serving--training",
        ("eu-team", "training-eu"): "eu-team--training-eu",
        ("eu-team", "default"): "eu-team--training-eu",
    }
    assert set(objs["Namespace"]) == {"vision", "serving", "eu-team"}
    for manifest in _backend.objects.manifests:
        assert manifest["metadata"]["labels"][MANAGED_BY] == "arbiter"
        assert manifest["metadata"]["labels"][REVISION_LABEL].isdigit()


def test_a_tier_that_may_preempt_preempts_within_its_queue_not_by_a_borrow_threshold(org):
    """Kueue ignores borrowWithinCohort under fair sharing (its documented configuration),
    so Arbiter never emits a threshold there."""
    org.project("prod", tier=org.production, guarantee=4, borrow=None)
    _backend, _state, objs = compile_org(org)
    assert objs["ClusterQueue"]["prod--training"]["spec"]["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "Never"},
    }


def test_the_namespace_rule_may_name_the_pool(org):
    org.project("vision")
    org.project("vision", pool=org.child)
    backend, _state, _objs = compile_org(org, template="team-{project}-{pool}")
    namespaces = sorted(
        {m["metadata"]["namespace"] for m in backend.objects.manifests if m["kind"] == "LocalQueue"}
    )
    assert namespaces == ["team-vision-training", "team-vision-training-eu"]


def test_a_bad_namespace_rule_is_a_clear_error(org):
    org.project("vision")
    with pytest.raises(services.SchedulerError, match=r"\{project\} and \{pool\}"):
        compile_org(org, template="{team}")


def test_an_active_grant_changes_the_queue_it_touches_and_expiry_reverts_it(org):
    project, _quota = org.project("vision", guarantee=8, borrow=4)
    now = timezone.now()
    _b, before, _o = compile_org(org)
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=project,
        terms=Terms(
            kind=GrantKind.QUOTA_EXCEPTION,
            pool=org.pool,
            flavor=org.a100,
            extra_gpus=6,
            starts_at=now - timedelta(minutes=1),
            ends_at=now + timedelta(hours=2),
        ),
    )
    _b, during, _o = compile_org(org)
    path = "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].borrowingLimit"
    assert before["ClusterQueue"]["vision--training"][path] == "4"
    assert during["ClusterQueue"]["vision--training"][path] == "10"
    changed = {
        key
        for key, value in during["ClusterQueue"]["vision--training"].items()
        if before["ClusterQueue"]["vision--training"][key] != value
    }
    assert changed == {path}
    # After the grant's end the same rules compile to the objects of before.
    backend = KueueBackend(connection=KueueConnection(), mutating=True)
    after = services.desired_state_for(
        cluster=org.cluster, backend=backend, at=now + timedelta(hours=3)
    )
    assert after == before


def test_without_mutating_admission_policy_a_job_naming_no_tier_is_refused_instead(org):
    """The fallback for a server that does not serve MutatingAdmissionPolicy: no mutating
    policy; a Job naming no tier gets the cluster default from Kueue, so it is refused where
    that is not the project's tier (serving) and admitted where it is (vision)."""
    org.project("vision", guarantee=8)
    org.project("serving", guarantee=4, tier=org.production)
    _b, _state, objs = compile_org(org, mutating=False)
    assert "MutatingAdmissionPolicy" not in objs
    assert "MutatingAdmissionPolicyBinding" not in objs
    serving = objs["ValidatingAdmissionPolicy"]["arbiter-tiers-serving"]["spec"]["validations"]
    assert len(serving) == 3
    assert serving[2]["message"] == (
        "Arbiter: this project's tier is production, not the cluster default regular: set "
        "the label kueue.x-k8s.io/priority-class=production."
    )
    vision = objs["ValidatingAdmissionPolicy"]["arbiter-tiers-vision"]["spec"]["validations"]
    assert len(vision) == 2
    rows = KueueBackend(connection=KueueConnection(), mutating=False).rule_enforcement(
        rules=effective_rules(at=timezone.now()), pools=[org.pool]
    )
    detail = next(row["detail"] for row in rows if row["rule"].startswith("serving: tiers"))
    assert "does not serve MutatingAdmissionPolicy" in detail


def test_a_tier_grant_raises_the_tier_a_job_naming_none_gets_and_expiry_lowers_it(org):
    project, _quota = org.project("vision", guarantee=8)
    now = timezone.now()
    expression = "MutatingAdmissionPolicy", "arbiter-tiers-vision"

    def given(state):
        return state[expression[0]][expression[1]]["spec.mutations"]

    _b, before, _o = compile_org(org)
    assert "'regular'" in given(before)
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=project,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=org.production,
            starts_at=now - timedelta(minutes=1),
            ends_at=now + timedelta(hours=2),
        ),
    )
    _b, during, _o = compile_org(org)
    assert "'production'" in given(during)
    rows = KueueBackend(connection=KueueConnection(), mutating=True).rule_enforcement(
        rules=effective_rules(at=now), pools=[org.pool]
    )
    detail = next(row["detail"] for row in rows if row["rule"].startswith("vision: tiers"))
    assert "kueue.x-k8s.io/priority-class=production" in detail
    backend = KueueBackend(connection=KueueConnection(), mutating=True)
    after = services.desired_state_for(
        cluster=org.cluster, backend=backend, at=now + timedelta(hours=3)
    )
    assert after == before


def test_dropping_a_limit_or_a_flavor_is_seen_as_a_change(org):
    _p, quota = org.project("vision", guarantee=8, borrow=4)
    org.project("vision", flavor=org.h100, guarantee=2)
    _b, before, _o = compile_org(org)
    rules.quota_update(quota=quota, user=org.ops, reason=REASON, data={"borrow_limit": None})
    _b, after, _o = compile_org(org)
    cq = "vision--training"
    path = "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].borrowingLimit"
    assert (before["ClusterQueue"][cq][path], after["ClusterQueue"][cq][path]) == ("4", "")
    assert before["ClusterQueue"][cq]["spec.resourceGroups[0].flavors"] == "a100,h100"


def test_named_job_grants_and_tier_caps_are_reported_not_silently_dropped(org):
    project, _quota = org.project("vision")
    rules.tier_update(
        tier=org.production, user=org.ops, reason=REASON, data={"max_gpus_per_job": 8}
    )
    now = timezone.now()
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=project,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=org.production,
            job_ids=("123",),
            starts_at=now - timedelta(minutes=1),
            ends_at=now + timedelta(hours=1),
        ),
    )
    backend, state, _objs = compile_org(org)
    _desired, skipped = backend.settle(desired=state, live=None, applied={})
    notes = " ".join(change.note for change in skipped)
    assert "123" in notes and "kueue.x-k8s.io/priority-class" in notes
    assert "GPU caps of tier production" in notes


def test_field_owners_are_found_in_managed_fields():
    obj = {
        "metadata": {
            "managedFields": [
                {"manager": "arbiter", "operation": "Apply", "fieldsV1": {"f:spec": {}}},
                {
                    "manager": "kubectl-edit",
                    "operation": "Update",
                    "fieldsV1": {"f:spec": {"f:resourceGroups": {}}},
                },
                {
                    "manager": "ops-script",
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:spec": {
                            "f:flavors": {'k:{"name":"a100"}': {"f:weight": {}}},
                            "f:cohortName": {},
                        }
                    },
                },
            ]
        }
    }
    field = "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota"
    assert field_owners(obj, field) == ["kubectl-edit (Update)"]
    assert field_owners(obj, "spec.cohortName") == ["ops-script (Apply)"]
    assert field_owners(obj, "spec.flavors[a100].weight") == ["ops-script (Apply)"]
    assert field_owners(obj, "spec.flavors[h100].weight") == []
    assert field_owners(obj, "spec.fairSharing.weight") == []


# --- export ------------------------------------------------------------------------------------


def test_export_is_deterministic_one_file_per_object(org, tmp_path):
    org.project("vision", guarantee=8)
    org.project("serving", guarantee=4, pool=org.child)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    result = services.sync_export(cluster=org.cluster, directory=str(first))
    services.sync_export(cluster=org.cluster, directory=str(second))
    names = sorted(path.name for path in first.iterdir())
    assert names == sorted(result.written)
    assert names == sorted(path.name for path in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes()
    assert "01-namespace-vision.yaml" in names
    assert "06-clusterqueue-vision--training.yaml" in names
    assert "07-localqueue-serving.training-eu.yaml" in names
    queue = yaml.safe_load((first / "06-clusterqueue-vision--training.yaml").read_text())
    assert queue["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert list(queue) == sorted(queue)  # stable key order


def test_re_export_leaves_unchanged_files_alone_and_removes_only_its_own(org, tmp_path):
    _project, quota = org.project("vision", guarantee=8)
    org.project("serving", guarantee=4)
    services.sync_export(cluster=org.cluster, directory=str(tmp_path))
    (tmp_path / "README.md").write_text("hand-written\n")
    (tmp_path / "99-other-thing.yaml").write_text("kind: ConfigMap\nmetadata: {name: x}\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    # A new rules revision alone changes no file.
    rules.rules_revision_create(trigger="manual", note="nothing", user=org.ops)
    again = services.sync_export(cluster=org.cluster, directory=str(tmp_path))
    assert again.written == [] and again.removed == []
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # A quota change rewrites exactly its queue's file.
    rules.quota_update(quota=quota, user=org.ops, reason=REASON, data={"guarantee": 10})
    changed = services.sync_export(cluster=org.cluster, directory=str(tmp_path))
    # (and the pool's cohort, whose shared rest shrinks by the same two GPUs)
    assert changed.written == ["05-cohort-training.yaml", "06-clusterqueue-vision--training.yaml"]
    cohort = yaml.safe_load((tmp_path / "05-cohort-training.yaml").read_text())
    assert cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "18"
    # Objects no longer desired lose their file; other files stay.
    org.cluster.pools.set([])
    gone = services.sync_export(cluster=org.cluster, directory=str(tmp_path))
    assert "06-clusterqueue-vision--training.yaml" in gone.removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["99-other-thing.yaml", "README.md"]


def test_export_command_writes_the_files(org, tmp_path, capsys):
    org.project("vision")
    call_command("sync_scheduler", "--cluster", "k8s", "--export", str(tmp_path))
    out = capsys.readouterr().out
    assert "written" in out
    assert (tmp_path / "06-clusterqueue-vision--training.yaml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--export", "DIR"], "--export needs --cluster NAME"),
        (["--cluster", "nope", "--export", "DIR"], "No cluster named 'nope'"),
        (["--cluster", "k8s", "--export", "DIR/missing"], "does not exist"),
    ],
)
def test_export_command_bad_input_is_a_clear_error(org, tmp_path, args, message):
    args = [a.replace("DIR", str(tmp_path)) for a in args]
    with pytest.raises(CommandError, match=message):
        call_command("sync_scheduler", *args)
    assert list(tmp_path.iterdir()) == []


def test_export_of_an_invalid_rule_writes_nothing_and_names_the_rule(org, tmp_path):
    org.project("vision")
    rules.tier_update(
        tier=org.regular, user=org.ops, reason=REASON, data={"scheduler_value": 2_000_000_000}
    )
    with pytest.raises(CommandError, match=r"1000000000.*from tier regular"):
        call_command("sync_scheduler", "--cluster", "k8s", "--export", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_file_names_put_namespaces_first():
    ns = {"kind": "Namespace", "metadata": {"name": "a"}}
    lq = {"kind": "LocalQueue", "metadata": {"name": "p", "namespace": "a"}}
    assert file_name(ns) < file_name(lq)
    assert Path(file_name(lq)).name == "07-localqueue-a.p.yaml"


def test_export_into_a_file_path_is_an_error(org, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    backend, _state, _objs = compile_org(org)
    with pytest.raises(services.SchedulerError, match="does not exist"):
        export_objects(backend.objects, target)


def test_a_kueue_cluster_gets_the_kueue_backend_with_its_settings(settings, tmp_path):
    """``Cluster`` gains ``backend="kueue"`` and the ``kube_*`` fields in another change;
    the backend reads them by name, so an unsaved cluster with them set stands in here."""
    from queues.models import Cluster

    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    cluster = Cluster(name="gpu-k8s", backend="kueue")
    cluster.kube_api_server = "https://k8s.example.com:6443"
    cluster.kube_ca_bundle = "PEM"
    cluster.kube_credentials_file = "arbiter-token"
    cluster.kube_namespace_template = "team-{project}"
    backend = services.backend_for(cluster)
    assert isinstance(backend, KueueBackend)
    assert backend.connection == KueueConnection(
        api_server="https://k8s.example.com:6443",
        ca_bundle="PEM",
        credentials_path=str((tmp_path / "arbiter-token").resolve()),
        namespace_template="team-{project}",
    )
    assert isinstance(services.backend_for(Cluster(name="s", backend="slurm")), SlurmBackend)


@pytest.mark.parametrize("name", ["../etc/passwd", "sub/token", ".hidden", ""])
def test_a_credentials_file_outside_the_allowed_directory_is_refused(settings, tmp_path, name):
    from queues.models import Cluster

    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    cluster = Cluster(name="gpu-k8s", backend="kueue")
    cluster.kube_api_server = "https://k8s.example.com:6443"
    cluster.kube_credentials_file = name
    connection = KueueConnection.from_cluster(cluster)
    assert connection.credentials_path == "" and connection.problem
    backend = KueueBackend(connection=connection)
    with pytest.raises(services.SchedulerError) as caught:
        backend.read_live()
    assert str(caught.value) == connection.problem
    assert backend.calls == 0


def test_compiling_takes_the_same_queries_whatever_the_number_of_projects(org):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            compile_org(org)
        return len(captured.captured_queries)

    org.project("p0", tier=org.production)
    org.project("p1", tier=org.regular)
    few = queries()
    for i in range(2, 8):
        org.project(f"p{i}", tier=org.production if i % 2 else None, guarantee=1)
    assert queries() == few


def test_the_plan_shows_per_rule_how_kueue_enforces_it_never_an_empty_list(org):
    """Native where a Kueue field holds the rule, "arbiter" where Arbiter's enforcer does;
    otherwise "not enforced" with the reason, like the Slurm backend's table (the facts:
    tests/queues/test_kueue_truth*.py)."""
    kw = {"user": org.ops, "reason": REASON}
    cautious = rules.preemption_class_create(
        **kw,
        slug="cautious",
        name="Cautious",
        kind="cautious",
        business_impact="Costly restart.",
        min_runtime_minutes=30,
        max_preemptions_per_day=2,
    )
    org.project("vision", guarantee=8, borrow=4, lending=2, preemption_class=cautious)
    org.project("serving", guarantee=4, preemption_class=org.forbidden, tier=org.production)
    backend = KueueBackend(connection=KueueConnection(), mutating=True)
    rows = enforcement_for(cluster=org.cluster, backend=backend, at=timezone.now())
    how = {row["rule"]: (row["how"], row["detail"]) for row in rows}
    assert how["Tier Production: priority"][0] == "native"
    assert "preemptionPolicy Never" in how["Tier Production: priority"][1]
    assert how["Tier Production: may preempt Exploratory, Regular"][0] == "not_enforced"
    assert how["vision in training/a100: guarantee 8, maximum 12"][0] == "native"
    assert how["vision in training/a100: lends at most 2 GPUs"][0] == "native"
    assert how["serving in training/a100: class Forbidden, never preempted"][0] == "native"
    # Held by Arbiter's enforcer against preemption by priority; a reclaim is not stopped.
    runtime = how["vision: class Cautious, 30 minutes before preemption"]
    assert runtime[0] == "arbiter"
    assert "reclaimWithinCohort Any" in runtime[1]
    assert how["vision: class Cautious, at most 2 preemptions a day"][0] == "arbiter"
    assert not any("grace" in rule for rule in how)  # no grace asked: no row
    assert [h for rule, (h, _d) in how.items() if rule.startswith("vision: tiers ")] == ["native"]
