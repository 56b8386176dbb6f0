"""The schema tier: generated objects checked offline against Kueue's v1beta2 CRD schemas
(strictly), the CRDs' CEL rules, Kueue's webhook checks and the PriorityClass rules.

They catch such objects before anything is sent, naming the rule behind them; the API
server CI runs (v1.35 with Kueue's webhooks) refuses the same objects
(tests/queues/test_sync_kueue.py), so a sync never half-applies a refused plan.
"""

import copy
from pathlib import Path

import pytest
from django.utils import timezone

from governance import services as rules
from queues import services
from queues.schedulers.kueue.desired import DesiredObjects
from queues.services.kueue import KueueBackend, KueueConnection, KueueValidationError
from queues.services.kueue.codegen import generate_check
from queues.services.kueue.compiled import compile_check
from queues.services.kueue.schema import (
    SHIPPED_CRDS,
    StrictValidator,
    _compiled,
    _validators,
    load_crds,
    object_violations,
    structural_to_jsonschema,
    validate,
    version_schema,
)
from tests.conftest import REASON

GPU = "nvidia.com/gpu"
META = {"labels": {"app.kubernetes.io/managed-by": "arbiter"}}


def cluster_queue(**spec):
    base = {
        "cohortName": "training",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "vision"}},
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {
                        "name": "a100",
                        "resources": [
                            {"name": GPU, "nominalQuota": "8", "borrowingLimit": "4"},
                        ],
                    }
                ],
            }
        ],
        "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"},
        "fairSharing": {"weight": "1"},
    }
    base.update(spec)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "vision--training", **META},
        "spec": base,
    }


def resource(**changes):
    return {"name": GPU, "nominalQuota": "8", **changes}


def with_resource(**changes):
    queue = cluster_queue()
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] = resource(**changes)
    return queue


def without_cohort(queue):
    queue = copy.deepcopy(queue)
    del queue["spec"]["cohortName"]
    return queue


def kind_object(kind, **body):
    api = "scheduling.k8s.io/v1" if kind == "PriorityClass" else "kueue.x-k8s.io/v1beta2"
    meta = {"name": body.pop("name", "x"), **META}
    if "namespace" in body:
        meta["namespace"] = body.pop("namespace")
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def test_the_valid_objects_pass():
    assert object_violations(cluster_queue()) == []
    assert (
        object_violations(kind_object("PriorityClass", value=100, preemptionPolicy="Never")) == []
    )
    assert object_violations(kind_object("WorkloadPriorityClass", value=100)) == []
    assert object_violations(kind_object("Cohort", spec={"parentName": "all"})) == []
    lq = kind_object("LocalQueue", namespace="vision", spec={"clusterQueue": "vision--training"})
    assert object_violations(lq) == []


BROKEN = [
    # Structure (openAPIV3Schema, strict).
    (cluster_queue(cohort="training"), "spec", "Additional properties are not allowed ('cohort'"),
    (
        cluster_queue(queueingStrategy="RandomOrder"),
        "spec.queueingStrategy",
        "'RandomOrder' is not one of ['StrictFIFO', 'BestEffortFIFO']",
    ),
    (
        with_resource(nominalQuota="eight"),
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota",
        "'eight' does not match",
    ),
    (
        cluster_queue(resourceGroups=[{"coveredResources": [GPU]}]),
        "spec.resourceGroups[0]",
        "'flavors' is a required property",
    ),
    (
        cluster_queue(preemption={"withinClusterQueue": "Always"}),
        "spec.preemption.withinClusterQueue",
        "'Always' is not one of",
    ),
    (
        kind_object("WorkloadPriorityClass", value=2**31),
        "value",
        "out of the int32 range",
    ),
    (kind_object("WorkloadPriorityClass"), "", "'value' is a required property"),
    (
        kind_object("PriorityClass", value=1, preemptionPolicy="Sometimes"),
        "preemptionPolicy",
        "'Sometimes' is not one of ['PreemptLowerPriority', 'Never']",
    ),
    (kind_object("PriorityClass", value=1, bogus=True), "", "('bogus' was unexpected)"),
    (kind_object("PriorityClass", value="high"), "value", "'high' is not of type 'integer'"),
    (
        {**cluster_queue(), "metadata": {"name": "Team_B"}},
        "metadata.name",
        "“Team_B” is not a valid name",
    ),
    (kind_object("LocalQueue", spec={"clusterQueue": "q"}), "metadata.namespace", "is required"),
    (
        {
            **kind_object("LocalQueue", namespace="ns", spec={"clusterQueue": "q"}),
            "apiVersion": "kueue.x-k8s.io/v1beta1",
        },
        "apiVersion",
        "must be kueue.x-k8s.io/v1beta2",
    ),
    (
        cluster_queue(
            resourceGroups=[
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": "a100", "resources": [resource()]},
                        {"name": "a100", "resources": [resource()]},
                    ],
                }
            ]
        ),
        "spec.resourceGroups[0].flavors",
        "duplicate entry with name=a100",
    ),
    # CEL rules of the CRDs.
    (
        without_cohort(with_resource(borrowingLimit="2")),
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].borrowingLimit",
        "borrowingLimit must be nil when cohort is empty",
    ),
    (
        cluster_queue(
            resourceGroups=[
                {
                    "coveredResources": [GPU, "cpu"],
                    "flavors": [{"name": "a100", "resources": [resource()]}],
                }
            ]
        ),
        "spec.resourceGroups[0]",
        "flavors must have the same number of resources as the coveredResources",
    ),
    (
        cluster_queue(
            preemption={
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            }
        ),
        "spec.preemption",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),
    (
        cluster_queue(
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "preference": "BorrowingOverPreemption",
            }
        ),
        "spec.flavorFungibility.preference",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    (
        kind_object(
            "Cohort",
            spec={
                "resourceGroups": [
                    {
                        "coveredResources": [GPU, "cpu"],
                        "flavors": [{"name": "a", "resources": [resource()]}],
                    }
                ]
            },
        ),
        "spec.resourceGroups[0]",
        "flavors must have the same number of resources as the coveredResources",
    ),
    (
        kind_object("ResourceFlavor", spec={"topologyName": "rack"}),
        "spec",
        "at least one nodeLabel is required when topology is set",
    ),
    (
        kind_object("ResourceFlavor", spec={"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}),
        "spec.nodeTaints[0]",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
    (
        kind_object("ResourceFlavor", spec={"tolerations": [{"operator": "Equal", "value": "x"}]}),
        "spec.tolerations[0]",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    ),
    (
        kind_object(
            "ResourceFlavor",
            spec={"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]},
        ),
        "spec.tolerations[0]",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
    ),
    (
        kind_object("ResourceFlavor", spec={"tolerations": [{"key": "k", "operator": "In"}]}),
        "spec.tolerations[0]",
        "supported toleration values: 'Equal'(default), 'Exists'",
    ),
    (
        kind_object(
            "ResourceFlavor",
            spec={"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
        ),
        "spec.tolerations[0]",
        "a value must be empty when 'operator' is 'Exists'",
    ),
    (
        kind_object("ResourceFlavor", spec={"tolerations": [{"key": "k", "effect": "Never"}]}),
        "spec.tolerations[0]",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
    # Kueue's webhook checks.
    (
        with_resource(lendingLimit="9"),
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].lendingLimit",
        "must be less than or equal to the nominalQuota",
    ),
    (
        with_resource(nominalQuota="-1"),
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota",
        "must be greater than or equal to 0",
    ),
    (
        with_resource(name="cpu"),
        "spec.resourceGroups[0].flavors[a100].resources[cpu].name",
        "must match the name in coveredResources (nvidia.com/gpu)",
    ),
    (
        kind_object(
            "Cohort",
            spec={
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [{"name": "a", "resources": [resource(lendingLimit="1")]}],
                    }
                ]
            },
        ),
        "spec.resourceGroups[0].flavors[a].resources[nvidia.com/gpu].lendingLimit",
        "lendingLimit must be nil when parent is empty",
    ),
    (
        cluster_queue(namespaceSelector=None),
        "spec.namespaceSelector",
        "a null selector admits no namespace",
    ),
    # PriorityClass rules of the API server.
    (
        kind_object("PriorityClass", value=2_000_000_000),
        "value",
        "maximum allowed value of a user defined priority is 1000000000",
    ),
    (
        kind_object("PriorityClass", name="system-foo", value=1),
        "metadata.name",
        "priority class names with 'system-' prefix are reserved",
    ),
]


@pytest.mark.parametrize(("manifest", "path", "message"), BROKEN)
def test_a_broken_object_is_rejected_with_the_right_message(manifest, path, message):
    found = object_violations(manifest)
    assert any(p == path and message in m for p, m in found), found


def _schema_errors(manifest):
    """What jsonschema alone (the strict schema, no compiled check) finds in ``manifest``."""
    return list(_validators(str(SHIPPED_CRDS))[manifest["kind"]].iter_errors(manifest))


@pytest.mark.parametrize(("manifest", "path", "message"), BROKEN)
def test_the_compiled_check_passes_nothing_jsonschema_refuses(manifest, path, message):
    """The compiled check (one per schema, built once) says valid only where jsonschema finds
    no error: a broken object still goes through jsonschema, which names its fault."""
    passes = _compiled(str(SHIPPED_CRDS))[manifest["kind"]](manifest)
    assert not (passes and _schema_errors(manifest))


@pytest.mark.parametrize("compiler", [compile_check, generate_check])
def test_the_compiled_check_refuses_every_kind_of_schema_fault(compiler):
    """Faults of each keyword the compiler handles, on small schemas: each refused by both
    (the closures of ``compile_check`` and the generated source of ``generate_check``)."""
    schema = structural_to_jsonschema(
        {
            "type": "object",
            "required": ["n"],
            "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 5, "format": "int32"},
                "s": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
                "e": {"type": "string", "enum": ["a", "b"]},
                "l": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "u": {"type": "array", "x-kubernetes-list-type": "set", "items": {}},
                "m": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "q": {"x-kubernetes-int-or-string": True},
                "o": {"type": "object", "nullable": True, "properties": {"a": {"type": "string"}}},
            },
        }
    )
    check = compiler(schema, StrictValidator)
    validator = StrictValidator(schema)
    good = {"n": 3, "s": "ab", "e": "a", "l": ["x"], "u": [1, 2], "m": [{"name": "a"}], "q": 4}
    assert check(good) and not list(validator.iter_errors(good))
    assert check({**good, "o": None, "q": "4"})
    bad = [
        {"s": "ab"},  # required
        {**good, "n": "3"},  # type
        {**good, "n": True},  # a bool is no integer
        {**good, "n": 0},  # minimum
        {**good, "n": 6},  # maximum
        {**good, "s": "AB"},  # pattern
        {**good, "s": "abcd"},  # maxLength
        {**good, "e": "c"},  # enum
        {**good, "l": ["x", "y", "z"]},  # maxItems
        {**good, "l": [1]},  # items
        {**good, "u": [1, 1]},  # uniqueItems (a set)
        {**good, "u": [1, 1.0]},  # equal in JSON
        {**good, "m": [{"name": "a"}, {"name": "a"}]},  # list-map keys
        {**good, "q": 1.5},  # int-or-string
        {**good, "o": {"b": "x"}},  # additional properties (strict)
        {**good, "x": 1},  # additional properties at the top
    ]
    for instance in bad:
        assert list(validator.iter_errors(instance)), instance
        assert not check(instance), instance


@pytest.mark.parametrize("compiler", [compile_check, generate_check])
def test_an_unknown_keyword_leaves_the_decision_to_jsonschema(compiler):
    assert not compiler({"type": "object", "dependencies": {"a": ["b"]}}, StrictValidator)({})
    assert not compiler({"not": {"type": "string"}}, StrictValidator)(1)
    inner = {"type": "object", "properties": {"a": {"type": "string", "dependencies": {}}}}
    assert not compiler(inner, StrictValidator)({"a": "x"})


@pytest.mark.parametrize(("manifest", "path", "message"), BROKEN)
def test_the_generated_check_answers_as_the_closures(manifest, path, message):
    """Each kind's generated check (the one the export uses) gives ``compile_check``'s
    answer on every broken object, and on its repaired copies of each of its fields."""
    kind = manifest["kind"]
    schema = _validators(str(SHIPPED_CRDS))[kind].schema
    closures = compile_check(schema, StrictValidator)
    generated = _compiled(str(SHIPPED_CRDS))[kind]
    assert generated(manifest) == closures(manifest)
    for field in manifest.get("spec") or {}:
        trimmed = copy.deepcopy(manifest)
        del trimmed["spec"][field]
        assert generated(trimmed) == closures(trimmed), field


def test_a_broken_object_among_many_valid_ones_is_still_refused():
    """The export validates every object, not one per shape: the 500th ClusterQueue of
    the same shape with a bad value is refused, named."""
    objects = DesiredObjects()
    for n in range(500):
        queue = cluster_queue()
        queue["metadata"]["name"] = f"q{n}--training"
        objects.add(queue, "quota")
    queue = with_resource(nominalQuota="eight")
    queue["metadata"]["name"] = "q500--training"
    objects.add(queue, "quota")
    found = [v for v in validate(objects) if v.kind == "ClusterQueue" and "eight" in v.message]
    assert [v.name for v in found] == ["q500--training"]


def test_every_cel_rule_of_the_shipped_crds_is_checked():
    """Every non-transition CEL rule in the CRDs has a case above that triggers it (a new
    Kueue version's new rule fails this test until it is written out)."""
    messages = set()

    def walk(node):
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations", []):
                if "oldSelf" not in rule["rule"]:
                    messages.add(rule["message"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for crd in load_crds(SHIPPED_CRDS).values():
        walk(version_schema(crd))
    covered = {message for _m, _p, message in BROKEN}
    assert messages <= covered, messages - covered


def test_the_set_is_checked_as_a_whole():
    objects = DesiredObjects()
    objects.add(kind_object("PriorityClass", name="a", value=1, globalDefault=True), "tier a")
    objects.add(kind_object("PriorityClass", name="b", value=2, globalDefault=True), "tier b")
    objects.add(kind_object("PriorityClass", name="c", value=3), "tier c")
    objects.add(kind_object("PriorityClass", name="c", value=4), "tier c2")
    objects.add(
        cluster_queue(),
        "quotas of vision",
        **{"spec.resourceGroups[0].flavors[a100]": "quota vision/training/a100"},
    )
    objects.add(
        kind_object("LocalQueue", name="q", namespace="nowhere", spec={"clusterQueue": "other"}),
        "quotas of x",
    )
    found = {(v.kind, v.name, v.message.split(" (")[0], v.source) for v in validate(objects)}
    assert (
        "PriorityClass",
        "b",
        "only one PriorityClass may be the global default",
        "tier b",
    ) in found
    assert ("PriorityClass", "c", "two rules produce the same name", "tier c2") in found
    assert (
        "ClusterQueue",
        "vision--training",
        "names a ResourceFlavor that is not generated",
        "quota vision/training/a100",
    ) in found
    assert (
        "LocalQueue",
        "nowhere/q",
        "names a ClusterQueue that is not generated",
        "quotas of x",
    ) in found
    assert (
        "LocalQueue",
        "nowhere/q",
        "names a namespace that is not generated",
        "quotas of x",
    ) in found


def test_the_structural_schema_becomes_strict_json_schema():
    schema = structural_to_jsonschema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": True, "description": "x"},
                "b": {"x-kubernetes-int-or-string": True},
                "c": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string"},
                },
                "d": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"e": {}},
                },
            },
        }
    )
    assert schema["additionalProperties"] is False
    assert schema["properties"]["a"] == {"type": ["string", "null"], "nullable": True}
    assert schema["properties"]["b"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert schema["properties"]["c"]["uniqueItems"] is True
    assert "additionalProperties" not in schema["properties"]["d"]


def test_a_crd_directory_setting_is_used_and_checked(settings, tmp_path):
    settings.ARBITER_KUEUE_CRDS_DIR = str(tmp_path / "missing")
    with pytest.raises(services.SchedulerError, match="does not exist"):
        load_crds()
    settings.ARBITER_KUEUE_CRDS_DIR = str(tmp_path)
    (tmp_path / "kueue.x-k8s.io_cohorts.yaml").write_text(
        (SHIPPED_CRDS / "kueue.x-k8s.io_cohorts.yaml").read_text()
    )
    with pytest.raises(services.SchedulerError, match="no CRD for WorkloadPriorityClass"):
        load_crds()
    for path in SHIPPED_CRDS.glob("*.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    assert set(load_crds(Path(tmp_path))) >= {"ClusterQueue", "LocalQueue"}


def test_a_violation_blocks_the_sync_and_names_the_rule(org):
    org.project("vision", guarantee=8)
    rules.tier_create(
        user=org.ops,
        reason=REASON,
        slug="system-critical",
        name="Critical",
        score=50,
        scheduler_value=500,
        eligibility="Any",
        confirmed_by="Ops",
        review_cycle_days=90,
        owner=org.ops,
    )
    backend = KueueBackend(connection=KueueConnection())
    with pytest.raises(KueueValidationError) as caught:
        services.desired_state_for(cluster=org.cluster, backend=backend, at=timezone.now())
    assert (
        "PriorityClass system-critical metadata.name: priority class names with 'system-' "
        "prefix are reserved (from tier system-critical)"
    ) in str(caught.value)
    assert backend.objects is None  # nothing to apply


def test_a_failing_sync_records_the_violation_and_writes_nothing(org):
    """The sync run fails with the violation before any call to a cluster is made (the
    connection here points nowhere: a call would fail differently)."""
    org.project("vision", guarantee=8)
    rules.tier_update(
        tier=org.regular, user=org.ops, reason=REASON, data={"scheduler_value": 1_500_000_000}
    )
    backend = KueueBackend(connection=KueueConnection(api_server="https://127.0.0.1:9"))
    run = services.sync_now(cluster=org.cluster, user=org.ops, backend=backend)
    assert run.status == "failed"
    assert (
        "maximum allowed value of a user defined priority is 1000000000 (from tier regular)"
        in run.error
    )
    assert backend.calls == 0
