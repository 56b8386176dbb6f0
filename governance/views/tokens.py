"""The signed-in person's own settings: the API token (make, replace or revoke it; the key is
shown once) and the language (the switch at the top right)."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django.views.i18n import set_language
from rest_framework.authtoken.models import Token

from governance import selectors, services


@never_cache
@login_required
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: whether the user has a token (never its key). POST ``action=rotate``: a new
    token, whose key this one response shows; ``action=revoke``: no token any more."""
    user = selectors.signed_in_user(request)
    new_key = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "rotate":
            new_key = services.user_token_rotate(user=user).key
        elif action == "revoke":
            if services.user_token_revoke(user=user):
                messages.success(request, _("Your API token was revoked."))
            return redirect("api_token")
        else:
            messages.error(request, _("Choose to make, replace or revoke your token."))
            return redirect("api_token")
    token = Token.objects.filter(user=user).first()
    return render(
        request,
        "governance/api_token.html",
        {"token": token, "new_key": new_key},
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
