"""The forms of a rule change's pages (what a change says about itself, a note, a
rollback) and of a review."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from governance.models import (
    ConflictChoice,
    ReviewOutcome,
    parse_trigger,
)
from governance.services import REASON_MAX_LENGTH

from .base import ServiceErrorsMixin, reason_field


class RuleChangeMetaForm(ServiceErrorsMixin, forms.Form):
    """What a proposed change says about itself, besides its reason and its edits."""

    title = forms.CharField(
        label=_("Title"),
        max_length=200,
        required=False,
        help_text=_("A short name for the timeline; empty: the objects and fields it edits."),
    )
    ticket = forms.CharField(
        label=_("Ticket or link"), max_length=300, required=False, help_text=_("Optional.")
    )
    observation_days = forms.IntegerField(
        label=_("Observation window (days)"),
        min_value=0,
        max_value=366,
        required=False,
        initial=7,
        help_text=_("How long to watch the effect before the next change in the same scope."),
    )
    rollback_condition = forms.CharField(
        label=_("Rollback condition"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("When should this change be rolled back? E.g. “critical waits over 10 min”."),
    )
    rollback_trigger = forms.CharField(
        label=_("Rollback trigger"),
        max_length=200,
        required=False,
        help_text=_(
            "The condition in a form the replay evaluates: metric (p50, p90, p95, p99, mean, "
            "preempted, lost), scope (all, tier <slug>, project <slug>, pool <slug>), "
            "comparison (>, >=, <, <=, rises by) and threshold (minutes for waits; % after "
            "“rises by”). E.g. “p90 wait tier training > 30 min”, “p95 project vision rises "
            "by 20 %”."
        ),
    )
    confirmation_reason = forms.CharField(
        label=_("Confirmation"),
        required=False,
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_(
            "Only when the plan warns (mixed kinds, several pools, inside the observation "
            "window of an earlier change): why it should go ahead anyway."
        ),
    )

    def clean_rollback_trigger(self) -> str:
        text = self.cleaned_data.get("rollback_trigger") or ""
        if text.strip():
            return parse_trigger(text).text  # ValidationError: what is wrong, on the field
        return ""

    def service_data(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        if data.get("observation_days") is None:
            data.pop("observation_days", None)
        return data


class ChangeNoteForm(forms.Form):
    note = forms.CharField(
        label=_("Note"),
        required=False,
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class RollbackForm(ServiceErrorsMixin, forms.Form):
    """The reason of a rollback and, for each conflicting field, keep or restore."""

    reason = reason_field()
    confirmation_reason = RuleChangeMetaForm.base_fields["confirmation_reason"]

    def __init__(self, *args: Any, conflicts: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conflict_fields = []
        for conflict in conflicts:
            name = f"choice_{conflict.row.edit.pk}"
            self.fields[name] = forms.ChoiceField(
                label=_("%(object)s · %(field)s")
                % {"object": conflict.row.object_name, "field": conflict.row.field_label},
                choices=[
                    (
                        ConflictChoice.KEEP,
                        _("Keep the current value (%(value)s)") % {"value": conflict.row.current},
                    ),
                    (
                        ConflictChoice.RESTORE,
                        _("Restore the old value (%(value)s)") % {"value": conflict.row.old},
                    ),
                ],
                widget=forms.RadioSelect,
            )
            self.conflict_fields.append(name)
        self.order_fields([*self.conflict_fields, "reason", "confirmation_reason"])

    def choices(self) -> dict[int, str]:
        return {
            int(name.removeprefix("choice_")): self.cleaned_data[name]
            for name in self.conflict_fields
        }


class ReviewForm(ServiceErrorsMixin, forms.Form):
    outcome = forms.ChoiceField(
        label=_("Outcome"), choices=ReviewOutcome.choices, widget=forms.RadioSelect
    )
    notes = forms.CharField(
        label=_("Notes"),
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("What was checked and what was decided. Recorded with your name."),
    )
    review_cycle_days = forms.IntegerField(
        label=_("Review again in (days)"),
        min_value=1,
        max_value=730,
        required=False,
        help_text=_("Empty: keep the current review cycle."),
    )

    def __init__(self, *args: Any, can_retire: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not can_retire:
            self.fields["outcome"].choices = [
                choice for choice in ReviewOutcome.choices if choice[0] != ReviewOutcome.RETIRE
            ]
