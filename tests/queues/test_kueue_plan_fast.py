"""The plan's fast path: objects flattened together share what equal values became
(``values.Memo``), and equal flattened objects skip the field-by-field diff. Both must give
exactly the fields and the changes of the one-by-one way."""

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
from queues.schedulers.kueue.values import (
    CLUSTER_QUEUE,
    KINDS,
    LOCAL_QUEUE,
    RESOURCE_FLAVOR,
    Memo,
    flatten,
    flatten_all,
    values_equal,
)

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
