"""Passwords from a link by mail: asking for the link, and setting the password with it."""

from collections.abc import Iterator
from typing import Any

from django.contrib.auth.forms import PasswordResetForm, SetPasswordForm

from governance import services
from governance.models import User


class PasswordLinkForm(PasswordResetForm):
    """Ask for a link by mail. Unlike Django's form it also answers an active person who has
    no password yet (an account made in the admin): the link is how they set their first one.
    Service accounts never get one (they never sign in)."""

    def get_users(self, email: str) -> Iterator[Any]:
        people = User.objects.filter(email__iexact=email, is_active=True, is_service_account=False)
        return (person for person in people if person.email.casefold() == email.casefold())


class NewPasswordForm(SetPasswordForm):
    """Set the password from a link: the person's API tokens are revoked with it
    (``revoked``: how many), since whoever held the old password may have made them."""

    revoked = 0

    def save(self, commit: bool = True) -> Any:
        self.revoked = services.user_password_set(
            person=self.user, password=self.cleaned_data["new_password1"]
        )
        return self.user
