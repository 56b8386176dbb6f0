"""The job_submit plugin's table: written from the applied state, and the plugin's status."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from queues.models import (
    Cluster,
)
from queues.schedulers.backends import (
    Ability,
    SchedulerBackend,
    SchedulerError,
)

from ..submit_table import submit_table_expiry_check
from .state import _state


def submit_refresh(
    *,
    cluster: Cluster,
    backend: SchedulerBackend,
    write: bool,
    recheck: bool = True,
    plugins: str | None = None,
) -> dict[str, Any]:
    """Write the job_submit plugin's table from the applied state (when ``write``) and record
    whether the plugin is installed and current (see ``slurm.submit``). Not Slurm: nothing.
    A table that cannot be written is reported, never raised: the plugin
    then fails safe once the old table expires. ``plugins``: JobSubmitPlugins as just read."""
    state = _state(cluster)
    if not backend.offers(Ability.SUBMIT_TABLE):
        return {}
    status: dict[str, Any] = {}
    fields = ["submit_plugin", "submit_plugin_checked_at"]
    if write and state.applied_state:
        try:
            written = backend.submit_table(applied=state.applied_state)
            # A pulled table: its bytes are kept, as rendered, for the pull agent (the API).
            if "text" in written:
                state.submit_table = written.pop("text")
                fields.append("submit_table")
            status["written"] = written
        except OSError as error:
            status["error"] = str(
                _("The job_submit plugin's table could not be written: %(error)s")
                % {"error": error}
            )
    # ``recheck=False``: JobSubmitPlugins as this sync read it a moment ago (one call less).
    if plugins is None and not recheck:
        plugins = (state.submit_plugin or {}).get("plugins")
    try:
        status.update(
            backend.submit_status(
                applied=state.applied_state, plugins=plugins, agent=state.agent_fetch
            )
        )
    except SchedulerError as error:
        status["check_error"] = str(error)
    state.submit_plugin = status
    state.submit_plugin_checked_at = timezone.now()
    state.save(update_fields=fields)
    submit_table_expiry_check(cluster=cluster, status=status)
    return status
