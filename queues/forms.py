"""Forms of the cluster pages: they parse input; the services make the change."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from governance.forms import RuleForm
from queues.models import Cluster


class ClusterForm(RuleForm):
    class Meta:
        model = Cluster
        fields = ["slurm_cluster", "slurm_conf", "command_prefix", "pools", "enabled"]
        widgets = {"pools": forms.CheckboxSelectMultiple}

    def service_data(self) -> dict[str, Any]:
        data = super().service_data()
        data["pools"] = list(data["pools"])
        return data


class ClusterCreateForm(ClusterForm):
    class Meta(ClusterForm.Meta):
        fields = ["name", *ClusterForm.Meta.fields]


class SyncForm(forms.Form):
    dry_run = forms.BooleanField(label=_("Dry run"), required=False)


class JobSearchForm(forms.Form):
    job = forms.CharField(label=_("Job id"), max_length=200)
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
