"""Forms of the cluster pages: they parse input; the services propose the change."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from governance.forms import ReasonForm, RuleForm
from queues.models import Cluster, slurm_bin_dirs

CONNECTION_FIELDS = [
    "slurm_cluster",
    "slurm_partition",
    "slurm_conf",
    "slurm_bin_dir",
    "command_timeout",
    "kube_api_server",
    "kube_ca_bundle",
    "kube_credentials_file",
    "kube_namespace_template",
    "submit_table_delivery",
    "submit_table_lapse",
]


OPTIONAL_CHOICES = ("submit_table_delivery", "submit_table_lapse")


class ClusterForm(RuleForm):
    """A cluster's settings. The binary directory is a choice among the directories the
    deployer allows: nothing typed here is ever run."""

    slurm_bin_dir = forms.TypedChoiceField(
        label=_("Slurm binaries directory"),
        required=False,
        choices=(),
        help_text=_(
            "One of the directories the deployer allows (ARBITER_SLURM_BIN_DIRS); "
            "“the worker's PATH” finds sacctmgr and squeue where the worker's PATH says."
        ),
    )

    class Meta:
        model = Cluster
        fields = [*CONNECTION_FIELDS, "pools", "enabled"]
        widgets = {
            "pools": forms.CheckboxSelectMultiple,
            "kube_ca_bundle": forms.Textarea(attrs={"rows": 4}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["slurm_bin_dir"]
        choices = [("", _("the worker's PATH"))] + [(path, path) for path in slurm_bin_dirs()]
        current = getattr(self.instance, "slurm_bin_dir", "")
        if current and current not in dict(choices):
            choices.append((current, _("%(path)s (no longer allowed)") % {"path": current}))
        field.choices = choices  # type: ignore[attr-defined]
        # Slurm only: a form without them (a Kueue cluster's) keeps the current choice.
        for name in OPTIONAL_CHOICES:
            self.fields[name].required = False

    def _choice_or_current(self, name: str) -> str:
        return self.cleaned_data.get(name) or getattr(self.instance, name)

    def clean_submit_table_delivery(self) -> str:
        return self._choice_or_current("submit_table_delivery")

    def clean_submit_table_lapse(self) -> str:
        return self._choice_or_current("submit_table_lapse")

    def service_data(self) -> dict[str, Any]:
        data = super().service_data()
        data["pools"] = list(data["pools"])
        return data


class ClusterCreateForm(ClusterForm):
    class Meta(ClusterForm.Meta):
        fields = ["name", "backend", *ClusterForm.Meta.fields]


class ClusterDeleteForm(ReasonForm):
    pass


class DriftRemoveForm(ReasonForm):
    """Ops choose "remove" for one object that someone made by hand (drift)."""

    kind = forms.CharField(max_length=32)
    name = forms.CharField(max_length=200)


class SyncForm(forms.Form):
    dry_run = forms.BooleanField(label=_("Dry run"), required=False)


class JobSearchForm(forms.Form):
    # Wide enough for whole ids: Slurm array tasks (4821345_117), Kueue workload names.
    job = forms.CharField(
        label=_("Job id"),
        max_length=200,
        widget=forms.TextInput(attrs={"class": "input--job-id", "spellcheck": "false"}),
    )
    source = forms.CharField(
        label=_("Cluster"),
        max_length=100,
        required=False,
        help_text=_("Only needed when two clusters have a job with this id."),
    )

    def clean_job(self) -> str:
        value = self.cleaned_data["job"].strip()
        if not value:
            raise forms.ValidationError(_("Enter a job id."))
        return value
