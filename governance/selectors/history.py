"""Reading the history of governed rows: who changed which field from what to what, when, why."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple, TypeVar

from django.db import connection, models
from django.db.models import QuerySet
from django.utils import formats
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from governance.models import (
    Membership,
    Pool,
    PoolCapacity,
    Project,
    User,
)
from governance.models.texts import message_text, stored_text

from .changes.kinds import HistorySection, rule_kind_for

M = TypeVar("M", bound=models.Model)

# --- history ------------------------------------------------------------------------------

EMPTY = "—"


class HistoryAction(models.TextChoices):
    CREATED = "created", gettext_lazy("Created")
    CHANGED = "changed", gettext_lazy("Changed")
    DELETED = "deleted", gettext_lazy("Deleted")


HISTORY_ACTIONS = {
    "+": HistoryAction.CREATED,
    "~": HistoryAction.CHANGED,
    "-": HistoryAction.DELETED,
}


class FieldChange(NamedTuple):
    field: str
    old: str
    new: str


# The reasons the change services store when nobody typed one (``governed_save`` of a
# change's status): words for what happened, not reasons.
STATUS_WORDS = frozenset({"Proposed", "Approved", "Applied", "Withdrawn", "Rejected"})


@dataclass(frozen=True)
class HistoryEntry:
    """One history row: who did what to which fields, when and why."""

    when: datetime
    user: User | None
    reason: str
    action: HistoryAction
    changes: list[FieldChange]
    subject: str = ""  # for rows of a related kind: the member, the flavor
    change_id: int | None = None  # the rule change that wrote the row, if any
    # The reason is a status word Arbiter wrote ("Approved"), not someone's reason: the
    # pages show the status change itself instead of "Reason: Approved".
    status_word: bool = False

    @property
    def is_creation(self) -> bool:
        return self.action == HistoryAction.CREATED


def history_entries(*, obj: models.Model) -> list[HistoryEntry]:
    """The history of ``obj``, newest first, with every changed field shown old → new.

    The number of queries does not grow with the number of rows: one for the rows, one per
    tracked many-to-many field, one per related model whose names are shown.
    """
    return _history_entries(obj.history.all(), model=type(obj))  # type: ignore[attr-defined]


class ObjectHistorySection(NamedTuple):
    """One section of an object's history as its page and API show it."""

    name: str  # the API's ``section``
    title: Any  # the page's heading (translated)
    entries: list["HistoryEntry"]


def object_history_sections(*, obj: models.Model) -> list[ObjectHistorySection]:
    """The history of ``obj`` as its history page and API show it: its own rows (named after
    its model, titled as its kind says), then each section its kind declares
    (``RuleKind.history_sections``), each newest first. The one place that knows which
    sections an object's history has: no page or API lists them."""
    model = type(obj)
    kind = rule_kind_for(model)
    title = (kind.history_title if kind is not None else "") or capfirst(
        model._meta.verbose_name or ""
    )
    own = ObjectHistorySection(model._meta.model_name or "", title, history_entries(obj=obj))
    declared: tuple[HistorySection, ...] = kind.history_sections if kind is not None else ()
    return [own] + [
        ObjectHistorySection(section.name, section.title, section.entries(obj))
        for section in declared
    ]


def membership_history_entries(*, project: Project) -> list[HistoryEntry]:
    """Members added to, changed in or removed from ``project``; the subject is the member."""
    return _history_entries(
        Membership.history.filter(project_id=project.pk),  # type: ignore[attr-defined]
        model=Membership,
        subject_field="user",
    )


def capacity_history_entries(*, pool: Pool) -> list[HistoryEntry]:
    """Capacity set in ``pool``, per flavor; the subject is the flavor."""
    return _history_entries(
        PoolCapacity.history.filter(pool_id=pool.pk),  # type: ignore[attr-defined]
        model=PoolCapacity,
        subject_field="flavor",
    )


def _history_entries(
    records_qs: QuerySet[Any], *, model: type[models.Model], subject_field: str | None = None
) -> list[HistoryEntry]:
    records = list(
        records_qs.select_related("history_user").order_by("-history_date", "-history_id")
    )
    if not records:
        return []
    history_model = type(records[0])
    fields: dict[str, Any] = {
        field.name: field for field in model._meta.get_fields() if isinstance(field, models.Field)
    }
    m2m_fields = list(getattr(history_model, "_history_m2m_fields", []))
    m2m_names = [field.name for field in m2m_fields]
    m2m_values = _history_m2m_values(
        history_model, m2m_fields, object_ids={record.id for record in records}
    )
    tracked = [
        field.name
        for field in records[0].tracked_fields
        if field.editable and not field.primary_key
    ]
    raw = _raw_changes(
        records, fields=fields, tracked=tracked, m2m_names=m2m_names, m2m_values=m2m_values
    )
    names = _related_names(raw, fields=fields, subject_field=subject_field)
    return [
        HistoryEntry(
            when=record.history_date,
            user=record.history_user,
            reason=stored_text(record.history_change_reason or ""),
            status_word=(record.history_change_reason or "") in STATUS_WORDS,
            action=HISTORY_ACTIONS.get(record.history_type, HistoryAction.CHANGED),
            changes=[
                FieldChange(
                    field=str(fields[name].verbose_name),
                    old=_display(fields[name], old, names),
                    new=_display(fields[name], new, names),
                )
                for name, old, new in changes
            ],
            subject=(
                _display(
                    fields[subject_field],
                    getattr(record, fields[subject_field].attname),
                    names,
                )
                if subject_field
                else ""
            ),
            change_id=getattr(record, "rule_change_id", None),
        )
        for record, changes in reversed(raw)
    ]


Changes = list[tuple[str, Any, Any]]


def _raw_changes(
    records: list[Any],
    *,
    fields: dict[str, Any],
    tracked: list[str],
    m2m_names: list[str],
    m2m_values: dict[str, dict[int, frozenset[Any]]],
) -> list[tuple[Any, Changes]]:
    """The raw changes of every row (ids for foreign keys), oldest row first, each row's
    changes in the model's field order."""
    order = {name: index for index, name in enumerate(fields)}
    raw: list[tuple[Any, Changes]] = []
    previous: dict[Any, Any] = {}  # object id → its row before this one
    for record in reversed(records):
        before = previous.get(record.id)
        changes: Changes
        if record.history_type == "-":
            changes = []
        elif before is None or record.history_type == "+":
            changes = [(name, None, getattr(record, fields[name].attname)) for name in tracked]
            changes += [
                (name, frozenset(), m2m_values[name].get(record.history_id, frozenset()))
                for name in m2m_names
            ]
            changes = [change for change in changes if not _is_empty(change[2])]
        else:
            delta = record.diff_against(before, excluded_fields=m2m_names)
            # Only the fields people edit: not a message stored beside its text.
            changes = [
                (change.field, change.old, change.new)
                for change in delta.changes
                if change.field in tracked
            ]
            for name in m2m_names:
                old = m2m_values[name].get(before.history_id, frozenset())
                new = m2m_values[name].get(record.history_id, frozenset())
                if old != new:
                    changes.append((name, old, new))
        changes.sort(key=lambda change: order.get(change[0], 0))
        raw.append((record, changes))
        previous[record.id] = record
    return raw


def _related_names(
    raw: list[tuple[Any, Changes]], *, fields: dict[str, Any], subject_field: str | None
) -> dict[Any, dict[Any, str]]:
    """Per related model, the names of the rows the changes (and subjects) name by id: one
    query per related model."""
    related_ids: dict[Any, set[Any]] = {}
    for record, changes in raw:
        rows = list(changes)
        if subject_field:
            rows.append((subject_field, None, getattr(record, fields[subject_field].attname)))
        for name, old, new in rows:
            if fields[name].is_relation:
                ids = related_ids.setdefault(fields[name].related_model, set())
                for value in (old, new):
                    if isinstance(value, frozenset):
                        ids.update(value)
                    elif value is not None:
                        ids.add(value)
    return {
        related: {pk: str(item) for pk, item in related._default_manager.in_bulk(ids).items()}
        for related, ids in related_ids.items()
    }


def _history_m2m_values(
    history_model: type[models.Model], m2m_fields: list[Any], *, object_ids: set[Any]
) -> dict[str, dict[int, frozenset[Any]]]:
    """For each tracked many-to-many field: history row id → the related ids it recorded."""
    values: dict[str, dict[int, frozenset[Any]]] = {}
    for field in m2m_fields:
        through = getattr(history_model, field.name).model
        target = through._meta.get_field(field.m2m_reverse_field_name()).attname
        collected: dict[int, set[Any]] = {}
        for history_id, related_id in through.objects.filter(
            history__id__in=object_ids
        ).values_list("history_id", target):
            collected.setdefault(history_id, set()).add(related_id)
        values[field.name] = {key: frozenset(ids) for key, ids in collected.items()}
    return values


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == frozenset() or value == [] or value == {}


def _is_message(item: Any) -> bool:
    """A stored message (``governance.models.texts.message``), not other JSON with a "key"
    (a node taint has one too)."""
    return isinstance(item, dict) and set(item) <= {"key", "params", "lower"} and "params" in item


def _display(field: Any, value: Any, names: dict[type[models.Model], dict[Any, str]]) -> str:
    if _is_empty(value):
        return EMPTY
    if field.is_relation:
        known = names.get(field.related_model, {})
        ids = sorted(value) if isinstance(value, frozenset) else [value]
        shown = [known.get(pk) or _("deleted (#%(id)s)") % {"id": pk} for pk in ids]
        return ", ".join(sorted(shown))
    if field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "; ".join(value)  # e.g. a change's warnings: sentences, not JSON
    if value and isinstance(value, list) and all(_is_message(item) for item in value):
        return "; ".join(message_text(item) for item in value)  # warnings stored as messages
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, date | datetime):
        return formats.localize(value)
    if isinstance(value, str):
        return stored_text(value)  # e.g. a generated change title
    return str(value)


def newest_row_columns(
    governed: Iterable[type[models.Model]] = (), *, tables: Iterable[tuple[str, str]] = ()
) -> list[str]:
    """SQL columns, one index lookup each, that change whenever a rule does: the newest
    history row of each governed model (every write of a governed row adds one), then the
    newest value of each ``(table, column)``. A fingerprint of what a cache keeps is a
    ``SELECT`` of these (the home page's parts, the compiled placement, a list's count)."""
    quote = connection.ops.quote_name
    pairs = [
        (model.history.model._meta.db_table, "history_id")  # type: ignore[attr-defined]
        for model in governed
    ]
    pairs += list(tables)
    return [f"(SELECT MAX({quote(column)}) FROM {quote(table)})" for table, column in pairs]
