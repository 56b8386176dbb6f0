"""Forms of the rule pages. They parse and check input; the services make the change.

Every form asks for a reason: it is stored with the history row of the change. The model
forms never ``save()``: a view passes ``service_data()`` to the service, and attaches the
service's ``ValidationError`` back to the form with ``add_service_error()``.
"""

import copy
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import MaxValueValidator
from django.utils.translation import gettext_lazy as _

from governance.models import (
    ConflictChoice,
    GpuFlavor,
    GrantEnd,
    Membership,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    ReviewOutcome,
    User,
    parse_trigger,
)
from governance.models.limits import whole_number_max, whole_number_message
from governance.services import REASON_MAX_LENGTH

from .accounts import NewPasswordForm as NewPasswordForm
from .accounts import PasswordLinkForm as PasswordLinkForm
from .filters import (  # the list filters, re-exported
    ChangeFilterForm as ChangeFilterForm,
)
from .filters import (
    FlavorFilterForm as FlavorFilterForm,
)
from .filters import (
    ListFilterForm as ListFilterForm,
)
from .filters import (
    LookupField as LookupField,
)
from .filters import (
    PersonFilterForm as PersonFilterForm,
)
from .filters import (
    PoolFilterForm as PoolFilterForm,
)
from .filters import (
    PreemptionClassFilterForm as PreemptionClassFilterForm,
)
from .filters import (
    ProjectFilterForm as ProjectFilterForm,
)
from .filters import (
    QuotaFilterForm as QuotaFilterForm,
)
from .filters import (
    TierFilterForm as TierFilterForm,
)
from .filters import (
    UserLookupField as UserLookupField,
)
from .filters import (
    project_lookup_field as project_lookup_field,
)
from .filters import (
    user_lookup_field as user_lookup_field,
)


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


# --- projects -------------------------------------------------------------------------------


class ProjectForm(RuleForm):
    class Meta:
        model = Project
        fields = ["name", "description", "tier"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tier"].empty_label = _("— the default tier —")


class ProjectCreateForm(ProjectForm):
    class Meta(ProjectForm.Meta):
        fields = ["slug", *ProjectForm.Meta.fields]


class MembershipSetForm(ReasonForm):
    member = user_lookup_field(
        _("User"),
        _("A username: type the start of it, or of the person's name."),
        queryset=active_users(),
        required=True,
    )
    role = forms.ChoiceField(label=_("Role"), choices=ProjectRole.choices)


class MembershipRemoveForm(ReasonForm):
    membership = forms.ModelChoiceField(label=_("Member"), queryset=Membership.objects.none())

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["membership"]
        field.queryset = project.memberships.select_related("user").order_by("user__username")
        field.label_from_instance = lambda membership: (
            f"{membership.user.picker_label}, {membership.get_role_display()}"
        )


# --- people -------------------------------------------------------------------------------


class UserAccessForm(RuleForm):
    """A person's site role and activation; superuser status can only be taken away."""

    class Meta:
        model = User
        fields = ["site_role", "is_active", "is_superuser"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance.is_superuser:
            self.fields["is_superuser"].disabled = True
            self.fields["is_superuser"].help_text = _(
                "Granted only by the deployer on the command line (manage.py createsuperuser)."
            )


# --- flavors --------------------------------------------------------------------------------


class FlavorForm(RuleForm):
    class Meta:
        model = GpuFlavor
        fields = ["name", "gpu_model", "memory_gb", "gres_type", "node_labels", "node_taints"]
        widgets = {
            "node_labels": forms.Textarea(attrs={"rows": 3, "class": "code"}),
            "node_taints": forms.Textarea(attrs={"rows": 3, "class": "code"}),
        }
        error_messages = {
            "node_labels": {
                "invalid": _(
                    "This is not valid JSON. Write an object, for example "
                    '{"gpu.example.com/model": "a100"}.'
                ),
            },
            "node_taints": {
                "invalid": _(
                    "This is not valid JSON. Write a list, for example "
                    '[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}].'
                ),
            },
        }

    def clean_node_labels(self) -> Any:
        value = self.cleaned_data.get("node_labels")
        return {} if value is None else value

    def clean_node_taints(self) -> Any:
        value = self.cleaned_data.get("node_taints")
        return [] if value is None else value


class FlavorCreateForm(FlavorForm):
    class Meta(FlavorForm.Meta):
        fields = ["slug", *FlavorForm.Meta.fields]


# --- pools ----------------------------------------------------------------------------------


class PoolForm(RuleForm):
    class Meta:
        model = Pool
        fields = ["name", "description", "parent"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        parent = self.fields["parent"]
        parent.empty_label = _("— none: a top-level pool —")
        if self.instance.pk:
            parent.queryset = parent.queryset.exclude(pk=self.instance.pk)


class PoolCreateForm(PoolForm):
    class Meta(PoolForm.Meta):
        fields = ["slug", *PoolForm.Meta.fields]


class PoolCapacityForm(ReasonForm):
    flavor = forms.ModelChoiceField(label=_("GPU flavor"), queryset=GpuFlavor.objects.all())
    gpus = forms.IntegerField(
        label=_("GPUs"), min_value=0, help_text=_("How many GPUs of this flavor the pool holds.")
    )


# --- tiers ----------------------------------------------------------------------------------


class TierForm(RuleForm):
    # Not a model field of the form: the service moves the default from the old tier, which
    # the model's one-default constraint would refuse to check on this tier alone.
    is_default = forms.BooleanField(
        label=_("Default tier"),
        required=False,
        help_text=_(
            "Work without a tier runs here. Setting it moves the default from the "
            "current default tier."
        ),
    )

    class Meta:
        model = PriorityTier
        fields = [
            "name",
            "score",
            "scheduler_value",
            "description",
            "owner",
            "eligibility",
            "confirmed_by",
            "max_gpus_per_job",
            "max_gpus_total",
            "may_preempt",
            "preemptible_tiers",
            "aging_after_minutes",
            "aging_step",
            "aging_cap",
            "after_grant",
            "review_cycle_days",
            "wait_alert_minutes",
            "last_reviewed_on",
        ]
        field_classes = {"owner": UserLookupField}
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "eligibility": forms.Textarea(attrs={"rows": 3}),
            "preemptible_tiers": forms.CheckboxSelectMultiple,
            "last_reviewed_on": forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["owner"].queryset = active_users()
        self.fields["aging_cap"].empty_label = _("— no aging —")
        self.fields["after_grant"].required = False
        if self.instance.pk:
            self.fields["is_default"].initial = self.instance.is_default
            for name in ("preemptible_tiers", "aging_cap"):
                field = self.fields[name]
                field.queryset = field.queryset.exclude(pk=self.instance.pk)
        self.order_fields([*self.Meta.fields, "is_default", "reason"])

    def clean_after_grant(self) -> str:
        """Not sent (a page or client from before the rule): the tier keeps its own rule
        (a new tier: work keeps running)."""
        return str(
            self.cleaned_data.get("after_grant") or self.instance.after_grant or GrantEnd.KEEP
        )


class TierCreateForm(TierForm):
    class Meta(TierForm.Meta):
        fields = ["slug", *TierForm.Meta.fields]


# --- preemption classes ---------------------------------------------------------------------


class PreemptionClassForm(RuleForm):
    class Meta:
        model = PreemptionClass
        fields = [
            "name",
            "kind",
            "business_impact",
            "requires_verified_checkpoint",
            "max_checkpoint_interval_minutes",
            "min_runtime_minutes",
            "max_preemptions_per_day",
            "recovery_owner",
        ]
        field_classes = {"recovery_owner": UserLookupField}
        widgets = {"business_impact": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["recovery_owner"].queryset = active_users()


class PreemptionClassCreateForm(PreemptionClassForm):
    class Meta(PreemptionClassForm.Meta):
        fields = ["slug", *PreemptionClassForm.Meta.fields]


# --- quotas ---------------------------------------------------------------------------------


class QuotaForm(RuleForm):
    class Meta:
        model = Quota
        fields = [
            "guarantee",
            "borrow_limit",
            "lending_limit",
            "fair_share_weight",
            "reclaim_grace_minutes",
            "preemption_class",
        ]


class QuotaCreateForm(QuotaForm):
    project = project_lookup_field(
        _("Project"), required=True, help_text=_("A project's slug: type the start of it.")
    )

    class Meta(QuotaForm.Meta):
        fields = ["project", "pool", "flavor", *QuotaForm.Meta.fields]


# --- rule changes ---------------------------------------------------------------------------


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


from .tokens import (  # noqa: E402  (the token forms use the helpers above)
    PersonalTokenForm as PersonalTokenForm,
)
from .tokens import (  # noqa: E402
    ServiceAccountForm as ServiceAccountForm,
)
from .tokens import (  # noqa: E402
    ServiceAccountTokenForm as ServiceAccountTokenForm,
)
