"""An object's history sections come from its ``RuleKind`` alone (issue 40).

The history page and the API of every rule kind read ``selectors.object_history_sections``:
the object's own rows, then the sections its kind declares (``RuleKind.history_sections``).
A kind whose keyed field stores its values in another model (a project's members, a pool's
capacity) must declare a section of that model, or the history would lose those rows; no
view lists sections of its own.
"""

import ast
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import NoReverseMatch, reverse

from governance.selectors import object_history_sections
from governance.selectors.changes import REGISTRY, RuleKind
from tests.conftest import login

# object_type → why the kind has no history page (the list only shrinks).
NO_HISTORY_PAGE = {
    "cluster": "no history page yet: its rows are kept (HistoricalRecords) and its changes "
    "listed on the rule change pages",
}


def _kinds() -> list[RuleKind]:
    return list(REGISTRY.values())


def test_every_stored_in_model_has_its_history_section():
    missing = [
        f"{kind.object_type}.{name}: its values are stored in {keyed.stored_in.__name__}, "
        "which no history section of the kind shows (RuleKind.history_sections)"
        for kind in _kinds()
        for name, keyed in kind.keyed.items()
        if keyed.stored_in is not None
        and keyed.stored_in not in {section.model for section in kind.history_sections}
    ]
    assert missing == []


def test_sections_are_named_and_titled_once():
    for kind in _kinds():
        names = [kind.model._meta.model_name] + [s.name for s in kind.history_sections]
        assert len(names) == len(set(names)), kind.object_type
        assert all(str(section.title) for section in kind.history_sections), kind.object_type


def test_the_registry_holds_the_kinds_with_sections():
    """Without this, an empty registry would pass the tests above."""
    assert {"project", "pool", "user", "cluster", "approval_policy"} <= {
        kind.object_type for kind in _kinds()
    }
    assert sum(bool(kind.history_sections) for kind in _kinds()) >= 2


def _history_url(kind: RuleKind, obj) -> str | None:
    key = getattr(obj, kind.key_field)
    try:
        return reverse(f"{kind.pages}_history", args=[key])
    except NoReverseMatch:
        return None


@pytest.mark.django_db
def test_every_kinds_history_page_shows_its_sections(world, ops):
    client = login(ops)
    shown = set()
    for kind in _kinds():
        obj = kind.model._default_manager.order_by("pk").first()
        if obj is None:
            continue
        url = _history_url(kind, obj)
        if url is None:
            assert kind.object_type in NO_HISTORY_PAGE, f"{kind.object_type}: no history page"
            continue
        assert kind.object_type not in NO_HISTORY_PAGE, "it has a page now: remove it"
        page = client.get(url)
        assert page.status_code == 200, url
        sections = object_history_sections(obj=obj)
        assert [s.name for s in sections][1:] == [s.name for s in kind.history_sections]
        if len(sections) > 1:
            for section in sections:
                assert f"<h2>{section.title}</h2>" in page.content.decode(), (url, section)
        shown.add(kind.object_type)
    assert {"project", "pool", "tier", "quota"} <= shown


@pytest.mark.django_db
def test_the_history_api_names_the_declared_sections(world, ops, api_client):
    api_client.force_authenticate(ops)
    kind = next(kind for kind in _kinds() if kind.object_type == "pool")
    answer = api_client.get(reverse("api_pool_history", args=[world.training.slug])).json()
    sections = {row["section"] for row in answer["results"]}
    assert sections <= {"pool", *(s.name for s in kind.history_sections)}
    assert "capacity" in sections, answer


# Views that read a history that is no rule kind's, each with its reason.
OTHER_HISTORIES = {
    "governance/views/changes.py": "a rule change's own status history (no rule kind)",
}


def _called(path: Path) -> set[str]:
    return {
        getattr(node.func, "attr", getattr(node.func, "id", ""))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
    }


def test_no_view_lists_history_sections_of_its_own():
    """The views and APIs read ``object_history_sections``, never a section's entries."""
    readers = {"history_entries", "membership_history_entries", "capacity_history_entries"}
    root = Path(settings.BASE_DIR)
    found = []
    for app in ("governance", "queues", "approvals", "reports"):
        for folder in ("views", "apis"):
            for path in [*(root / app).glob(f"{folder}.py"), *(root / app / folder).rglob("*.py")]:
                name = path.relative_to(root).as_posix()
                if _called(path) & readers and name not in OTHER_HISTORIES:
                    found.append(name)
    assert found == [], "read selectors.object_history_sections instead"
