"""Forms of the request pages. They parse input; the services check the rules and write."""

import re
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.translation import gettext_lazy as _

from approvals.models import ApprovalPolicy, RequestKind, RequestState, UpgradeRequest
from approvals.selectors import REQUEST_SORTS
from governance.forms import (
    ListFilterForm,
    ReasonForm,
    RuleForm,
    ServiceErrorsMixin,
    project_lookup_field,
    user_lookup_field,
)
from governance.models import (
    KIND_SPECIFIC_TERMS,
    KIND_TERMS,
    TERM_FIELDS,
    GpuFlavor,
    Pool,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    Project,
    Terms,
)
from governance.services import TEXT_MAX_LENGTH

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

    def __init__(self, *, encoder: Any = None, decoder: Any = None, **kwargs: Any) -> None:
        # Made from the model's JSON field, which passes its (unused here) encoder and decoder.
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [job for job in re.split(r"[\s,]+", text) if job]


# The terms' form fields come from the model (``GrantTerms``); only how they are shown is
# said here.
TERMS_LABELS: dict[str, Any] = {
    "kind": _("Kind of request"),
    "tier": _("Target tier"),
    "flavor": _("GPU flavor"),
    "extra_gpus": _("Extra GPUs"),
    "lift_borrow_limit": _("Lift the borrow limit instead"),
    "starts_at": _("From"),
    "ends_at": _("Until"),
}
TERMS_HELP: dict[str, Any] = {
    "tier": _("Priority upgrades and queue jumps: the tier the work should run at."),
    "job_ids": _(
        "Queue jumps: the pending jobs. Upgrades and protection: leave empty for all of "
        "the project's work, or name jobs. Separate them with spaces or new lines."
    ),
    "pool": _("Quota exceptions: the pool and flavor of the quota to raise."),
    "flavor": "",
    "extra_gpus": _("Quota exceptions: GPUs added to the quota's maximum."),
    "lift_borrow_limit": "",
    "preemption_class": _("Preemption protection: the stricter class the work gets."),
    "ends_at": _("The grant ends here on its own; the policy limits the length."),
}


def terms_fields() -> dict[str, forms.Field]:
    """New form fields for the terms, made from the model's fields."""
    fields = forms.fields_for_model(
        UpgradeRequest,
        fields=TERM_FIELDS,
        labels=TERMS_LABELS,
        help_texts=TERMS_HELP,
        widgets={
            "kind": forms.RadioSelect,
            "starts_at": DateTimeInput(),
            "ends_at": DateTimeInput(),
        },
        field_classes={"job_ids": JobIdsField},
    )
    return {name: field for name, field in fields.items() if field is not None}


# Up to this many projects, the request form offers them in a menu (by name).
PROJECT_MENU_MAX = 20


class RequestForm(ServiceErrorsMixin, forms.Form):
    project = project_lookup_field(
        _("Project"),
        queryset=Project.objects.none(),
        required=True,
        help_text=_("A project's slug: type the start of it."),
    )
    justification = forms.CharField(
        label=_("Justification"),
        max_length=TEXT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Why the work needs this, and why now."),
    )
    business_impact = forms.CharField(
        label=_("Business impact"),
        max_length=TEXT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("What happens if the request is refused."),
    )
    deadline = forms.DateTimeField(
        label=_("Deadline"),
        required=False,
        widget=DateTimeInput(),
        help_text=_("When the work must be done, if there is a date it cannot miss."),
    )
    extends = forms.ModelChoiceField(
        queryset=UpgradeRequest.objects.all(), required=False, widget=forms.HiddenInput
    )

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update(terms_fields())
        fields = self.fields
        fields["project"].queryset = projects
        self._project_menu(projects)
        fields["kind"].choices = RequestKind.choices
        fields["tier"].queryset = PriorityTier.objects.order_by("-score")
        fields["pool"].queryset = Pool.objects.order_by("name")
        fields["flavor"].queryset = GpuFlavor.objects.order_by("name")
        fields["preemption_class"].queryset = PreemptionClass.objects.exclude(
            kind=PreemptionKind.ALLOWED
        ).order_by("name")
        fields["extra_gpus"].min_value = 1
        fields["extra_gpus"].max_value = 10000
        fields["extra_gpus"].widget.attrs.update(min=1, max=10000)
        # One bound, one message: the model field's own "at least 0" gives way to "at least 1".
        fields["extra_gpus"].validators = [
            validator
            for validator in fields["extra_gpus"].validators
            if not isinstance(validator, MinValueValidator | MaxValueValidator)
        ] + [MinValueValidator(1), MaxValueValidator(10000)]
        fields["job_ids"].required = False
        self.kind_help = [
            (value, label, KIND_HELP[RequestKind(value)]) for value, label in RequestKind.choices
        ]
        project = self._chosen_project(projects)
        if project is not None:
            # Only tiers above the project's own are upgrades (the service checks it too).
            base = project.tier or PriorityTier.objects.filter(is_default=True).first()
            tier_field = self.fields["tier"]
            assert isinstance(tier_field, forms.ModelChoiceField)
            if base is not None and tier_field.queryset is not None:
                tier_field.queryset = tier_field.queryset.filter(score__gt=base.score)

    def _project_menu(self, projects: Any) -> None:
        """A person who may ask for a few projects (a lead: theirs) picks one by its name;
        the only one is chosen already. Ops, who may ask for any, type a slug."""
        few = list(projects.order_by("name")[: PROJECT_MENU_MAX + 1])
        if len(few) > PROJECT_MENU_MAX:
            return
        field = self.fields["project"]
        field.empty_label = None if len(few) == 1 else _("Choose a project")
        field.widget = forms.Select()
        field.widget.choices = field.choices
        field.help_text = _("The project the request is for.")
        if len(few) == 1 and not self.is_bound and not self.initial.get("project"):
            self.initial["project"] = few[0].slug

    def _chosen_project(self, projects: Any) -> Project | None:
        """The project the form is for, when it is known: posted, given, or the only one."""
        chosen = self.data.get("project") if self.is_bound else self.initial.get("project")
        if isinstance(chosen, Project):
            return chosen
        if chosen:
            return projects.select_related("tier").filter(slug=str(chosen).strip()).first()
        if not self.is_bound:
            only = list(projects.select_related("tier")[:2])
            return only[0] if len(only) == 1 else None
        return None

    def service_data(self) -> dict[str, Any]:
        """What ``request_create`` takes: the terms (only those the chosen kind uses)."""
        data = dict(self.cleaned_data)
        used = KIND_TERMS[data["kind"]]
        for name, empty in KIND_SPECIFIC_TERMS.items():
            if name not in used:
                data[name] = empty
        return {
            "project": data["project"],
            "terms": Terms.from_data(data),
            "justification": data["justification"],
            "business_impact": data["business_impact"],
            "deadline": data["deadline"],
            "extends": data["extends"],
        }


class CommentForm(ServiceErrorsMixin, forms.Form):
    comment = forms.CharField(
        label=_("Comment"),
        max_length=TEXT_MAX_LENGTH,
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


class RequestFilterForm(ListFilterForm):
    """The request list's filters, named like the API's; ``mine`` is the page's shortcut for
    ``requester`` = the signed-in user."""

    sorts = REQUEST_SORTS

    state = forms.ChoiceField(
        label=_("State"), choices=[("", _("Any state")), *RequestState.choices], required=False
    )
    kind = forms.ChoiceField(
        label=_("Kind"), choices=[("", _("Any kind")), *RequestKind.choices], required=False
    )
    project = project_lookup_field(_("Project"))
    requester = user_lookup_field(_("Requester"))
    mine = forms.BooleanField(label=_("Only mine"), required=False)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def filters(self) -> dict[str, Any]:
        filters = super().filters()
        if filters.pop("mine", False):
            filters["requester"] = self.user
        return filters


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
