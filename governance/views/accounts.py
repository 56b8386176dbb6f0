"""Passwords from a link by mail (Django's views, with Arbiter's forms): asking for a link is
rate-limited per address and per account, and refused to accounts that never get one
(``selectors.password_link_refusal``); setting the password revokes the person's tokens and
the page says how many. Every page is Arbiter's (templates/registration), the mail's subject
too."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from rest_framework.throttling import SimpleRateThrottle

from governance import forms, selectors
from governance.toolkit.client import client_address
from governance.toolkit.throttles import window_count


def _over(key: str, rate: str) -> bool:
    limit, period = SimpleRateThrottle.parse_rate(None, rate)  # type: ignore[arg-type]
    if limit is None or period is None:
        return False
    count, _wait = window_count(key, period)
    return count > limit


class PasswordLinkView(auth_views.PasswordResetView):
    form_class = forms.PasswordLinkForm
    email_template_name = "registration/password_link_email.txt"
    subject_template_name = "registration/password_link_subject.txt"

    def form_valid(self, form: Any) -> HttpResponse:
        address = client_address(self.request) or "unknown"
        if _over(f"password-link:address:{address}", settings.ARBITER_PASSWORD_LINK_RATE_ADDRESS):
            form.add_error(
                None,
                _("Too many password links were asked for from your address; try again later."),
            )
            response = self.form_invalid(form)
            response.status_code = 429
            return response
        email = form.cleaned_data["email"].casefold()
        if _over(f"password-link:account:{email}", settings.ARBITER_PASSWORD_LINK_RATE_ACCOUNT):
            # Nothing more is sent to that account for now; the answer is the same as for any
            # address, so that it tells nobody which accounts exist.
            return HttpResponseRedirect(self.get_success_url())
        return super().form_valid(form)


class NewPasswordView(auth_views.PasswordResetConfirmView):
    """The page of a link: refused, saying why, to an account that may no longer get one
    (``selectors.password_link_refusal``: linked to the identity provider since, or local
    passwords switched off)."""

    form_class = forms.NewPasswordForm
    refusal = ""

    def get_user(self, uidb64: str) -> Any:
        person = super().get_user(uidb64)
        if person is not None:
            self.refusal = selectors.password_link_refusal(person)
            if self.refusal:
                return None
        return person

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["refusal"] = self.refusal
        return context

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        revoked = form.revoked
        messages.info(
            self.request,
            ngettext(
                "Your password is set. Your %(count)d API token was revoked: make a new one.",
                "Your password is set. Your %(count)d API tokens were revoked: make new ones.",
                revoked,
            )
            % {"count": revoked}
            if revoked
            else _("Your password is set."),
        )
        return response
