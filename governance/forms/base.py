"""What every rule form shares: the reason field, the people one may pick, the service's
errors attached to the form's fields (``ServiceErrorsMixin``), ``ReasonForm`` and
``RuleForm``."""

import copy
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import MaxValueValidator
from django.utils.translation import gettext_lazy as _

from governance.models import User
from governance.models.limits import whole_number_max, whole_number_message
from governance.services import REASON_MAX_LENGTH


def reason_field() -> forms.CharField:
    return forms.CharField(
        label=_("Reason"),
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Why this change? It is recorded in the history with your name."),
    )


def active_users() -> Any:
    # Service accounts are never a tier's owner, a lead or a member of another project.
    return User.objects.filter(is_active=True, is_service_account=False).order_by("username")


class ServiceErrorsMixin:
    """Show a service's ``ValidationError`` on the form, on the fields it names."""

    # The forms adjust their fields (querysets, empty labels, choices) by name.
    fields: dict[str, Any]

    def add_service_error(self, error: ValidationError) -> None:
        if not hasattr(error, "error_dict"):
            self.add_error(None, error)  # type: ignore[attr-defined]
            return
        for field, errors in error.error_dict.items():
            if field in self.fields or field == NON_FIELD_ERRORS:  # type: ignore[attr-defined]
                self.add_error(field, errors)  # type: ignore[attr-defined]
            else:
                self.add_error(None, errors)  # type: ignore[attr-defined]

    @property
    def change_reason(self) -> str:
        """The checked reason, for the history row of the change."""
        return self.cleaned_data["reason"]  # type: ignore[attr-defined]


class ReasonForm(ServiceErrorsMixin, forms.Form):
    reason = reason_field()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reason"] = self.fields.pop("reason")


class RuleForm(ServiceErrorsMixin, forms.ModelForm):
    """A model form over a copy of the object: the page keeps showing the stored values
    while the form checks the input, and the service re-reads the object before it writes."""

    reason = reason_field()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("instance") is not None:
            kwargs["instance"] = copy.copy(kwargs["instance"])
        super().__init__(*args, **kwargs)
        self.fields["reason"] = self.fields.pop("reason")
        for name, field in self.fields.items():  # the API's limit (governance.models.limits)
            if isinstance(field, forms.IntegerField) and name != "reason":
                field.max_value = whole_number_max(name)
                field.validators.append(
                    MaxValueValidator(field.max_value, message=whole_number_message(name))
                )
                field.widget.attrs["max"] = field.max_value

    def service_data(self) -> dict[str, Any]:
        """The checked values of the rule's fields, as the service takes them."""
        return {name: value for name, value in self.cleaned_data.items() if name != "reason"}

    def changed_rule_fields(self) -> list[str]:
        return [name for name in self.changed_data if name != "reason"]
