"""Forms of the token pages: personal tokens, service accounts and their tokens."""

from typing import Any

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from governance.models import Project, TokenScope
from governance.services import REASON_MAX_LENGTH


def _scopes_field() -> forms.MultipleChoiceField:
    return forms.MultipleChoiceField(
        label=_("Scopes"),
        choices=TokenScope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[TokenScope.READ],
        help_text=_(
            "read: read rules, requests and grants; request: file and withdraw requests and "
            "propose rule changes; ingest: send workload events; sync: trigger a scheduler "
            "sync and read its status."
        ),
    )


def _days_field() -> forms.IntegerField:
    return forms.IntegerField(
        label=_("Expires in (days)"),
        min_value=1,
        max_value=settings.ARBITER_TOKEN_MAX_DAYS,
        required=False,
        help_text=_("Empty: the default (%(days)d days).")
        % {"days": settings.ARBITER_TOKEN_DEFAULT_DAYS},
    )


class _TokenForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=100,
        help_text=_("What uses the token, e.g. “nightly training pipeline”."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scopes"] = _scopes_field()
        # Built per form: the deployer's maximum is read at each request.
        self.fields["expires_in_days"] = _days_field()

    def add_service_error(self, error: Any) -> None:
        if not hasattr(error, "error_dict"):
            self.add_error(None, error)
            return
        for field, errors in error.error_dict.items():
            self.add_error(field if field in self.fields else None, errors)


class PersonalTokenForm(_TokenForm):
    pass


class ServiceAccountTokenForm(_TokenForm):
    pass


class ServiceAccountForm(forms.Form):
    username = forms.SlugField(
        label=_("Name"),
        max_length=150,
        help_text=_("The account's user name, e.g. “vision-ci”. Letters, digits, - and _."),
    )
    project = forms.ModelChoiceField(
        label=_("Project"),
        queryset=Project.objects.none(),
        required=False,
        empty_label=_("None: a site-wide account for ops tools"),
    )
    description = forms.CharField(label=_("Description"), max_length=500, required=False)
    reason = forms.CharField(
        label=_("Reason"),
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Why this account? It is recorded in the history with your name."),
    )

    def __init__(self, *args: Any, projects: Any, site_wide: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        project: Any = self.fields["project"]
        project.queryset = projects
        project.required = not site_wide
        if not site_wide:
            project.empty_label = None

    def add_service_error(self, error: Any) -> None:
        if not hasattr(error, "error_dict"):
            self.add_error(None, error)
            return
        for field, errors in error.error_dict.items():
            self.add_error(field if field in self.fields else None, errors)
