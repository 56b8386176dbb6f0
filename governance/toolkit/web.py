"""What every app's HTML views share: the posted data, proposing a rule change from a form
and its change form (the reason, ticket and observation window), and the sections of an
object's history page."""

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.utils.translation import gettext as _

from governance.models import RuleChange
from governance.selectors import object_history_sections, signed_in_user
from governance.toolkit.paging import ListPage, paginate


def posted(request: HttpRequest) -> QueryDict | None:
    """The form data of a POST, ``None`` for a GET (an unbound form)."""
    return request.POST if request.method == "POST" else None


def propose(
    request: HttpRequest,
    service: Callable[..., RuleChange],
    *,
    form: Any,
    change_form: Any,
    **kwargs: Any,
) -> HttpResponse | None:
    """Propose through ``service`` (called with the signed-in user, ``kwargs`` and the change
    form's data); the change's page, or ``None`` with each error shown on the form it belongs
    to (a warning of the plan goes to the change form's confirmation)."""
    try:
        change = service(user=signed_in_user(request), **kwargs, **change_form.service_data())
    except ValidationError as error:
        if hasattr(error, "error_dict"):
            own = {k: v for k, v in error.error_dict.items() if k in change_form.fields}
            rest = {k: v for k, v in error.error_dict.items() if k not in change_form.fields}
            if own:
                change_form.add_service_error(ValidationError(own))
            if rest:
                form.add_service_error(ValidationError(rest))
        else:
            form.add_service_error(error)
        return None
    messages.success(
        request,
        _("Proposed change #%(id)d. It is applied once someone else approves it.")
        % {"id": change.pk},
    )
    return redirect(change)


def history_section_pages(request: HttpRequest, obj: Any) -> list[tuple[Any, ListPage]]:
    """The sections of ``obj``'s history (``selectors.object_history_sections``: its own rows,
    then those its kind declares), each with its title and a page of its rows (``?page=``,
    ``?page2=``...): what every history page renders."""
    return [
        (section.title, paginate(request, section.entries, param=_section_param(index)))
        for index, section in enumerate(object_history_sections(obj=obj))
    ]


def _section_param(index: int) -> str:
    return "page" if index == 0 else f"page{index + 1}"
