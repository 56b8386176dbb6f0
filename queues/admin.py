"""Admin for ops: clusters (read-only here; edit them on the Clusters page) and sync runs."""

from django.contrib import admin

from governance.toolkit.admin import ReadOnlyAdmin
from queues.models import Cluster, SyncRun


@admin.register(Cluster)
class ClusterAdmin(ReadOnlyAdmin):
    list_display = ["name", "backend", "slurm_cluster", "enabled"]
    list_filter = ["backend", "enabled"]


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyAdmin):
    list_display = ["pk", "cluster", "trigger", "status", "created_at", "finished_at"]
    list_filter = ["cluster", "trigger", "status"]
