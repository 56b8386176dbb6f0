"""Cluster pages (ops only): configuration, sync state, drift, sync runs and their plans.

Creating, editing and deleting a cluster propose a rule change (applied once another ops
user approves it). Reading a page runs no scheduler command: the live state is what the
last check stored, and "Check now" asks a worker to refresh it.
"""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from governance.forms import RuleChangeMetaForm
from governance.selectors import signed_in_user
from governance.toolkit.client import client_address
from governance.toolkit.web import posted, propose
from queues import forms, selectors, services
from queues.models import SubmitTableDelivery, SyncTrigger
from queues.selectors import my_jobs


def _form_page(
    request: HttpRequest, form: Any, *, title: str, cancel_url: str, change_form: Any
) -> HttpResponse:
    return render(
        request,
        "governance/form.html",
        {
            "form": form,
            "title": title,
            "cancel_url": cancel_url,
            "change_form": change_form,
            "can_edit": True,
        },
    )


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    selectors.require_cluster_access(request.user)
    clusters = selectors.cluster_list_with_due()
    return render(request, "queues/cluster_list.html", {"clusters": clusters, "can_edit": True})


@login_required
def cluster_create(request: HttpRequest) -> HttpResponse:
    selectors.require_cluster_access(request.user)
    form = forms.ClusterCreateForm(posted(request))
    change_form = RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        response = propose(
            request,
            services.cluster_propose_create,
            form=form,
            change_form=change_form,
            reason=form.change_reason,
            data=form.service_data(),
        )
        if response is not None:
            return response
    return _form_page(
        request,
        form,
        title=_("New cluster"),
        cancel_url=reverse("cluster_list"),
        change_form=change_form,
    )


@login_required
def cluster_edit(request: HttpRequest, name: str) -> HttpResponse:
    cluster = selectors.cluster_get(user=request.user, name=name)
    form = forms.ClusterForm(posted(request), instance=cluster)
    change_form = RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        if not form.changed_rule_fields():
            messages.info(
                request, _("Nothing changed: “%(object)s” is as it was.") % {"object": cluster}
            )
            return redirect(cluster)
        data = {name: form.service_data()[name] for name in form.changed_rule_fields()}
        response = propose(
            request,
            services.cluster_propose_update,
            form=form,
            change_form=change_form,
            reason=form.change_reason,
            cluster=cluster,
            data=data,
        )
        if response is not None:
            return response
    return _form_page(
        request,
        form,
        title=_("Edit cluster “%(object)s”") % {"object": cluster},
        cancel_url=cluster.get_absolute_url(),
        change_form=change_form,
    )


@login_required
def cluster_delete(request: HttpRequest, name: str) -> HttpResponse:
    cluster = selectors.cluster_get(user=request.user, name=name)
    form = forms.ClusterDeleteForm(posted(request))
    change_form = RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        response = propose(
            request,
            services.cluster_propose_delete,
            form=form,
            change_form=change_form,
            reason=form.change_reason,
            cluster=cluster,
        )
        if response is not None:
            return response
    return _form_page(
        request,
        form,
        title=_("Delete cluster “%(object)s”") % {"object": cluster},
        cancel_url=cluster.get_absolute_url(),
        change_form=change_form,
    )


def submit_instructions() -> str:
    """How members submit to Arbiter's QOS (plain text: the template escapes it)."""
    return _(
        "Submit within a project's guarantee with -q <pool>.<project>.guarantee (it "
        "reclaims lent GPUs), above it with -q <pool>.borrow (preemptible), and order work "
        "by tier with -q <tier>; the account is <pool>.<project>."
    )


@login_required
def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = selectors.cluster_get(user=request.user, name=name)
    state = selectors.sync_state(cluster)
    return render(
        request,
        "queues/cluster_detail.html",
        {
            "object": cluster,
            "state": state,
            "sync_due": selectors.sync_due(cluster, state=state),
            "due_since": services.due_since(cluster=cluster),
            "newest_revision": selectors.newest_revision_id(),
            "live": selectors.cluster_live_status(cluster=cluster, state=state),
            "runs": selectors.sync_run_list(cluster=cluster)[:15],
            "applied": selectors.applied_summary(cluster),
            "slurm_conf": selectors.slurm_conf_suggestion(),
            "submit_instructions": submit_instructions(),
            "pools": cluster.pools.all(),
            # A pulled table: the tokens bound to the cluster's agent (one query, only then).
            "agent_tokens": (
                selectors.agent_tokens_of(cluster)
                if cluster.submit_table_delivery == SubmitTableDelivery.PULL
                else []
            ),
            "can_edit": True,
        },
    )


@login_required
@require_POST
def cluster_check(request: HttpRequest, name: str) -> HttpResponse:
    """ "Check now": a worker checks the connection; the page shows the result when done."""
    cluster = selectors.cluster_get(user=request.user, name=name)
    if services.cluster_check_enqueue(cluster=cluster):
        messages.info(request, _("Check queued; reload the page in a moment to see it."))
    else:
        messages.info(request, _("A check is already queued."))
    return redirect(cluster)


@login_required
@require_POST
def cluster_drift_remove(request: HttpRequest, name: str) -> HttpResponse:
    """Remove one hand-made object that drift shows, because ops chose to (with a reason)."""
    cluster = selectors.cluster_get(user=request.user, name=name)
    form = forms.DriftRemoveForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(m) for ms in form.errors.values() for m in ms))
        return redirect(cluster)
    data = form.cleaned_data
    try:
        run = services.drift_remove(
            cluster=cluster,
            kind=data["kind"],
            name=data["name"],
            user=signed_in_user(request),
            reason=data["reason"],
        )
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect(cluster)
    except services.SchedulerError as error:
        messages.error(request, str(error))
        return redirect(cluster)
    messages.success(request, _("Removed %(name)s.") % {"name": data["name"]})
    return redirect("sync_run_detail", name=cluster.name, pk=run.pk)


@login_required
@require_POST
def cluster_sync(request: HttpRequest, name: str) -> HttpResponse:
    """Sync now (queued for a worker) or dry run (here and now: reads only)."""
    cluster = selectors.cluster_get(user=request.user, name=name)
    form = forms.SyncForm(request.POST)
    dry_run = form.is_valid() and form.cleaned_data["dry_run"]
    if dry_run:
        run = services.sync_now(cluster=cluster, user=signed_in_user(request), dry_run=True)
    else:
        run = services.sync_enqueue(
            cluster=cluster, trigger=SyncTrigger.MANUAL, user=signed_in_user(request)
        )
        messages.info(request, _("Sync queued; this page follows its progress."))
    return redirect("sync_run_detail", name=cluster.name, pk=run.pk)


@login_required
def sync_run_detail(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    cluster = selectors.cluster_get(user=request.user, name=name)
    run = selectors.sync_run_get(user=request.user, cluster=cluster, pk=pk)
    return render(
        request,
        "queues/sync_run_detail.html",
        {
            "object": cluster,
            "run": run,
            "plan": selectors.plan_with_labels(run.plan or []),
            "can_edit": True,
        },
    )


@login_required
def alert_list(request: HttpRequest) -> HttpResponse:
    """The signed-in user's alerts (every alert for ops): open ones first, read on display."""
    state = request.GET.get("state", "open")
    if state not in ("open", "closed", "all"):
        state = "open"
    alerts = list(selectors.alert_list(user=request.user, state=state)[:200])
    rows = [(alert, *selectors.alert_text(alert)) for alert in alerts]
    return render(request, "queues/alert_list.html", {"rows": rows, "state": state})


@login_required
@require_POST
def alerts_read(request: HttpRequest) -> HttpResponse:
    services.alerts_mark_read(user=signed_in_user(request))
    return redirect("alert_list")


# Workload evidence --------------------------------------------------------------------------


@login_required
def job_wait(request: HttpRequest) -> HttpResponse:
    """Why is my job waiting: the person's own waiting jobs with their answers, and a search
    by job id (and cluster, when ids repeat)."""
    form = forms.JobSearchForm(request.GET or None)
    explanation = None
    not_found = False
    unsynced: list[my_jobs.UnsyncedGrant] = []
    if form.is_valid():
        try:
            job = selectors.job_get(
                user=request.user,
                job_id=form.cleaned_data["job"],
                source=form.cleaned_data["source"],
            )
        except Http404:
            not_found = True
        else:
            explanation = selectors.job_wait_explanation(job, live=services.job_live_wait(job))
            if job.is_pending:
                unsynced = my_jobs.grants_not_on_scheduler(job, now=timezone.now())
    mine, mine_total = my_jobs.my_waiting_jobs(user=request.user)
    return render(
        request,
        "queues/job_wait.html",
        {
            "form": form,
            "explanation": explanation,
            "not_found": not_found,
            "unsynced": unsynced,
            "mine": mine,
            "mine_total": mine_total,
        },
    )


@login_required
def project_workload(request: HttpRequest, slug: str) -> HttpResponse:
    """A project's jobs: pending ones grouped by why they wait, running GPUs against quota
    (for those who may see its jobs, as on the job page; a 404 for anyone else)."""
    project = selectors.workload_project_get(user=request.user, slug=slug)
    return render(
        request,
        "queues/project_workload.html",
        {
            "project": project,
            "workload": selectors.project_workload(project=project),
            "form": forms.JobSearchForm(),
        },
    )


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics: for a bearer token or an allowed network (see .env.example)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from queues.selectors.metrics import metrics_allowed, metrics_registry

    if not metrics_allowed(
        authorization=request.headers.get("Authorization", ""),
        address=client_address(request) or "",
    ):
        return HttpResponse(_("Not allowed to read the metrics."), status=403)
    return HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_LATEST)
