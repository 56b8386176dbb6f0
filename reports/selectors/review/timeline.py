"""The timeline: rule changes applied in the window and grants starting in it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.utils.translation import gettext_noop

from governance.models import ChangeStatus, Grant, RuleChange, RuleEdit
from governance.models.texts import label, message, message_english

from ._common import Scope, iso

# A grant on the timeline: its kind and its project.
GRANT_TITLE = gettext_noop("%(kind)s · %(project)s")


def timeline(scope: Scope) -> list[dict[str, Any]]:
    """Rule changes applied in the window and grants starting in it, by time (a project's
    view: the changes and the project's grants, ``item['object']`` being its slug). Each title
    is stored in English and as a message (``title_message``), shown in the reader's language
    (``stored_reviews._format.timeline_title``)."""
    changes = list(
        RuleChange.objects.filter(
            status__in=[ChangeStatus.APPLIED, ChangeStatus.ROLLED_BACK],
            applied_at__gte=scope.start,
            applied_at__lt=scope.end,
        ).only("pk", "title", "title_message", "applied_at")
    )
    edited: dict[int, set[str]] = defaultdict(set)
    for change_id, model in RuleEdit.objects.filter(
        change__in=[change.pk for change in changes]
    ).values_list("change_id", "content_type__model"):
        edited[change_id].add(model)
    items = [
        {
            "at": iso(change.applied_at),  # type: ignore[arg-type]
            "kind": "change",
            "title": message_english(change.title_message)
            if change.title_message
            else change.title,
            "title_message": change.title_message or None,
            "object": ", ".join(sorted(edited[change.pk])),
            "id": change.pk,
        }
        for change in changes
    ]
    grants = Grant.objects.filter(starts_at__gte=scope.start, starts_at__lt=scope.end)
    if scope.project_id is not None:
        grants = grants.filter(project_id=scope.project_id)
    for grant in grants.select_related("project"):
        title = message(
            GRANT_TITLE, kind=label(grant.get_kind_display()), project=grant.project.name
        )
        items.append(
            {
                "at": iso(grant.starts_at),
                "kind": "grant",
                "title": message_english(title),
                "title_message": title,
                "object": grant.project.slug,
                "id": grant.pk,
            }
        )
    items.sort(key=lambda item: (item["at"], item["kind"], item["id"]))
    return items
