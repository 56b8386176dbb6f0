"""The plan's fast path: objects flattened together share what equal values became
(``values.Memo``), the generator makes most objects' fields as it makes them
(``desired.fields``, ``DesiredObjects.state``), and equal flattened objects skip the
field-by-field diff. All must give exactly the fields and the changes of the one-by-one way."""

import itertools
from typing import Any

from queues.schedulers.backends import (
    Action,
    Change,
    FieldChange,
    LiveState,
    State,
    diff_fields,
    plan_changes,
)
from queues.schedulers.kueue.desired import DesiredObjects, tier_policy
from queues.schedulers.kueue.desired.fields import cluster_queue_fields, tier_policy_fields
from queues.schedulers.kueue.values import (
    ADMISSION_POLICY,
    CLUSTER_QUEUE,
    COHORT,
    KINDS,
    LOCAL_QUEUE,
    MUTATING_BINDING,
    MUTATING_POLICY,
    NAMESPACE,
    POLICY_BINDING,
    PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    WORKLOAD_PRIORITY_CLASS,
    Memo,
    flatten,
    flatten_all,
    values_equal,
)
from tests.queues.test_kueue_desired_golden import _organisation, golden_objects

LABELS = {"app.kubernetes.io/managed-by": "arbiter"}


def queue(name: str, guarantee: str, borrow: str | None = None) -> dict[str, Any]:
    resource = {"name": "nvidia.com/gpu", "nominalQuota": guarantee}
    if borrow is not None:
        resource["borrowingLimit"] = borrow
    return {
        "kind": CLUSTER_QUEUE,
        "metadata": {"name": name, "labels": LABELS},
        "spec": {
            "cohortName": "train",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "a100", "resources": [resource]}],
                }
            ],
            "preemption": {
                "withinClusterQueue": "Never",
                "borrowWithinCohort": {"policy": "Never"},
            },
        },
    }


def flavor(name: str, tolerations: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": RESOURCE_FLAVOR,
        "metadata": {"name": name, "labels": LABELS},
        "spec": {"tolerations": tolerations, "topology": extra},
    }


def objects() -> list[dict[str, Any]]:
    # Queues sharing their resource groups and preemption; flavors whose values are equal
    # to Python (1 == 1.0 == True) but not as JSON.
    return [
        *(queue(f"q{i}", str(1 + i % 2), "4" if i % 3 else None) for i in range(12)),
        flavor("f1", [{"key": "gpu", "tolerationSeconds": 1}], {"levels": 1}),
        flavor("f2", [{"key": "gpu", "tolerationSeconds": True}], {"levels": True}),
        flavor("f3", [{"key": "gpu", "tolerationSeconds": 1.0}], {"levels": 1.0}),
        flavor("f4", [{"key": "gpu", "tolerationSeconds": 1}], {"levels": 1}),
        {"kind": LOCAL_QUEUE, "metadata": {"name": "q", "namespace": "q1"}, "spec": {}},
    ]


def test_objects_flattened_together_are_flattened_as_one_by_one():
    together = flatten_all(objects())
    for obj in objects():
        alone = flatten(obj)  # a memo of its own
        key = "q1/q" if obj["kind"] == LOCAL_QUEUE else obj["metadata"]["name"]
        assert list(together[obj["kind"]][key].items()) == list(alone.items())  # in order
    assert set(together) == set(KINDS)


def test_a_queue_flattens_to_its_fields():
    assert flatten_all(objects())[CLUSTER_QUEUE]["q1"] == {
        "metadata.labels[app.kubernetes.io/managed-by]": "arbiter",
        "spec.cohortName": "train",
        "spec.namespaceSelector": '{"matchLabels":{"kubernetes.io/metadata.name":"q1"}}',
        "spec.preemption.borrowWithinCohort.policy": "Never",
        "spec.preemption.withinClusterQueue": "Never",
        "spec.resourceGroups[0].coveredResources": '["nvidia.com/gpu"]',
        "spec.resourceGroups[0].flavors": "a100",
        "spec.resourceGroups[0].flavors[a100].resources": "nvidia.com/gpu",
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].borrowingLimit": "4",
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].lendingLimit": "",
        "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota": "2",
    }


def test_numbers_and_booleans_equal_to_python_are_never_taken_for_one_another():
    flavors = flatten_all(objects())[RESOURCE_FLAVOR]
    assert [flavors[name]["spec.tolerations"] for name in ("f1", "f2", "f3", "f4")] == [
        '[{"key":"gpu","tolerationSeconds":1}]',
        '[{"key":"gpu","tolerationSeconds":true}]',
        '[{"key":"gpu","tolerationSeconds":1.0}]',
        '[{"key":"gpu","tolerationSeconds":1}]',
    ]
    assert [flavors[name]["spec.topology.levels"] for name in ("f1", "f2", "f3", "f4")] == [
        "1",
        "true",
        "1.0",
        "1",
    ]


def test_a_memo_reuses_only_text():
    memo = Memo()
    text = {"matchLabels": {"a": "b"}}
    assert memo.canonical("namespaceSelector", text) == '{"matchLabels":{"a":"b"}}'
    assert memo.canonical("namespaceSelector", {"matchLabels": {"a": "b"}}) == (
        '{"matchLabels":{"a":"b"}}'
    )
    assert memo.counts["namespaceSelector"] == [1, 1]
    assert memo.canonical("x", [1]) == "[1]"
    assert memo.canonical("x", [True]) == "[true]"


def field_by_field(desired: State, live: LiveState) -> list[Change]:
    """The plan as it was made before the fast path: every object diffed field by field."""
    changes = []
    for kind in KINDS:
        wanted, present = desired.get(kind, {}), live.objects.get(kind, {})
        managed = live.managed.get(kind, set())
        for name in sorted(wanted):
            if name not in present:
                fields = tuple(FieldChange(f, "", v) for f, v in wanted[name].items())
                changes.append(Change(kind=kind, name=name, action=Action.CREATE, fields=fields))
            elif name not in managed:
                changes.append(Change(kind=kind, name=name, action=Action.CONFLICT))
            elif diff := diff_fields(wanted[name], present[name], values_equal):
                changes.append(Change(kind=kind, name=name, action=Action.UPDATE, fields=diff))
        for name in sorted(managed - set(wanted)):
            fields = tuple(FieldChange(f, v, "") for f, v in present[name].items())
            changes.append(Change(kind=kind, name=name, action=Action.DELETE, fields=fields))
    return changes


def test_the_fast_plan_makes_the_changes_of_the_field_by_field_one():
    desired = flatten_all(objects())
    live_objects = [obj for obj in objects() if obj["metadata"]["name"] not in ("q0", "f4")]
    live_objects[0]["spec"]["preemption"]["withinClusterQueue"] = "LowerPriority"  # q1
    live_objects[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = (
        "1000m"  # q2: the same quantity written differently: no change
    )
    live_objects.append(queue("old", "3"))
    state = flatten_all(live_objects)
    managed = {kind: set(found) - {"q3", "f2"} for kind, found in state.items()}
    live = LiveState(objects=state, managed=managed)

    changes = plan_changes(kinds=KINDS, desired=desired, live=live, equal=values_equal)

    assert [(c.kind, c.name, c.action) for c in changes] == [
        (RESOURCE_FLAVOR, "f2", Action.CONFLICT),
        (RESOURCE_FLAVOR, "f4", Action.CREATE),
        (CLUSTER_QUEUE, "q0", Action.CREATE),
        (CLUSTER_QUEUE, "q1", Action.UPDATE),
        (CLUSTER_QUEUE, "q3", Action.CONFLICT),
        (CLUSTER_QUEUE, "old", Action.DELETE),
    ]
    assert changes[3].fields == (
        FieldChange("spec.preemption.withinClusterQueue", "LowerPriority", "Never"),
    )
    expected = field_by_field(desired, live)
    assert [(c.kind, c.name, c.action, c.fields) for c in changes] == [
        (c.kind, c.name, c.action, c.fields) for c in expected
    ]


def _in_order(state: dict[str, dict[str, dict[str, str]]]) -> list[Any]:
    """A state with the order of its kinds, objects and fields."""
    return [
        (kind, [(key, list(fields.items())) for key, fields in found.items()])
        for kind, found in state.items()
    ]


def test_the_generated_fields_are_the_golden_objects_flattened(org):
    # The golden organisation (every shape of project, grant and pool), both namespace
    # rules, with and without MutatingAdmissionPolicy.
    _organisation(org)
    for template, mutating in itertools.product(("{project}", "{project}-{pool}"), (True, False)):
        objects = golden_objects(org, template, mutating)
        made = {kind for kind, found in objects.flat.items() if found}
        state = objects.state()
        assert _in_order(state) == _in_order(flatten_all(objects.manifests))
        # Every kind is there; all but the few objects of the rules' own kinds (and the GPU
        # policy) came with their fields.
        assert made == set(KINDS) - ({MUTATING_POLICY, MUTATING_BINDING} if not mutating else set())
        assert {kind for kind, _key, _m in objects.pending} == {
            PRIORITY_CLASS,
            WORKLOAD_PRIORITY_CLASS,
            RESOURCE_FLAVOR,
            COHORT,
            ADMISSION_POLICY,
            POLICY_BINDING,
        }
        assert objects.state() == state  # again: the same


def test_the_tier_policy_fields_of_every_variant():
    for allowed, own, default, mutating, namespace in itertools.product(
        (["regular"], ["key", "regular", "urgent"], []),
        ("", "regular", "key"),
        ("", "regular", "it's"),
        (True, False),
        ("vision", 'odd"name\\ü'),
    ):
        manifests = tier_policy(
            namespace,
            allowed=allowed,
            own=own,
            default=default,
            source="s",
            revision=None,
            mutating=mutating,
        )
        fields = tier_policy_fields(
            namespace, allowed=allowed, own=own, default=default, mutating=mutating
        )
        assert [list(f.items()) for f in fields] == [
            list(flatten(manifest).items()) for manifest in manifests
        ]


def test_the_cluster_queue_fields_of_every_shape():
    # The generator's shape, with groups and limits it does not make (yet) as well.
    shapes = []
    for groups, weight, namespace in itertools.product(
        (
            [],
            [{"coveredResources": ["nvidia.com/gpu"], "flavors": []}],
            [
                {
                    "coveredResources": ["nvidia.com/gpu", "cpu"],
                    "flavors": [
                        {"name": "h100", "resources": [{"name": "gpu", "nominalQuota": "12000m"}]},
                        {"name": "a100", "resources": []},
                        {
                            "name": "l4",
                            "resources": [
                                {"name": "b", "nominalQuota": "1", "lendingLimit": "0"},
                                {"name": "a", "nominalQuota": "2Ki", "borrowingLimit": "1.50"},
                            ],
                        },
                    ],
                },
                {"coveredResources": [], "flavors": [{"name": "x", "resources": []}]},
            ],
        ),
        ("1", "0.500"),
        ("vision", 'odd"name\\ü'),
    ):
        spec = {
            "cohortName": "train",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": groups,
            "preemption": {
                "withinClusterQueue": "Never",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "Never"},
            },
            "fairSharing": {"weight": weight},
            "stopPolicy": "None",
        }
        shapes.append(spec)
    shapes.append({**shapes[0], "namespaceSelector": {"matchExpressions": []}})
    for spec in shapes:
        manifest = {"kind": CLUSTER_QUEUE, "metadata": {"labels": LABELS}, "spec": spec}
        assert list(cluster_queue_fields(spec).items()) == list(flatten(manifest).items())


def test_the_state_of_objects_added_twice_or_not_added():
    # The last object of a kind and name wins, in the place of the first, as in
    # ``flatten_all``, whether its fields were made or not.
    objects = DesiredObjects()
    first, second, third = queue("q", "1"), queue("q", "2"), queue("q", "3")
    objects.add(queue("p", "1"), "a")
    objects.add(first, "a")
    objects.add_made(second, "b", flatten(second))
    objects.add_made(queue("r", "1"), "a", flatten(queue("r", "1")))
    assert _in_order(objects.state()) == _in_order(
        flatten_all([queue("p", "1"), first, second, queue("r", "1")])
    )
    objects = DesiredObjects()
    objects.add_made(second, "b", flatten(second))
    objects.add(third, "c")
    objects.add(first, "a")
    assert objects.state()[CLUSTER_QUEUE]["q"] == flatten(first)
    # A manifest put in the list by hand: the manifests are flattened.
    objects.manifests.append({"kind": NAMESPACE, "metadata": {"name": "n", "labels": LABELS}})
    assert _in_order(objects.state()) == _in_order(flatten_all(objects.manifests))
