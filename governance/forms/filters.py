"""The filters of the list pages: one form per list, named like the API's query parameters.

A list page parses ``request.GET`` with its form and passes ``filters()`` to the list
selector, which the API calls with the same parameters; so a page and its API show the same
rows in the same order. A bad value is a form error shown on the page (never a 500).

Menus that would list every user or project (thousands of them) are ``LookupField``: a text
input for the username or slug, which ``static/js/lookup.js`` turns into a search-as-you-type
field fed by ``/api/v1/lookup/<kind>/``; without JavaScript it stays a plain text input. The
edit and request forms use the same field (their pages render ``form.media``, which loads the
script); the field's queryset still decides what is accepted.
"""

from typing import Any

from django import forms
from django.db.models import Model, QuerySet
from django.urls import reverse_lazy
from django.utils.translation import gettext_lazy as _

from governance.models import (
    ChangeStatus,
    EditKind,
    GpuFlavor,
    Pool,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    Project,
    User,
)
from governance.selectors import (
    CHANGE_SORTS,
    FLAVOR_SORTS,
    PERSON_SORTS,
    POOL_SORTS,
    PREEMPTION_CLASS_SORTS,
    PROJECT_SORTS,
    QUOTA_SORTS,
    TIER_SORTS,
    Sorts,
    object_lookup,
    object_types,
    sort_choices,
)

SEARCH_MAX_LENGTH = 100


class LookupInput(forms.TextInput):
    """A text input that ``lookup.js`` (its media) turns into a search-as-you-type field."""

    class Media:
        js = ["js/lookup.js"]


class LookupField(forms.ModelChoiceField):
    """One object named by its slug or username, typed (with suggestions), not picked from a
    menu of every row. ``kind`` names the lookup endpoint: ``users`` or ``projects``."""

    def __init__(self, queryset: QuerySet[Any], *, kind: str, to_field_name: str, **kwargs: Any):
        kwargs.setdefault("required", False)
        kwargs.setdefault(
            "error_messages",
            {"invalid_choice": _("Nothing is named “%(value)s”: type a name from the list.")},
        )
        widget = LookupInput(
            attrs={
                "data-lookup": reverse_lazy("api_lookup", args=[kind]),
                "autocomplete": "off",
                "spellcheck": "false",
                "maxlength": SEARCH_MAX_LENGTH,
            }
        )
        super().__init__(queryset, to_field_name=to_field_name, widget=widget, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        """An object's id (a model form's initial value) shows as its username or slug."""
        if isinstance(value, int) and not isinstance(value, bool) and self.queryset is not None:
            found = self.queryset.model._default_manager.filter(pk=value)
            return found.values_list(self.to_field_name, flat=True).first() or value
        return super().prepare_value(value)


# What each lookup kind finds, and the field that names one.
LOOKUP_KINDS: dict[str, tuple[type[Model], str]] = {
    "users": (User, "username"),
    "projects": (Project, "slug"),
}


def lookup_field(
    kind: str, label: Any, *, queryset: QuerySet[Any] | None = None, **kwargs: Any
) -> LookupField:
    """A ``kind`` object (any, or one of ``queryset``) by its username or slug."""
    model, name = LOOKUP_KINDS[kind]
    if queryset is None:
        queryset = model._default_manager.all()
    return LookupField(queryset, kind=kind, to_field_name=name, label=label, **kwargs)


def user_lookup_field(label: Any, help_text: Any = "", **kwargs: Any) -> LookupField:
    return lookup_field("users", label, help_text=help_text, **kwargs)


def project_lookup_field(label: Any, **kwargs: Any) -> LookupField:
    return lookup_field("projects", label, **kwargs)


class UserLookupField(LookupField):
    """A model form's user field (``Meta.field_classes``), typed as a username."""

    def __init__(self, queryset: QuerySet[Any] | None = None, **kwargs: Any) -> None:
        kwargs.pop("to_field_name", None)
        queryset = User.objects.all() if queryset is None else queryset
        super().__init__(queryset, kind="users", to_field_name="username", **kwargs)


class AnyYesNo(forms.NullBooleanSelect):
    """A yes/no filter whose empty choice reads "Any" (Django's says "Unknown")."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.choices = [("unknown", _("Any")), ("true", _("Yes")), ("false", _("No"))]


class _ShortListIterator(forms.models.ModelChoiceIterator):
    """A short list's choices read in one plain query (``ModelChoiceIterator`` reads them
    through ``iterator()``: on PostgreSQL a server-side cursor, three round trips)."""

    def __iter__(self) -> Any:
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        for obj in list(self.queryset):
            yield self.choice(obj)


class ShortListChoiceField(forms.ModelChoiceField):
    iterator = _ShortListIterator


def slug_choice(model: type[Model], label: Any, empty_label: Any) -> forms.ModelChoiceField:
    """A menu of a short list (pools, flavors, tiers, classes), by slug."""
    return ShortListChoiceField(
        label=label,
        queryset=model._default_manager.order_by("name"),
        to_field_name="slug",
        required=False,
        empty_label=empty_label,
    )


def search_field(placeholder: Any) -> forms.CharField:
    return forms.CharField(
        label=_("Search"),
        required=False,
        max_length=SEARCH_MAX_LENGTH,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": placeholder}),
    )


class ListFilterForm(forms.Form):
    """A list's filters plus ``sort`` (the orders of the list's selector).

    ``filters()`` is what the view passes to the selector: the given values only. Call it
    after ``is_valid()``; the view shows the errors of an invalid form instead of rows.
    """

    sorts: Sorts = {}

    sort = forms.ChoiceField(label=_("Order"), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["sort"].choices = sort_choices(self.sorts)  # type: ignore[attr-defined]
        # The order menu goes last, after the filters.
        self.order_fields([name for name in self.fields if name != "sort"] + ["sort"])

    @property
    def has_lookup(self) -> bool:
        """Whether a field searches as you type (the page then loads ``lookup.js``)."""
        return any(isinstance(field, LookupField) for field in self.fields.values())

    def filters(self) -> dict[str, Any]:
        return {
            name: value
            for name, value in self.cleaned_data.items()
            if value is not None and value != ""
        }


class ProjectFilterForm(ListFilterForm):
    sorts = PROJECT_SORTS

    q = search_field(_("Search by name or slug"))
    tier = slug_choice(PriorityTier, _("Tier"), _("Any tier"))
    member = user_lookup_field(_("Member"), _("A username: projects this user leads or works on."))


class PersonFilterForm(ListFilterForm):
    sorts = PERSON_SORTS

    q = search_field(_("Search by username or name"))


class FlavorFilterForm(ListFilterForm):
    sorts = FLAVOR_SORTS

    q = search_field(_("Search by name, model or GRES type"))


class PoolFilterForm(ListFilterForm):
    sorts = POOL_SORTS

    q = search_field(_("Search by name or slug"))
    parent = slug_choice(Pool, _("Inside pool"), _("Any pool"))


class TierFilterForm(ListFilterForm):
    sorts = TIER_SORTS

    q = search_field(_("Search by name, slug or eligibility"))
    may_preempt = forms.NullBooleanField(label=_("May preempt"), required=False, widget=AnyYesNo())
    is_default = forms.NullBooleanField(label=_("Default tier"), required=False, widget=AnyYesNo())
    due_before = forms.DateField(
        label=_("Review due before"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )


class PreemptionClassFilterForm(ListFilterForm):
    sorts = PREEMPTION_CLASS_SORTS

    q = search_field(_("Search by name or business impact"))
    kind = forms.ChoiceField(
        label=_("Kind"), choices=[("", _("Any kind")), *PreemptionKind.choices], required=False
    )


class QuotaFilterForm(ListFilterForm):
    sorts = QUOTA_SORTS

    project = project_lookup_field(_("Project"))
    pool = slug_choice(Pool, _("Pool"), _("All pools"))
    flavor = slug_choice(GpuFlavor, _("GPU flavor"), _("All flavors"))
    preemption_class = slug_choice(
        PreemptionClass, _("Preemption class"), _("All preemption classes")
    )


class ChangeFilterForm(ListFilterForm):
    sorts = CHANGE_SORTS

    status = forms.ChoiceField(
        label=_("Status"), choices=[("", _("Any status")), *ChangeStatus.choices], required=False
    )
    kind = forms.ChoiceField(
        label=_("Kind"), choices=[("", _("Any kind")), *EditKind.choices], required=False
    )
    object = forms.CharField(
        label=_("Object"),
        required=False,
        max_length=SEARCH_MAX_LENGTH,
        help_text=_("kind:key, e.g. tier:production or quota:12"),
    )
    author = user_lookup_field(_("Author"))
    since = forms.DateField(
        label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean_object(self) -> Model | None:
        value = self.cleaned_data["object"]
        if not value:
            return None
        object_type, _sep, key = value.partition(":")
        found = object_lookup(object_type, key)
        if found is None:
            raise forms.ValidationError(
                _("No such object: write kind:key with a kind among %(kinds)s.")
                % {"kinds": ", ".join(object_types())}
            )
        return found

    def filters(self) -> dict[str, Any]:
        filters = super().filters()
        if "object" in filters:
            filters["target"] = filters.pop("object")
        return filters
