"""Passwords from a link by mail: asking for the link, and setting the password with it."""

from collections.abc import Iterator
from typing import Any

from django.contrib.auth.forms import PasswordResetForm, SetPasswordForm
from django.utils import translation

from governance import selectors, services
from governance.models import User


class PasswordLinkForm(PasswordResetForm):
    """Ask for a link by mail. Unlike Django's form it also answers an active person who has
    no password yet (an account made in the admin): the link is how they set their first one.
    Service accounts never get one (they never sign in), nor anyone
    ``selectors.password_link_refusal`` refuses (an account of the identity provider; anyone
    while local passwords are off, break-glass accounts excepted)."""

    def get_users(self, email: str) -> Iterator[Any]:
        people = User.objects.filter(email__iexact=email, is_active=True, is_service_account=False)
        return (
            person
            for person in people
            if person.email.casefold() == email.casefold()
            and not selectors.password_link_refusal(person)
        )

    def send_mail(
        self,
        subject_template_name: str,
        email_template_name: str,
        context: dict[str, Any],
        from_email: str | None,
        to_email: str,
        html_email_template_name: str | None = None,
    ) -> None:
        # In the person's language (else the page's), with Arbiter's subject.
        language = getattr(context.get("user"), "language", "") or translation.get_language()
        with translation.override(language):
            super().send_mail(
                subject_template_name,
                email_template_name,
                context,
                from_email,
                to_email,
                html_email_template_name,
            )


class NewPasswordForm(SetPasswordForm):
    """Set the password from a link: the person's API tokens are revoked with it
    (``revoked``: how many), since whoever held the old password may have made them."""

    revoked = 0

    def save(self, commit: bool = True) -> Any:
        self.revoked = services.user_password_set(
            person=self.user, password=self.cleaned_data["new_password1"]
        )
        return self.user
