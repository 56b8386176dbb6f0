"""The rule kinds: every model governed through rule changes, each declared once.

A ``RuleKind`` says everything the change machinery needs about one kind of rule: its
model, how pages and the API name it, which fields a change may edit (and what kind of
edit each is), its keyed fields, what a creation records, the services that update,
create and delete it, and who besides ops proposes and approves a change of it. Every
kind is registered the same way, from its app's ``AppConfig.ready()``:
``governance.services.changes.kinds`` declares the built-in ones (projects, flavors,
pools, tiers, preemption classes, quotas, people), ``queues`` its clusters. Proposing,
the dry run, applying, the plan, the timeline and rollbacks then read the registry; none
of them names a model.

Creating and deleting an object are edits of its ``exists`` pseudo-field: its value is
``None`` while the object does not exist and a snapshot of its ``snapshot_fields`` (as
JSON) while it does. So a creation is ``None → snapshot``, a deletion ``snapshot → None``,
and a rollback restores the old value like any other field: it deletes what a change
created and creates again what a change deleted. A creation is recorded with object id 0
until it is applied; applying it writes the new object's id (and its snapshot as made)
into the edit.

The registry lives with the selectors (reads name kinds, types and keys); the services it
points to are given by the declarations, so a selector never imports a service.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import models
from django.db.models import Q

from governance.models import EditKind

# The pseudo-field that creates or deletes an object (see above).
EXISTS = "exists"


@dataclass(frozen=True)
class KeyedField:
    """A field whose value is kept per entry of another model (``key_model``): a pool's
    GPUs per flavor, a project's role per user. An edit names the entry by its id (``key``).

    ``current(obj, key)`` is the stored value as JSON; ``clean(value)`` the value as a change
    records it, or a ``ValidationError`` naming the form field; ``apply(obj=, key=, value=,
    user=, reason=)`` writes it through the kind's service. ``title`` and ``label`` are the
    (untranslated) messages that name the entry in a change's title and in its plan, with
    the key's name as ``%(<key_name>)s``; ``display`` shows a value (``None`` too when
    ``display_empty``: a member removed is "not a member", not an empty value).
    ``stored_in`` is the model whose rows hold the values.
    """

    key_model: type[models.Model]
    key_name: str
    kind: EditKind
    current: Callable[[Any, int | None], Any]
    clean: Callable[[Any], Any]
    apply: Callable[..., None]
    title: str
    label: str
    display: Callable[[Any], str] = str
    display_empty: bool = False
    # The model whose rows hold the values (a membership, a pool's capacity): governed like
    # the kind's own rows (tests/governance/test_governed_write_paths.py reads it).
    stored_in: type[models.Model] | None = None


@dataclass(frozen=True)
class HistorySection:
    """A section of an object's history page and API besides its own rows: ``name`` is the
    API's ``section``, ``title`` (translated) heads it on the page, ``entries(obj)`` reads its
    rows, of ``model`` (the rows a keyed field is stored in)."""

    name: str
    title: Any
    model: type[models.Model]
    entries: Callable[[Any], list[Any]]


@dataclass(frozen=True)
class RuleKind:
    """A model governed through rule changes, and the services that write it.

    ``update(obj=, user=, reason=, data=)`` takes the changed fields as the model takes
    them (instances for relations); ``create(user=, reason=, data=)`` and ``delete(obj=,
    user=, reason=)`` are optional (with either, ``exists`` becomes editable, as an edit of
    ``exists_kind``). ``snapshot_fields`` are what a creation or a deletion records (enough
    to create the object again); ``required_fields`` those a creation must give.
    ``key_field`` names the object in URLs and the API (a unique field, or ``pk``);
    ``page_name`` is the prefix of its pages' URL names (``<page_name>_detail``).
    ``check(obj)`` (optional) checks an unsaved object before a creation or an update is
    recorded, so that field messages come before the dry run. ``owner_field`` names the
    person who, besides ops, proposes a change of the object and approves it (a tier's
    business owner); ``owner_message`` says so when someone else tries.
    """

    model: type[models.Model]
    object_type: str
    fields: dict[str, EditKind]
    update: Callable[..., Any]
    create: Callable[..., models.Model] | None = None
    delete: Callable[..., None] | None = None
    snapshot_fields: tuple[str, ...] = ()
    required_fields: tuple[str, ...] = ()
    key_field: str = "slug"
    page_name: str = ""
    exists_kind: EditKind = EditKind.CAPACITY
    keyed: dict[str, KeyedField] = field(default_factory=dict)
    check: Callable[[Any], None] | None = None
    owner_field: str | None = None
    owner_message: str = ""
    # Related objects a row's name needs (a quota names its project, pool and flavor).
    name_related: tuple[str, ...] = ()
    # What a change of objects of this kind affects beyond themselves (``changes.plan``),
    # each given the ids of the objects changed: the projects (a ``Q`` on Project), the
    # quotas (a ``Q`` on Quota: their projects and pools are affected too), the pools it
    # touches directly (the plan's pools, and the "one pool at a time" warning), and further
    # pools the plan names (a flavor's capacity). ``None``: nothing beyond the objects.
    affects_projects: Callable[[set[int]], Q] | None = None
    affects_quotas: Callable[[set[int]], Q] | None = None
    touches_pools: Callable[[set[int]], Iterable[int]] | None = None
    plan_pools: Callable[[set[int]], Iterable[int]] | None = None
    # The fields (keyed ones included) the what-if replay models: a change of any other field
    # is listed as not modelled. ``queues.replay.adapt`` reads each kind named here by its
    # ``object_type`` (its ``READERS``; a test checks both name the same kinds).
    replay_fields: frozenset[str] = frozenset()
    # An object's history page and API (``selectors.object_history_sections``): the title of
    # its own rows on the page ("": the model's verbose name), then the sections its kind
    # declares besides them, one per model a keyed field is stored in (``members`` of a
    # project, ``capacity`` of a pool; a test checks none is missing).
    history_title: Any = ""
    history_sections: tuple["HistorySection", ...] = ()

    @property
    def pages(self) -> str:
        """The prefix of the kind's pages' URL names (its object type unless given)."""
        return self.page_name or self.object_type

    @property
    def creatable(self) -> bool:
        return self.create is not None or self.delete is not None

    def edit_kind(self, name: str) -> EditKind | None:
        """What kind of edit a change of ``name`` is, or ``None`` if a change may not edit it."""
        if name in self.fields:
            return self.fields[name]
        if name in self.keyed:
            return self.keyed[name].kind
        if name == EXISTS and self.creatable:
            return self.exists_kind
        return None


REGISTRY: dict[type[models.Model], RuleKind] = {}


def rule_kind_register(kind: RuleKind) -> None:
    """Make ``kind.model`` editable through rule changes (idempotent)."""
    REGISTRY[kind.model] = kind


def rule_kind_for(model: type[models.Model]) -> RuleKind | None:
    return REGISTRY.get(model)


def rule_kind_named(object_type: str) -> RuleKind | None:
    """The kind that pages and the API call ``object_type`` (``project``, ``cluster``...)."""
    return next((kind for kind in REGISTRY.values() if kind.object_type == object_type), None)


def object_types() -> list[str]:
    """How pages and the API name the kinds of object a change may edit, in register order."""
    return [kind.object_type for kind in REGISTRY.values()]
