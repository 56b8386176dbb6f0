"""Forms of the request pages. They parse input; the services check the rules and write."""

import re
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from approvals.models import ApprovalPolicy, RequestKind, RequestState, UpgradeRequest
from governance.forms import ReasonForm, RuleForm, ServiceErrorsMixin
from governance.models import (
    GpuFlavor,
    Pool,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    Project,
)

# Which fields each kind uses; the others are dropped before the service sees them.
KIND_FIELDS = {
    RequestKind.PRIORITY_UPGRADE: ("tier", "job_ids"),
    RequestKind.QUOTA_EXCEPTION: ("pool", "flavor", "extra_gpus", "lift_borrow_limit"),
    RequestKind.PREEMPTION_PROTECTION: ("preemption_class", "job_ids"),
    RequestKind.QUEUE_JUMP: ("tier", "job_ids"),
}
KIND_SPECIFIC = ("tier", "pool", "flavor", "extra_gpus", "lift_borrow_limit", "preemption_class")

# What each kind is for, shown next to the choice.
KIND_HELP = {
    RequestKind.PRIORITY_UPGRADE: _(
        "Run the project's work (or only the jobs you name) at a higher tier for a period, "
        "e.g. to meet a deadline. Approved by the target tier's business owner."
    ),
    RequestKind.QUOTA_EXCEPTION: _(
        "Use more GPUs of one flavor in one pool than the quota's maximum, or borrow without "
        "limit, for a period. Approved by ops."
    ),
    RequestKind.PREEMPTION_PROTECTION: _(
        "Treat the project's work (or the jobs you name) as a stricter preemption class, for "
        "runs that cannot checkpoint. Approved by ops."
    ),
    RequestKind.QUEUE_JUMP: _(
        "Raise named pending jobs to a higher tier until they start. Approved by the target "
        "tier's business owner."
    ),
}


class DateTimeInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(format="%Y-%m-%dT%H:%M", **kwargs)


class JobIdsField(forms.CharField):
    """Scheduler job ids, separated by spaces, commas or new lines."""

    widget = forms.Textarea(attrs={"rows": 2, "class": "code"})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value)
        return [job for job in re.split(r"[\s,]+", text) if job]


class RequestForm(ServiceErrorsMixin, forms.Form):
    project = forms.ModelChoiceField(label=_("Project"), queryset=Project.objects.none())
    kind = forms.ChoiceField(
        label=_("Kind of request"), choices=RequestKind.choices, widget=forms.RadioSelect
    )
    justification = forms.CharField(
        label=_("Justification"),
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Why the work needs this, and why now."),
    )
    business_impact = forms.CharField(
        label=_("Business impact"),
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("What happens if the request is refused."),
    )
    starts_at = forms.DateTimeField(label=_("From"), widget=DateTimeInput())
    ends_at = forms.DateTimeField(
        label=_("Until"),
        widget=DateTimeInput(),
        help_text=_("The grant ends here on its own; the policy limits the length."),
    )
    deadline = forms.DateTimeField(
        label=_("Deadline"),
        required=False,
        widget=DateTimeInput(),
        help_text=_("When the work must be done, if there is a date it cannot miss."),
    )
    tier = forms.ModelChoiceField(
        label=_("Target tier"),
        queryset=PriorityTier.objects.order_by("-score"),
        required=False,
        help_text=_("Priority upgrades and queue jumps: the tier the work should run at."),
    )
    job_ids = JobIdsField(
        label=_("Scheduler job ids"),
        required=False,
        help_text=_(
            "Queue jumps: the pending jobs. Upgrades and protection: leave empty for all of "
            "the project's work, or name jobs. Separate them with spaces or new lines."
        ),
    )
    pool = forms.ModelChoiceField(
        label=_("Pool"),
        queryset=Pool.objects.order_by("name"),
        required=False,
        help_text=_("Quota exceptions: the pool and flavor of the quota to raise."),
    )
    flavor = forms.ModelChoiceField(
        label=_("GPU flavor"), queryset=GpuFlavor.objects.order_by("name"), required=False
    )
    extra_gpus = forms.IntegerField(
        label=_("Extra GPUs"),
        min_value=1,
        max_value=10000,
        required=False,
        help_text=_("Quota exceptions: GPUs added to the quota's maximum."),
    )
    lift_borrow_limit = forms.BooleanField(label=_("Lift the borrow limit instead"), required=False)
    preemption_class = forms.ModelChoiceField(
        label=_("Preemption class"),
        queryset=PreemptionClass.objects.exclude(kind=PreemptionKind.ALLOWED).order_by("name"),
        required=False,
        help_text=_("Preemption protection: the stricter class the work gets."),
    )
    extends = forms.ModelChoiceField(
        queryset=UpgradeRequest.objects.all(), required=False, widget=forms.HiddenInput
    )

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = projects
        self.kind_help = [(value, label, KIND_HELP[value]) for value, label in RequestKind.choices]
        project = self._chosen_project(projects)
        if project is not None:
            # Only tiers above the project's own are upgrades (the service checks it too).
            base = project.tier or PriorityTier.objects.filter(is_default=True).first()
            tier_field = self.fields["tier"]
            assert isinstance(tier_field, forms.ModelChoiceField)
            if base is not None and tier_field.queryset is not None:
                tier_field.queryset = tier_field.queryset.filter(score__gt=base.score)

    def _chosen_project(self, projects: Any) -> Project | None:
        """The project the form is for, when it is known: posted, given, or the only one."""
        chosen = self.data.get("project") if self.is_bound else self.initial.get("project")
        if isinstance(chosen, Project):
            return chosen
        if chosen:
            try:
                return projects.select_related("tier").filter(pk=int(chosen)).first()
            except (TypeError, ValueError):
                return None
        if not self.is_bound:
            only = list(projects.select_related("tier")[:2])
            return only[0] if len(only) == 1 else None
        return None

    def service_data(self) -> dict[str, Any]:
        """The fields the chosen kind uses, as ``request_create`` takes them."""
        data = dict(self.cleaned_data)
        used = KIND_FIELDS[data["kind"]]
        for name in KIND_SPECIFIC:
            if name not in used:
                data[name] = False if name == "lift_borrow_limit" else None
        if "job_ids" not in used:
            data["job_ids"] = []
        return data


class CommentForm(ServiceErrorsMixin, forms.Form):
    comment = forms.CharField(
        label=_("Comment"),
        max_length=2000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class DecisionReasonForm(ReasonForm):
    """Reject or revoke: the reason is required and shown to the requester."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reason"].help_text = _(
            "The requester is told, and it stays in the request's timeline."
        )


class RequestFilterForm(forms.Form):
    state = forms.ChoiceField(
        label=_("State"), choices=[("", _("Any state")), *RequestState.choices], required=False
    )
    kind = forms.ChoiceField(
        label=_("Kind"), choices=[("", _("Any kind")), *RequestKind.choices], required=False
    )
    project = forms.ModelChoiceField(
        label=_("Project"),
        queryset=Project.objects.order_by("name"),
        to_field_name="slug",
        required=False,
        empty_label=_("Any project"),
    )
    mine = forms.BooleanField(label=_("Only mine"), required=False)


class PolicyForm(RuleForm):
    class Meta:
        model = ApprovalPolicy
        fields = ["max_duration_days", "approver", "approvals_required", "monthly_flag_threshold"]


class PolicyCreateForm(PolicyForm):
    class Meta(PolicyForm.Meta):
        fields = ["kind", "tier", *PolicyForm.Meta.fields]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tier"].empty_label = _("— every other tier —")
