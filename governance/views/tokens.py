"""API token pages: a person's own personal tokens, and the service accounts a lead (of their
project) or ops manage, with their tokens and their recent writes. A new token's key is shown
in the one response that made it, never again. And the language switch (top right), which
also remembers a signed-in person's language for their mails."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from governance import forms, selectors, services
from governance.models import TokenScope


def _int(value: str | None) -> int | None:
    try:
        return int(value or "")
    except ValueError:
        return None


@never_cache
@login_required
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: the person's tokens (never a key). POST ``action=create``: a new token whose key
    this one response shows; ``action=revoke`` with ``token``: that token stops working."""
    user = selectors.signed_in_user(request)
    if not selectors.user_may_manage_personal_tokens(user):
        raise PermissionDenied(_("Service accounts have no personal tokens."))
    form = forms.PersonalTokenForm()
    new_token = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            form = forms.PersonalTokenForm(request.POST)
            if form.is_valid():
                try:
                    new_token = services.personal_token_create(
                        user=user,
                        name=form.cleaned_data["name"],
                        scopes=form.cleaned_data["scopes"],
                        expires_in_days=form.cleaned_data["expires_in_days"],
                    )
                except ValidationError as error:
                    form.add_service_error(error)
                else:
                    form = forms.PersonalTokenForm()
        elif action == "revoke":
            pk = _int(request.POST.get("token"))
            if pk is None:
                messages.error(request, _("Choose a token to revoke."))
            else:
                token = selectors.personal_token_get(user=user, pk=pk)
                try:
                    services.api_token_revoke(token=token, user=user)
                except ValidationError as error:
                    messages.error(request, " ".join(error.messages))
                else:
                    messages.success(request, _("The token was revoked."))
            return redirect("api_token")
        else:
            messages.error(request, _("Choose to make or revoke a token."))
            return redirect("api_token")
    return render(
        request,
        "governance/api_token.html",
        {
            "tokens": selectors.personal_token_list(user=user),
            "form": form,
            "new_token": new_token,
            "scopes": TokenScope,
        },
    )


@never_cache
@login_required
def service_account_list(request: HttpRequest) -> HttpResponse:
    """The service accounts the person manages, and a form to make one (leads: for their
    projects; ops: for any project or site-wide)."""
    user = selectors.signed_in_user(request)
    projects = selectors.projects_user_leads(user=user)
    may_create = user.is_ops or projects.exists()
    form = forms.ServiceAccountForm(projects=projects, site_wide=user.is_ops)
    if request.method == "POST":
        if not may_create:
            raise PermissionDenied(_("Only ops and project leads manage service accounts."))
        form = forms.ServiceAccountForm(request.POST, projects=projects, site_wide=user.is_ops)
        if form.is_valid():
            try:
                account = services.service_account_create(
                    project=form.cleaned_data["project"],
                    username=form.cleaned_data["username"],
                    description=form.cleaned_data["description"],
                    user=user,
                    reason=form.cleaned_data["reason"],
                )
            except ValidationError as error:
                form.add_service_error(error)
            else:
                messages.success(request, _("The service account was made: give it a token."))
                return redirect("service_account_detail", pk=account.pk)
    return render(
        request,
        "governance/service_account_list.html",
        {
            "accounts": selectors.service_account_list(user=user),
            "form": form if may_create else None,
        },
    )


@never_cache
@login_required
def service_account_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One account: its tokens (make, revoke), its deactivation and its recent writes."""
    user = selectors.signed_in_user(request)
    account = selectors.service_account_get(user=user, pk=pk)
    form = forms.ServiceAccountTokenForm()
    new_token = None
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "create":
                form = forms.ServiceAccountTokenForm(request.POST)
                if form.is_valid():
                    new_token = services.service_account_token_create(
                        account=account,
                        name=form.cleaned_data["name"],
                        scopes=form.cleaned_data["scopes"],
                        expires_in_days=form.cleaned_data["expires_in_days"],
                        user=user,
                    )
                    form = forms.ServiceAccountTokenForm()
            elif action == "revoke":
                pk_token = _int(request.POST.get("token"))
                if pk_token is None:
                    messages.error(request, _("Choose a token to revoke."))
                else:
                    token = selectors.service_account_token_get(account=account, pk=pk_token)
                    services.api_token_revoke(token=token, user=user)
                    messages.success(request, _("The token was revoked."))
                return redirect("service_account_detail", pk=account.pk)
            elif action == "approve":
                services.service_account_approve(account=account, user=user)
                messages.success(request, _("The service account was approved."))
                return redirect("service_account_detail", pk=account.pk)
            elif action == "approve_token":
                pk_token = _int(request.POST.get("token"))
                if pk_token is None:
                    messages.error(request, _("Choose a token to approve."))
                else:
                    token = selectors.service_account_token_get(account=account, pk=pk_token)
                    services.api_token_approve(token=token, user=user)
                    messages.success(request, _("The token was approved."))
                return redirect("service_account_detail", pk=account.pk)
            elif action == "deactivate":
                reason = request.POST.get("reason", "")
                services.service_account_deactivate(account=account, user=user, reason=reason)
                messages.success(request, _("The service account was deactivated."))
                return redirect("service_account_detail", pk=account.pk)
            else:
                messages.error(request, _("Choose an action."))
                return redirect("service_account_detail", pk=account.pk)
        except PermissionDenied as error:
            if action not in ("approve", "approve_token"):
                raise
            messages.error(request, str(error))
            return redirect("service_account_detail", pk=account.pk)
        except ValidationError as error:
            if action == "create":
                form.add_service_error(error)
            else:
                messages.error(request, " ".join(error.messages))
                return redirect("service_account_detail", pk=account.pk)
        if new_token is not None:
            account = selectors.service_account_get(user=user, pk=pk)
    return render(
        request,
        "governance/service_account_detail.html",
        {
            "account": account,
            "tokens": account.user.tokens,  # type: ignore[attr-defined]  # prefetched
            "writes": selectors.service_account_writes(account=account),
            "managers": selectors.service_account_manager_names(account),
            "form": form,
            "new_token": new_token,
        },
    )


@require_POST
def language_switch(request: HttpRequest) -> HttpResponse:
    """Django's ``set_language`` (the cookie, then back to the page); for a signed-in person
    the language is also remembered, so that their mails come in it."""
    response = set_language(request)
    language = request.POST.get("language", "")
    if request.user.is_authenticated and language in dict(settings.LANGUAGES):
        services.user_language_set(user=selectors.signed_in_user(request), language=language)
    return response
