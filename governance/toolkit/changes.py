"""The answer of every operation that proposes or decides a rule change, whichever app's
kind it concerns: the change with its edits (``change_response``), and its OpenAPI errors."""

from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from governance.models import ChangeStatus, EditKind, RuleChange
from governance.selectors import edit_rows, rule_change_list
from governance.toolkit.api import error_response

FORBIDDEN = error_response(
    _("Not allowed: e.g. the proposer approving their own change, or not ops."),
    example={
        "error": "permission_denied",
        "detail": "You may not approve your own change.",
        "fields": {},
    },
)
BAD_INPUT = error_response(
    _("The input or the change's state is invalid; fields maps each field to its messages."),
    example={
        "error": "invalid",
        "detail": "This field is required.",
        "fields": {"reason": ["This field is required."]},
    },
)


def _username(user: Any) -> str | None:
    return user.username if user is not None else None


class EditOutputSerializer(serializers.Serializer):
    object_type = serializers.CharField(help_text=_("project, flavor, pool, tier, …"))
    object = serializers.CharField(source="object_key", help_text=_("A slug, or a quota's id."))
    object_name = serializers.CharField()
    field = serializers.CharField()
    field_label = serializers.CharField()
    key = serializers.IntegerField(
        source="edit.key",
        allow_null=True,
        help_text=_("A pool's capacity: the flavor id; a project's membership: the user id."),
    )
    kind = serializers.ChoiceField(choices=EditKind.choices)
    old = serializers.JSONField(source="edit.old_value", help_text=_("The stored value before."))
    new = serializers.JSONField(source="edit.new_value", help_text=_("The stored value set."))
    old_display = serializers.CharField(source="old")
    new_display = serializers.CharField(source="new")

    class Meta:
        ref_name = "RuleEdit"


class ChangeOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    reason = serializers.CharField()
    ticket = serializers.CharField()
    status = serializers.ChoiceField(choices=ChangeStatus.choices)
    observation_days = serializers.IntegerField()
    rollback_condition = serializers.CharField()
    rollback_trigger = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField(), source="display_warnings")
    confirmation_reason = serializers.CharField()
    rollback_of = serializers.IntegerField(source="rollback_of_id", allow_null=True)
    author = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    proposed_by = serializers.SerializerMethodField()
    proposed_at = serializers.DateTimeField(allow_null=True)
    approved_by = serializers.SerializerMethodField()
    approved_at = serializers.DateTimeField(allow_null=True)
    applied_by = serializers.SerializerMethodField()
    applied_at = serializers.DateTimeField(allow_null=True)
    closed_by = serializers.SerializerMethodField()
    closed_at = serializers.DateTimeField(allow_null=True)
    close_note = serializers.CharField()
    edits = serializers.SerializerMethodField()

    class Meta:
        ref_name = "RuleChange"

    def get_author(self, change: RuleChange) -> str:
        return change.author.username

    def get_proposed_by(self, change: RuleChange) -> str | None:
        return _username(change.proposed_by)

    def get_approved_by(self, change: RuleChange) -> str | None:
        return _username(change.approved_by)

    def get_applied_by(self, change: RuleChange) -> str | None:
        return _username(change.applied_by)

    def get_closed_by(self, change: RuleChange) -> str | None:
        return _username(change.closed_by)

    @extend_schema(responses=EditOutputSerializer(many=True))  # type: ignore[misc]
    def get_edits(self, change: RuleChange) -> list[dict[str, Any]]:
        rows = self.context["rows"].get(change.pk, [])
        return EditOutputSerializer(rows, many=True).data  # type: ignore[return-value]


def change_response(change: RuleChange, *, status_code: int = status.HTTP_200_OK) -> Response:
    """The change as the API shows it (one query for it, one for its edits)."""
    change = rule_change_list().get(pk=change.pk)
    data = ChangeOutputSerializer(change, context={"rows": edit_rows([change])}).data
    return Response(data, status=status_code)
