"""People pages: who holds which site role. Access changes are proposed rule changes."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from governance import forms, selectors

from ._common import edit_page, history_page, list_page, object_page


@login_required
def person_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        "governance/person_list.html",
        forms.PersonFilterForm(request.GET),
        selectors.person_list,
        name="people",
    )


@login_required
def person_detail(request: HttpRequest, username: str) -> HttpResponse:
    person = selectors.person_get(user=request.user, username=username)
    return object_page(
        request,
        "governance/person_detail.html",
        person,
        "detail",
        memberships=selectors.user_memberships(user=person),
    )


@login_required
def person_history(request: HttpRequest, username: str) -> HttpResponse:
    person = selectors.person_get(user=request.user, username=username)
    return history_page(request, person)


@login_required
def person_edit(request: HttpRequest, username: str) -> HttpResponse:
    """Propose a change of a person's site role or activation (ops; another ops approves)."""
    person = selectors.person_get(user=request.user, username=username, for_edit=True)
    return edit_page(request, forms.UserAccessForm, person)
