"""No door left: a governed row is written only by the services that applying a rule change
calls (docs/architecture.md, "Who writes a governed rule").

The governed models are read from the ``RuleKind`` registry (every kind, every app's), with
the rows their keyed fields store (a project's memberships, a pool's capacity). The source of
every module of the four apps is read with ``ast`` and two kinds of write are looked for:

1. a manager write on a governed model by name (``Quota.objects.create(...)``,
   ``Tier.objects.filter(...).update(...)``, ``bulk_create``, ``get_or_create``, ...);
2. a call of a service that writes a governed row (every public function of the kinds'
   service modules) from anywhere but those modules, the change machinery and the demo's
   own seeding.

Each allowed place is listed below with its reason; a new one fails the test, so that a
kind added later (or a new view, API, admin action, command or task) cannot skip the change
machinery without saying so here and in docs/architecture.md.
"""

import ast
import inspect
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib import admin
from django.test import RequestFactory

from governance.selectors.changes.kinds import REGISTRY

pytestmark = pytest.mark.django_db

APPS = ("governance", "queues", "approvals", "reports")
WRITES = {
    "create",
    "update",
    "delete",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
    "create_user",
    "create_superuser",
}
# The modules that write governed rows: what applying a change calls (each kind's services),
# the change machinery itself, and the demo's own seeding (it bootstraps an organisation
# before anyone can approve anything).
SERVICE_MODULES = {
    "governance.services.flavors",
    "governance.services.pools",
    "governance.services.preemption",
    "governance.services.projects",
    "governance.services.quotas",
    "governance.services.tiers",
    "governance.services.people",
    "queues.services.clusters",
    "approvals.services.policies",
}
CHANGE_MACHINERY = ("governance.services.changes",)
DEMO_SEEDING = (
    "governance.services.demo",
    "approvals.services.demo",
    "queues.services.demo",
    "reports.services.demo",
)
# Other writes of governed rows, each with the reason it is not a rule change. An entry that
# no longer occurs fails the test, so that the list only shrinks.
ALLOWED: dict[tuple[str, str], str] = {
    # Accounts: a new account is inactive and a plain member (it grants nothing); its
    # activation and site role are rule changes.
    ("governance.admin", "user_create"): "ops make a new, inactive account that grants nothing",
    # A person's own settings, not their access: their language and their password.
    ("governance.views.tokens", "user_language_set"): "a person chooses their own language",
    ("governance.forms.accounts", "user_password_set"): "a person sets their own password",
    # The identity provider is the source of truth for what it was configured to decide:
    # at sign-in it sets the memberships of the projects whose members the directory decides,
    # and withdraws a site role it no longer grants (history rows name the issuer and claim).
    (
        "governance.services.identity.sign_in",
        "membership_directory_apply",
    ): "the directory's members",
    (
        "governance.services.identity.sign_in",
        "user_site_role_withdraw",
    ): "the directory withdraws a role",
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, ast.Module]:
    root = Path(settings.BASE_DIR)
    found = {}
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue  # listed in docs/architecture.md; a migration runs once, as written
            found[_module_name(path, root)] = ast.parse(path.read_text(), str(path))
    return found


def governed_models() -> set[type]:
    """Every model a rule change governs, and the rows its keyed fields store."""
    models = set()
    for kind in REGISTRY.values():
        models.add(kind.model)
        for keyed in kind.keyed.values():
            if keyed.stored_in is not None:
                models.add(keyed.stored_in)
    return models


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Call | ast.Attribute):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def manager_writes(tree: ast.Module, names: set[str]) -> list[str]:
    """``Model.objects...write(...)`` calls on a governed model (by its class name)."""
    writes = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in WRITES:
            continue
        chain = ast.unparse(node.func)
        root = _root_name(node.func)
        if root in names and (".objects" in chain or "._default_manager" in chain):
            writes.append(f"{root}.objects.{node.func.attr}")
    return writes


def service_calls(tree: ast.Module, services: set[str]) -> list[str]:
    """Calls of the governed services (by name, bare or as ``services.<name>``)."""
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else None
        )
        if name in services:
            calls.append(name)
    return calls


def governed_services(modules: dict[str, ast.Module]) -> set[str]:
    """The public functions of the kinds' service modules that write a governed row: their
    body (or a private helper of the module they call) saves or deletes through the
    history-keeping ``governed_save`` / ``governed_delete``. Readers are not listed."""
    names = set()
    for module in SERVICE_MODULES:
        functions = [node for node in modules[module].body if isinstance(node, ast.FunctionDef)]
        writers = {
            node.name
            for node in functions
            if node.name.startswith("_")
            and any(write in ast.unparse(node) for write in ("governed_save", "governed_delete"))
        }
        for node in functions:
            if node.name.startswith("_"):
                continue
            called = {
                call.func.id
                for call in ast.walk(node)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            }
            if called & ({"governed_save", "governed_delete"} | writers):
                names.add(node.name)
    return names


def _allowed_module(module: str) -> bool:
    return (
        module in SERVICE_MODULES
        or module.startswith(CHANGE_MACHINERY)
        or module.startswith(DEMO_SEEDING)
    )


def write_paths() -> set[tuple[str, str]]:
    """(module, write) for every write of a governed row outside the allowed modules."""
    modules = _modules()
    names = {model.__name__ for model in governed_models()}
    services = governed_services(modules)
    found = set()
    for module, tree in modules.items():
        if _allowed_module(module):
            continue
        for write in manager_writes(tree, names) + service_calls(tree, services):
            found.add((module, write))
    return found


def test_the_governed_models_come_from_the_registry():
    names = {model.__name__ for model in governed_models()}
    assert {
        "Project",
        "Membership",
        "GpuFlavor",
        "Pool",
        "PoolCapacity",
        "PriorityTier",
        "PreemptionClass",
        "Quota",
        "User",
        "Cluster",
        "ApprovalPolicy",
    } <= names


def test_no_governed_row_is_written_outside_the_change_services():
    found = write_paths()
    new = sorted(f"{module}: {write}" for module, write in found - set(ALLOWED))
    assert not new, (
        "A governed row is written outside the change services (propose a rule change "
        "instead, or list the path with its reason in ALLOWED and docs/architecture.md):\n"
        + "\n".join(new)
    )
    gone = sorted(f"{module}: {write}" for module, write in set(ALLOWED) - found)
    assert not gone, "No longer written there; remove from ALLOWED:\n" + "\n".join(gone)


def test_the_checker_finds_a_write_in_a_made_up_module():
    tree = ast.parse(
        "def view(request):\n"
        "    Quota.objects.filter(pk=1).update(guarantee=99)\n"
        "    services.tier_create(user=request.user, reason='x', slug='vip')\n"
        "    PriorityTier.objects.create(slug='x')\n"
    )
    assert manager_writes(tree, {"Quota", "PriorityTier"}) == [
        "Quota.objects.update",
        "PriorityTier.objects.create",
    ]
    assert service_calls(tree, {"tier_create"}) == ["tier_create"]


def test_the_admin_writes_no_governed_rule(admin_user):
    """Every governed model the admin shows is read-only there (accounts: only a new,
    inactive one, see ALLOWED)."""
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    for model in governed_models():
        model_admin = admin.site._registry.get(model)
        if model_admin is None:
            continue
        assert not model_admin.has_delete_permission(request), model
        if model.__name__ == "User":
            continue
        assert not model_admin.has_add_permission(request), model
        assert not model_admin.has_change_permission(request), model
        assert not model_admin.get_actions(request), model


def test_every_kind_is_written_by_a_service_module_listed_here():
    """A kind added later names its services here (so the scan knows where it is written)."""
    for kind in REGISTRY.values():
        module = inspect.getmodule(kind.update)
        assert module is not None
        assert module.__name__ in SERVICE_MODULES or module.__name__.startswith(CHANGE_MACHINERY), (
            kind.object_type,
            module.__name__,
        )
