"""The Django admin, for ops.

Governed rules are read-only here: every change to them goes through the services (the
portal's forms and the API), so that no history row lacks a user and a reason. The admin
still shows each object's full history (django-simple-history's history view).
"""

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from governance import services
from governance.models import (
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    Review,
    ReviewReminder,
    RuleChange,
    RuleEdit,
    User,
)
from governance.models.users import USERNAME_TAKEN
from governance.toolkit.admin import ReadOnlyAdmin, is_ops


class UserAddForm(forms.ModelForm):
    """A new account: who it is, and why it is made. It starts inactive, a member, with no
    password; activation and roles are proposed rule changes, the owner sets the password."""

    reason = forms.CharField(
        label=_("Reason"),
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Why this account? It is recorded in the history with your name."),
    )

    class Meta:
        model = User
        fields = ["username", "email", "first_name", "last_name"]

    def clean_username(self) -> str:
        """NFKC-normalised, and unique whatever its case (``Ops`` beside ``ops``)."""
        username = User.normalize_username(self.cleaned_data["username"])
        if User.objects.filter(username__iexact=username).exists():
            raise forms.ValidationError(USERNAME_TAKEN)
        return str(username)


@admin.register(User)
class ArbiterUserAdmin(UserAdmin):
    """Ops look people up and make new (inactive, powerless) accounts; nothing else.

    Site role, activation and superuser status change only through an approved rule change
    (the person's page, "Propose a change"); superuser status is granted only by the deployer
    with ``manage.py createsuperuser``. Passwords are set by their owner (or a reset link):
    no one sees or sets another person's password here, and no one edits another person's
    e-mail address (a reset link goes there).
    """

    add_form = UserAddForm
    add_form_template = "admin/change_form.html"
    add_fieldsets = (
        (None, {"fields": ("username", "email", "first_name", "last_name", "reason")}),
    )
    fieldsets = (
        (None, {"fields": ("username",)}),
        (_("Personal info"), {"fields": ("first_name", "last_name", "email")}),
        (
            _("Access (changed only by an approved rule change)"),
            {"fields": ("site_role", "is_active", "is_superuser", "is_staff")},
        ),
        (_("Important dates"), {"fields": ("last_login", "date_joined")}),
    )
    readonly_fields = (
        "username",
        "first_name",
        "last_name",
        "email",
        "site_role",
        "is_active",
        "is_superuser",
        "is_staff",
        "last_login",
        "date_joined",
    )
    list_display = ("username", "email", "first_name", "last_name", "site_role", "is_active")
    list_filter = ("site_role", "is_active", "is_staff")

    def has_module_permission(self, request) -> bool:
        return is_ops(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return is_ops(request) or super().has_view_permission(request, obj)

    def has_add_permission(self, request) -> bool:
        return is_ops(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def add_view(self, request, form_url="", extra_context=None):
        # UserAdmin's add view also demands the change permission (so that adding cannot
        # escalate); here adding makes a powerless account and changing is closed to all.
        return admin.ModelAdmin.add_view(self, request, form_url, extra_context)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change) -> None:
        if change:  # never reached: nobody may change a user here
            raise PermissionDenied
        created = services.user_create(
            user=request.user,
            reason=form.cleaned_data["reason"],
            username=obj.username,
            email=obj.email,
            first_name=obj.first_name,
            last_name=obj.last_name,
        )
        obj.pk = created.pk
        obj._state.adding = False
        obj._state.db = created._state.db

    def response_add(self, request, obj, post_url_continue=None):
        self.message_user(
            request,
            _(
                "Made the inactive account “%(user)s”. To activate it or give it a role, "
                "propose a change on its page; another ops approves it."
            )
            % {"user": obj.username},
        )
        return HttpResponseRedirect(reverse("person_detail", args=[obj.username]))


# API tokens and service accounts are not in the admin: they are managed on their pages
# (/accounts/token/, /service-accounts/) and through the API, where the rules are enforced.


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    can_delete = False
    readonly_fields = ("user", "role")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "tier")
    list_select_related = ("tier",)
    search_fields = ("name", "slug")
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("project", "user", "role")
    list_select_related = ("project", "user")
    list_filter = ("role",)


@admin.register(GpuFlavor)
class GpuFlavorAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "gpu_model", "memory_gb", "gres_type")


class PoolCapacityInline(admin.TabularInline):
    model = PoolCapacity
    extra = 0
    can_delete = False
    readonly_fields = ("flavor", "gpus")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Pool)
class PoolAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "parent")
    list_select_related = ("parent",)
    inlines = [PoolCapacityInline]


@admin.register(PoolCapacity)
class PoolCapacityAdmin(ReadOnlyAdmin):
    list_display = ("pool", "flavor", "gpus")
    list_select_related = ("pool", "flavor")


@admin.register(PriorityTier)
class PriorityTierAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "score",
        "scheduler_value",
        "owner",
        "may_preempt",
        "is_default",
        "next_review_on",
    )
    list_select_related = ("owner",)
    list_filter = ("may_preempt", "is_default")


@admin.register(PreemptionClass)
class PreemptionClassAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "kind", "requires_verified_checkpoint")
    list_filter = ("kind",)


@admin.register(Quota)
class QuotaAdmin(ReadOnlyAdmin):
    list_display = (
        "project",
        "pool",
        "flavor",
        "guarantee",
        "borrow_limit",
        "lending_limit",
        "preemption_class",
    )
    list_select_related = ("project", "pool", "flavor", "preemption_class")
    list_filter = ("pool", "flavor", "preemption_class")


@admin.register(ReviewReminder)
class ReviewReminderAdmin(admin.ModelAdmin):
    list_display = ("tier", "quota", "kind", "due_on", "recipient", "sent_at")
    list_select_related = ("tier", "quota")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class RuleEditInline(admin.TabularInline):
    model = RuleEdit
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "content_type",
        "object_id",
        "field",
        "key",
        "kind",
        "old_value",
        "new_value",
    )

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(RuleChange)
class RuleChangeAdmin(ReadOnlyAdmin):
    """Rule changes are proposed, decided and applied in the portal (or the API), never here."""

    list_display = ("pk", "title", "status", "author", "approved_by", "applied_at")
    list_select_related = ("author", "approved_by")
    list_filter = ("status",)
    search_fields = ("title", "reason", "ticket")
    inlines = [RuleEditInline]


@admin.register(Review)
class ReviewAdmin(ReadOnlyAdmin):
    list_display = ("reviewed_on", "tier", "quota", "outcome", "reviewed_by", "next_review_on")
    list_select_related = ("tier", "quota", "reviewed_by")
    list_filter = ("outcome",)
