"""What every rule page shares: the ops check, the page context, the tab bar, messages."""

from collections.abc import Callable
from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views import defaults

from governance import forms, selectors, services
from governance.models.texts import stored_text
from governance.services import REASON_MAX_LENGTH
from governance.toolkit.paging import DEFAULT_PAGE_SIZE, paginate
from governance.toolkit.web import history_section_pages, posted, propose


def require_ops(user: Any) -> None:
    if not selectors.user_can_edit_rules(user):
        raise PermissionDenied(_("Only ops may change the rules."))


def page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    context["can_edit"] = selectors.user_can_edit_rules(request.user)
    _prefill_reason(request, context)
    return render(request, template, context, status=status)


def _prefill_reason(request: HttpRequest, context: dict[str, Any]) -> None:
    """Every rule page's form opened with ``?reason=`` (a review's finding proposing the
    change: the finding, its figures and a link back to its evidence) starts with that
    reason, to be edited; a form already submitted keeps what was typed."""
    reason = request.GET.get("reason", "").strip() if request.method == "GET" else ""
    if not reason:
        return
    for value in context.values():
        form = isinstance(value, django_forms.BaseForm) and not value.is_bound
        if form and "reason" in value.fields:
            value.initial["reason"] = reason[:REASON_MAX_LENGTH]


def list_page(
    request: HttpRequest,
    template: str,
    filter_form: forms.ListFilterForm,
    select: Callable[..., Any],
    *,
    name: str,
    default_size: int = DEFAULT_PAGE_SIZE,
    **context: Any,
) -> HttpResponse:
    """A list page: its filters parsed by ``filter_form`` and passed to ``select`` (the
    selector the API calls with the same parameters), one page of the rows as ``name``.

    Invalid filters are a 400 showing the form's errors and no rows, never a guess.
    """
    if filter_form.is_valid():
        context[name] = paginate(
            request, select(**filter_form.filters()), default_size=default_size
        )
        status = 200
    else:
        context[name] = None
        status = 400
    context["filter_form"] = filter_form
    return page(request, template, context, status=status)


def object_page(
    request: HttpRequest, template: str, obj: models.Model, tab: str, **context: Any
) -> HttpResponse:
    """A detail or history page: the object, its tab bar and (for ops) its edit link."""
    kind = kind_of(obj)
    key = selectors.object_key(obj)
    context.update(
        object=obj,
        kind=kind,
        kind_plural=obj._meta.verbose_name_plural,
        tab=tab,
        list_url=reverse(f"{kind}_list"),
        detail_url=reverse(f"{kind}_detail", args=[key]),
        history_url=reverse(f"{kind}_history", args=[key]),
        edit_url=reverse(f"{kind}_edit", args=[key]),
        changes_url=reverse("change_list") + f"?object={kind}:{key}",
    )
    if tab == "detail":
        changes = selectors.rule_changes_for_object(obj=obj, limit=5)
        rows = selectors.edit_rows(changes)
        context["object_changes"] = [(change, rows.get(change.pk, [])) for change in changes]
    return page(request, template, context)


def form_page(
    request: HttpRequest,
    form: Any,
    *,
    title: str,
    cancel_url: str,
    obj: models.Model | None = None,
    change_form: Any = None,
) -> HttpResponse:
    return page(
        request,
        "governance/form.html",
        {
            "form": form,
            "title": title,
            "cancel_url": cancel_url,
            "object": obj,
            "change_form": change_form,
        },
    )


def kind_of(obj: models.Model) -> str:
    """The prefix of the object's pages' URL names (its rule kind's ``pages``)."""
    kind = selectors.rule_kind_for(type(obj))
    assert kind is not None, type(obj)
    return kind.pages


def saved(request: HttpRequest, obj: Any) -> HttpResponse:
    messages.success(request, _("Saved “%(object)s”.") % {"object": obj})
    return redirect(obj)


def unchanged(request: HttpRequest, obj: Any) -> HttpResponse:
    messages.info(request, _("Nothing changed: “%(object)s” is as it was.") % {"object": obj})
    return redirect(obj)


def create_title(model: type[models.Model]) -> str:
    return _("New %(kind)s") % {"kind": model._meta.verbose_name}


def history_page(request: HttpRequest, obj: models.Model) -> HttpResponse:
    """The object's history, newest first, in the sections its kind declares
    (``selectors.object_history_sections``), a page of each (``?page=``, ``?page2=``)."""
    paged = history_section_pages(request, obj)
    return object_page(request, "governance/history.html", obj, "history", sections=paged)


def propose_create_page(
    request: HttpRequest,
    form_class: Any,
    *,
    cancel_url: str,
    initial: dict[str, Any] | None = None,
) -> HttpResponse:
    """A create form whose submission proposes the creation as a rule change (applied once
    someone else approves it); the form's and the plan's errors shown on the form."""
    require_ops(request.user)
    form = form_class(posted(request), initial=initial)
    change_form = forms.RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        response = propose(
            request,
            services.rule_object_propose_create,
            form=form,
            change_form=change_form,
            reason=form.change_reason,
            model=form_class.Meta.model,
            data=form.service_data(),
        )
        if response is not None:
            return response
    return form_page(
        request,
        form,
        title=create_title(form_class.Meta.model),
        cancel_url=cancel_url,
        change_form=change_form,
    )


def edit_page(request: HttpRequest, form_class: Any, obj: models.Model) -> HttpResponse:
    """An edit form for ``obj`` (already fetched for edit). Submitting it proposes a rule
    change of the fields that differ; the change is applied once someone else approves it."""
    form = form_class(posted(request), instance=obj)
    change_form = forms.RuleChangeMetaForm(posted(request), prefix="change")
    if request.method == "POST" and form.is_valid() and change_form.is_valid():
        if not form.changed_rule_fields():
            return unchanged(request, obj)
        edits = [
            services.EditSpec(target=obj, field=name, value=value)
            for name, value in form.service_data().items()
        ]
        response = propose_change(
            request, edits=edits, reason=form.change_reason, form=form, change_form=change_form
        )
        if response is not None:
            return response
    return form_page(
        request,
        form,
        title=propose_title(obj),
        cancel_url=obj.get_absolute_url(),  # type: ignore[attr-defined]
        obj=obj,
        change_form=change_form,
    )


def propose_change(
    request: HttpRequest,
    *,
    edits: list[Any],
    reason: str,
    form: Any,
    change_form: Any,
) -> HttpResponse | None:
    """Propose a change of ``edits`` (``governance.toolkit.web.propose``)."""
    return propose(
        request,
        services.rule_change_create,
        form=form,
        change_form=change_form,
        reason=reason,
        edits=edits,
    )


def propose_title(obj: models.Model) -> str:
    return _("Propose a change to %(kind)s “%(object)s”") % {
        "kind": obj._meta.verbose_name,
        "object": stored_text(str(obj)),
    }


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: under ``/api/`` a JSON error in the API's one format (an address that
    matches no operation), elsewhere Django's page (``404.html``)."""
    if request.path.startswith("/api/"):
        from django.http import JsonResponse

        from governance.toolkit.api import error_body  # the API's one error format

        return JsonResponse(error_body(404, {"detail": _("Not found.")}, Http404()), status=404)
    return defaults.page_not_found(request, exception)
