"""Forms of the reports app: asking for a review of a month or of any window."""

from datetime import datetime, time
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from governance.models import Pool, Project


class ReviewRequestForm(forms.Form):
    """A calendar month, or a window from one day to another (both local midnights)."""

    month = forms.CharField(
        label=_("Month"),
        required=False,
        help_text=_("YYYY-MM; or leave empty and give the first and last day below."),
        widget=forms.TextInput(attrs={"placeholder": "2026-11", "inputmode": "numeric"}),
    )
    start = forms.DateField(label=_("First day"), required=False)
    end = forms.DateField(label=_("Last day"), required=False)
    pool = forms.ModelChoiceField(
        label=_("Pool"),
        queryset=Pool.objects.order_by("name"),
        required=False,
        to_field_name="slug",
        empty_label=_("All pools"),
    )
    project = forms.ModelChoiceField(
        label=_("Project"),
        queryset=Project.objects.order_by("name"),
        required=False,
        to_field_name="slug",
        empty_label=_("All projects"),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        month = (data.get("month") or "").strip()
        if month:
            try:
                first = datetime.strptime(month, "%Y-%m").date()
            except ValueError:
                self.add_error("month", _("Write the month as YYYY-MM, for example 2026-11."))
                return data
            following = first.replace(
                year=first.year + first.month // 12, month=first.month % 12 + 1
            )
            data["window"] = (first, following)
        elif data.get("start") and data.get("end"):
            if data["end"] < data["start"]:
                self.add_error("end", _("The last day comes before the first."))
                return data
            from datetime import timedelta

            data["window"] = (data["start"], data["end"] + timedelta(days=1))
        elif not self.errors:
            raise forms.ValidationError(_("Give a month, or a first and a last day."))
        if "window" in data:
            first, following = data["window"]
            data["window"] = (
                timezone.make_aware(datetime.combine(first, time.min)),
                timezone.make_aware(datetime.combine(following, time.min)),
            )
        return data


class CompareForm(forms.Form):
    a = forms.IntegerField(label=_("Review A"), min_value=1)
    b = forms.IntegerField(label=_("Review B"), min_value=1)
