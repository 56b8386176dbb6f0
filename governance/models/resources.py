"""GPU flavors and pools: what hardware exists and how it is shared."""

import re

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .changes import ChangeLinkedHistory

# Kubernetes label keys: an optional DNS prefix and a name of at most 63 characters.


LABEL_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class TaintEffect(models.TextChoices):
    NO_SCHEDULE = "NoSchedule", "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule", "PreferNoSchedule"
    NO_EXECUTE = "NoExecute", "NoExecute"


class GpuFlavor(models.Model):
    """A kind of GPU: what a Kueue ResourceFlavor and a Slurm typed GRES need."""

    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=100)
    gpu_model = models.CharField(_("GPU model"), max_length=100)
    memory_gb = models.PositiveIntegerField(_("memory (GB)"), validators=[MinValueValidator(1)])
    gres_type = models.SlugField(
        _("Slurm GRES type"),
        max_length=63,
        blank=True,
        help_text=_("The type in gres/gpu:<type>; empty for untyped GPUs."),
    )
    node_labels = models.JSONField(
        _("node labels"),
        default=dict,
        blank=True,
        help_text=_('Labels that select the nodes, e.g. {"gpu.example.com/model": "a100"}.'),
    )
    node_taints = models.JSONField(
        _("node taints"),
        default=list,
        blank=True,
        help_text=_(
            'Taints on the nodes, e.g. [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}].'
        ),
    )
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["name"]
        verbose_name = _("GPU flavor")
        verbose_name_plural = _("GPU flavors")
        constraints = [
            models.CheckConstraint(condition=Q(memory_gb__gt=0), name="flavor_memory_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("flavor_detail", args=[self.slug])

    def clean(self) -> None:
        errors: dict[str, list[str]] = {}
        if not isinstance(self.node_labels, dict):
            errors["node_labels"] = [gettext('Node labels must be an object: {"key": "value"}.')]
        else:
            for key, value in self.node_labels.items():
                if (
                    not LABEL_KEY_RE.match(str(key))
                    or not isinstance(value, str)
                    or not (LABEL_VALUE_RE.match(value))
                ):
                    errors.setdefault("node_labels", []).append(
                        gettext("“%(key)s: %(value)s” is not a valid Kubernetes label.")
                        % {"key": key, "value": value}
                    )
        if not isinstance(self.node_taints, list):
            errors["node_taints"] = [gettext("Node taints must be a list of objects.")]
        else:
            for taint in self.node_taints:
                if (
                    not isinstance(taint, dict)
                    or not LABEL_KEY_RE.match(str(taint.get("key", "")))
                    or taint.get("effect") not in TaintEffect.values
                    or not LABEL_VALUE_RE.match(str(taint.get("value", "")))
                    or set(taint) - {"key", "value", "effect"}
                ):
                    errors.setdefault("node_taints", []).append(
                        gettext(
                            "%(taint)s is not a valid taint: it needs a key, an optional value "
                            "and an effect (NoSchedule, PreferNoSchedule or NoExecute)."
                        )
                        % {"taint": taint}
                    )
        if errors:
            raise ValidationError(errors)


class Pool(models.Model):
    """GPUs shared by several projects (a Kueue cohort, a Slurm parent account)."""

    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent pool"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="children",
    )
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["name"]
        verbose_name = _("pool")
        verbose_name_plural = _("pools")
        constraints = [
            models.CheckConstraint(condition=~Q(parent=F("id")), name="pool_not_own_parent"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("pool_detail", args=[self.slug])


class PoolCapacity(models.Model):
    pool = models.ForeignKey(
        Pool, verbose_name=_("pool"), on_delete=models.CASCADE, related_name="capacities"
    )
    flavor = models.ForeignKey(
        GpuFlavor, verbose_name=_("flavor"), on_delete=models.PROTECT, related_name="capacities"
    )
    gpus = models.PositiveIntegerField(_("GPUs"))
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["pool__name", "flavor__name"]
        verbose_name = _("pool capacity")
        verbose_name_plural = _("pool capacities")
        constraints = [
            models.UniqueConstraint(fields=["pool", "flavor"], name="capacity_unique_flavor"),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="capacity_gpus_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.pool}: {self.gpus} × {self.flavor}"
