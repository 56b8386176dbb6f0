"""Rule change pages: the timeline, a change's plan and its decisions, rollback, reviews."""

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from governance import forms, selectors, services
from governance.models import ChangeAction, ChangeStatus, ReviewOutcome, RuleChange
from governance.toolkit.paging import paginate

from ._common import page, posted

CHANGES_PER_PAGE = 25


@login_required
def change_list(request: HttpRequest) -> HttpResponse:
    """Every rule change, newest first, each with its diff; filtered by the query string."""
    if not selectors.user_can_read_rules(request.user):
        raise PermissionDenied
    filter_form = forms.ChangeFilterForm(request.GET)
    context: dict[str, Any] = {"filter_form": filter_form, "entries": None}
    if not filter_form.is_valid():
        return page(request, "governance/change_list.html", context, status=400)
    filters = filter_form.filters()
    changes = paginate(
        request, selectors.rule_change_list(**filters), default_size=CHANGES_PER_PAGE
    )
    rows = selectors.edit_rows(changes.object_list)
    context.update(
        target=filters.get("target"),
        changes_page=changes,
        entries=[(change, rows.get(change.pk, [])) for change in changes],
    )
    return page(request, "governance/change_list.html", context)


@login_required
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change = selectors.rule_change_get(user=request.user, pk=pk)
    return page(request, "governance/change_detail.html", _detail_context(request, change))


def _detail_context(request: HttpRequest, change: RuleChange, **extra: Any) -> dict[str, Any]:
    blockers = selectors.change_action_blockers(change=change, user=request.user)
    approve_blocker = blockers[ChangeAction.APPROVE]
    context = {
        "change": change,
        "plan": selectors.rule_change_plan(change=change),
        "status_history": selectors.history_entries(obj=change),
        "rollbacks": list(change.rollbacks.order_by("-pk")),
        # Why the user may not approve a proposed change (shown next to the buttons).
        "approval_problem": approve_blocker
        if change.status == ChangeStatus.PROPOSED and approve_blocker is not None
        else None,
        "may_approve": approve_blocker is None,
        "may_reject": blockers[ChangeAction.REJECT] is None,
        "may_withdraw": blockers[ChangeAction.WITHDRAW] is None,
        "may_apply": blockers[ChangeAction.APPLY] is None,
        "may_roll_back": blockers[ChangeAction.ROLL_BACK] is None,
        "note_form": forms.ChangeNoteForm(),
    }
    context.update(extra)
    return context


def _decide(
    request: HttpRequest, pk: int, decide: Callable[..., RuleChange], done: str, **kwargs: Any
) -> HttpResponse:
    change = selectors.rule_change_get(user=request.user, pk=pk)
    form = forms.ChangeNoteForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    try:
        if kwargs.pop("with_note", True):
            kwargs["note"] = note
        change = decide(change=change, user=request.user, **kwargs)
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, message)
    else:
        messages.success(request, done % {"id": change.pk})
    return redirect(change)


@login_required
@require_POST
def change_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, services.rule_change_approve, _("Approved change #%(id)d."))


@login_required
@require_POST
def change_reject(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, services.rule_change_reject, _("Rejected change #%(id)d."))


@login_required
@require_POST
def change_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, services.rule_change_withdraw, _("Withdrew change #%(id)d."))


@login_required
@require_POST
def change_apply(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(
        request,
        pk,
        services.rule_change_apply,
        _("Applied change #%(id)d: the scheduler sync is queued."),
        with_note=False,
    )


@login_required
def change_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    """Propose a change that restores what ``pk`` changed; conflicts are chosen field by
    field (keep the current value or restore the old one)."""
    change = selectors.rule_change_get(user=request.user, pk=pk)
    if not selectors.user_can_edit_rules(request.user):
        raise PermissionDenied(_("Only ops may change the rules."))
    plan = selectors.rollback_plan(change=change)
    conflicts = [item for item in plan if item.conflict and item.needed]
    form = forms.RollbackForm(posted(request), conflicts=conflicts)
    if request.method == "POST" and form.is_valid():
        try:
            rollback = services.rule_change_rollback(
                change=change,
                user=selectors.signed_in_user(request),
                reason=form.change_reason,
                choices=form.choices(),
                confirmation_reason=form.cleaned_data["confirmation_reason"],
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            messages.success(
                request,
                _("Proposed change #%(id)d, which rolls back change #%(old)d.")
                % {"id": rollback.pk, "old": change.pk},
            )
            return redirect(rollback)
    return page(
        request,
        "governance/change_rollback.html",
        {"change": change, "plan": plan, "conflicts": conflicts, "form": form},
    )


# --- reviews --------------------------------------------------------------------------------


@login_required
def review_list(request: HttpRequest) -> HttpResponse:
    """Tiers and quotas whose review is overdue or due within the window."""
    if not selectors.user_can_read_rules(request.user):
        raise PermissionDenied
    today = timezone.localdate()
    return page(
        request,
        "governance/review_list.html",
        {
            "today": today,
            "tiers": selectors.tiers_due_for_review(today=today),
            "quotas": selectors.quotas_due_for_review(today=today),
        },
    )


@login_required
def review_tier(request: HttpRequest, slug: str) -> HttpResponse:
    tier = selectors.tier_get(user=request.user, slug=slug)
    return _review_page(request, tier=tier, edit_url=reverse("tier_edit", args=[tier.slug]))


@login_required
def review_quota(request: HttpRequest, pk: int) -> HttpResponse:
    quota = selectors.quota_get(user=request.user, pk=pk)
    return _review_page(request, quota=quota, edit_url=reverse("quota_edit", args=[quota.pk]))


def _review_page(request: HttpRequest, *, edit_url: str, **subject: Any) -> HttpResponse:
    obj: Any = subject.get("tier") or subject.get("quota")
    form = forms.ReviewForm(posted(request), can_retire="tier" in subject)
    if request.method == "POST" and form.is_valid():
        try:
            review = services.review_record(
                user=selectors.signed_in_user(request),
                outcome=form.cleaned_data["outcome"],
                notes=form.cleaned_data["notes"],
                review_cycle_days=form.cleaned_data["review_cycle_days"],
                **subject,
            )
        except ValidationError as error:
            form.add_service_error(error)
        else:
            messages.success(
                request,
                _("Review recorded; the next one is due on %(date)s.")
                % {"date": review.next_review_on},
            )
            if review.change is not None:
                return redirect(review.change)
            if review.outcome == ReviewOutcome.MODIFY:
                return redirect(edit_url)
            return redirect(obj)
    return page(
        request,
        "governance/review_form.html",
        {"object": obj, "form": form, "reviews": obj.reviews.select_related("reviewed_by")[:10]},
    )
