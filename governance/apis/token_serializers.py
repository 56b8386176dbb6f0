"""What the token and service account API reads and writes: its serializers, responses and
schema examples."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance.models import ApiToken, ServiceAccount, TokenScope

BAD_INPUT = OpenApiResponse(description=_("Invalid input; the body maps fields to messages."))
FORBIDDEN = OpenApiResponse(description=_("You may not do this."))

TOKEN_EXAMPLE = {
    "id": 7,
    "name": "nightly training pipeline",
    "prefix": "3f9a1c2e",
    "scopes": ["read", "request"],
    "created_at": "2026-12-01T08:00:00Z",
    "created_by": "lead",
    "expires_at": "2027-03-01T08:00:00Z",
    "revoked_at": None,
    "approved_at": "2026-12-01T08:30:00Z",
    "approved_by": "ops2",
    "parent": None,
    "last_used_at": "2026-12-01T09:12:00Z",
    "last_used_address": "10.0.4.17",
}
NEW_TOKEN_EXAMPLE = {
    **TOKEN_EXAMPLE,
    "last_used_at": None,
    "last_used_address": None,
    "key": "arb_3f9a1c2e_bXlTZWNyZXRUb2tlbkRvTm90VXNlVGhpc09uZUFueXdoZXJl",
}
ACCOUNT_EXAMPLE = {
    "id": 3,
    "username": "vision-ci",
    "project": "vision",
    "description": "GitLab CI of the vision repository",
    "created_at": "2026-12-01T08:00:00Z",
    "created_by": "lead",
    "deactivated_at": None,
    "approved_at": "2026-12-01T08:00:00Z",
    "approved_by": None,
}


def _parent(request: Request) -> ApiToken | None:
    """The token this request came with: a token it makes may not exceed its scopes nor
    outlive it, and ends with it."""
    return request.auth if isinstance(request.auth, ApiToken) else None


class TokenOutputSerializer(serializers.ModelSerializer):
    created_by: serializers.Field = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=TokenScope.choices))
    approved_by: serializers.Field = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text=_(
            "Who approved a service account's request-scoped token (empty: approved when made)."
        ),
    )
    last_used_at = serializers.DateTimeField(
        source="usage.last_used_at", read_only=True, allow_null=True
    )
    last_used_address = serializers.IPAddressField(
        source="usage.last_used_address", read_only=True, allow_null=True
    )

    class Meta:
        model = ApiToken
        ref_name = "ApiToken"
        fields: tuple[str, ...] = (
            "id",
            "name",
            "prefix",
            "scopes",
            "created_at",
            "created_by",
            "expires_at",
            "revoked_at",
            "approved_at",
            "approved_by",
            "parent",
            "last_used_at",
            "last_used_address",
        )


class NewTokenOutputSerializer(TokenOutputSerializer):
    key = serializers.CharField(
        read_only=True,
        help_text=_("The secret: shown in this response only. Send it as 'Bearer <key>'."),
    )

    class Meta(TokenOutputSerializer.Meta):
        ref_name = "NewApiToken"
        fields = (*TokenOutputSerializer.Meta.fields, "key")


class TokenInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=TokenScope.choices), allow_empty=False
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text=_("Days until it expires; default 90, at most the deployment's maximum."),
    )

    class Meta:
        ref_name = "ApiTokenInput"


class ServiceAccountOutputSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")
    project: serializers.Field = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    created_by: serializers.Field = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    approved_by: serializers.Field = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = ServiceAccount
        ref_name = "ServiceAccount"
        fields: tuple[str, ...] = (
            "id",
            "username",
            "project",
            "description",
            "created_at",
            "created_by",
            "deactivated_at",
            "approved_at",
            "approved_by",
        )


class ReasonInputSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=1000)

    class Meta:
        ref_name = "ServiceAccountReasonInput"


def _new_token_response(token: ApiToken) -> Response:
    data = NewTokenOutputSerializer(token).data
    return Response(data, status=status.HTTP_201_CREATED)
