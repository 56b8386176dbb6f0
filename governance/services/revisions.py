"""The after-change hook: every change of the effective rules records a revision.

Governance imports no other app. What must happen after the rules change (the scheduler
sync, in ``queues``) is wired in settings: ``ARBITER_ON_RULES_CHANGED`` lists dotted paths
of callables that get the revision id after the transaction commits. With none configured
the revision row alone records that a sync is due.
"""

from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from governance.models import RevisionTrigger, RulesRevision, User


def rules_revision_create(
    *, trigger: RevisionTrigger | str, note: str = "", user: User | None = None
) -> RulesRevision:
    revision = RulesRevision(trigger=trigger, note=note[:300], created_by=user)
    revision.full_clean()
    revision.save()
    for path in settings.ARBITER_ON_RULES_CHANGED:
        transaction.on_commit(partial(import_string(path), revision_id=revision.pk))
    return revision
