"""The forms of each rule kind's pages: projects and memberships, people's access, flavors,
pools, tiers, preemption classes and quotas."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from governance.models import (
    GpuFlavor,
    GrantEnd,
    Membership,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    User,
)

from .base import ReasonForm, RuleForm, active_users
from .filters import UserLookupField, project_lookup_field, user_lookup_field


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
