"""Sending a Celery task by its name, so that no service imports a task module.

A task module imports its app's services (a task takes ids and calls a service); a service
that queues a task names it instead: ``"queues.tasks.sync_cluster"``, the task's dotted
path, which is also its Celery name. The module is looked up when the task is sent, so no
import runs from services back to tasks and the two never form a circle
(``tests/governance/test_architecture.py`` checks both: no circle, and every name a service
sends is a task of its own app).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string


def task_send(*, task: str, args: tuple[Any, ...] = ()) -> None:
    """Send ``task`` (its dotted path) with ``args`` to a worker now."""
    import_string(task).delay(*args)


def task_enqueue(*, task: str, args: tuple[Any, ...] = ()) -> None:
    """Send ``task`` with ``args`` once the current transaction commits (tasks take ids: the
    rows they read must be there)."""
    transaction.on_commit(partial(task_send, task=task, args=args))
