"""Tokens and service accounts through the API: the same services and rules as the pages.

A person manages their own personal tokens; a project's lead (for their project) and ops
manage service accounts and their tokens. A token never makes a token with more scopes than
its own; a service account manages nothing (its lists are empty, its writes a 403/404).
"""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import selectors, services
from governance.models import Project, ServiceAccount
from governance.toolkit.api import NOT_FOUND, LimitOffsetPagination, get_paginated_response

from .token_serializers import (
    ACCOUNT_EXAMPLE,
    BAD_INPUT,
    FORBIDDEN,
    NEW_TOKEN_EXAMPLE,
    TOKEN_EXAMPLE,
    NewTokenOutputSerializer,
    ReasonInputSerializer,
    ServiceAccountOutputSerializer,
    TokenInputSerializer,
    TokenOutputSerializer,
    _new_token_response,
    _parent,
)


class PersonalTokenListApi(APIView):
    pagination_class = LimitOffsetPagination

    @extend_schema(
        operation_id="tokens_list",
        tags=["tokens"],
        summary=_("Your personal tokens (never their keys)"),
        responses={200: TokenOutputSerializer(many=True)},
        examples=[OpenApiExample("A token", value=[TOKEN_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        return get_paginated_response(
            serializer_class=TokenOutputSerializer,
            queryset=selectors.personal_token_list(user=request.user),
            request=request,
            view=self,
        )


class PersonalTokenCreateApi(APIView):
    @extend_schema(
        operation_id="tokens_create",
        tags=["tokens"],
        summary=_("Make a personal token (its key is in this response only)"),
        request=TokenInputSerializer,
        responses={201: NewTokenOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN},
        examples=[
            OpenApiExample(
                "A read-only token for a script",
                value={"name": "usage report", "scopes": ["read"], "expires_in_days": 30},
                request_only=True,
            ),
            OpenApiExample("The new token", value=NEW_TOKEN_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = TokenInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token = services.personal_token_create(
            user=selectors.signed_in_user(request),
            name=data["name"],
            scopes=data["scopes"],
            expires_in_days=data.get("expires_in_days"),
            parent=_parent(request),
        )
        return _new_token_response(token)


class PersonalTokenRevokeApi(APIView):
    @extend_schema(
        operation_id="tokens_revoke",
        examples=[
            OpenApiExample(
                "Revoked",
                value={**TOKEN_EXAMPLE, "revoked_at": "2026-12-02T08:00:00Z"},
                response_only=True,
            )
        ],
        tags=["tokens"],
        summary=_("Revoke one of your personal tokens (it stops at once)"),
        request=None,
        responses={200: TokenOutputSerializer, 400: BAD_INPUT, 404: NOT_FOUND},
    )
    def post(self, request: Request, pk: int) -> Response:
        user = selectors.signed_in_user(request)
        token = selectors.personal_token_get(user=user, pk=pk)
        token = services.api_token_revoke(token=token, user=user)
        return Response(TokenOutputSerializer(token).data)


class ServiceAccountListApi(APIView):
    pagination_class = LimitOffsetPagination

    @extend_schema(
        operation_id="service_accounts_list",
        tags=["service accounts"],
        summary=_("The service accounts you manage (a lead: their projects'; ops: all)"),
        responses={200: ServiceAccountOutputSerializer(many=True)},
        examples=[OpenApiExample("An account", value=[ACCOUNT_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        return get_paginated_response(
            serializer_class=ServiceAccountOutputSerializer,
            queryset=selectors.service_account_list(user=request.user),
            request=request,
            view=self,
        )


class ServiceAccountCreateApi(APIView):
    class InputSerializer(serializers.Serializer):
        username = serializers.SlugField(max_length=150)
        project = serializers.SlugRelatedField(
            slug_field="slug",
            queryset=Project.objects.all(),
            allow_null=True,
            help_text=_("The project; null for a site-wide account for ops tools (ops only)."),
        )
        description = serializers.CharField(max_length=500, required=False, allow_blank=True)
        reason = serializers.CharField(max_length=1000)

        class Meta:
            ref_name = "ServiceAccountCreateInput"

    @extend_schema(
        operation_id="service_accounts_create",
        tags=["service accounts"],
        summary=_("Make a service account for a project (its lead, or ops) or site-wide (ops)"),
        request=InputSerializer,
        responses={201: ServiceAccountOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN},
        examples=[
            OpenApiExample(
                "A project's CI account",
                value={
                    "username": "vision-ci",
                    "project": "vision",
                    "description": "GitLab CI of the vision repository",
                    "reason": "Release pipeline files queue-jump requests",
                },
                request_only=True,
            ),
            OpenApiExample("The account", value=ACCOUNT_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        account = services.service_account_create(
            project=data["project"],
            username=data["username"],
            description=data.get("description", ""),
            user=selectors.signed_in_user(request),
            reason=data["reason"],
        )
        return Response(
            ServiceAccountOutputSerializer(account).data, status=status.HTTP_201_CREATED
        )


class ServiceAccountDetailApi(APIView):
    class OutputSerializer(ServiceAccountOutputSerializer):
        tokens = TokenOutputSerializer(many=True, source="user.tokens")
        managers = serializers.SerializerMethodField(
            help_text=_(
                "The people behind the account for four eyes (who made it, minted a token of "
                "it, or lead its project): none of them approves what it authors."
            )
        )

        class Meta(ServiceAccountOutputSerializer.Meta):
            ref_name = "ServiceAccountDetail"
            fields = (*ServiceAccountOutputSerializer.Meta.fields, "managers", "tokens")

        def get_managers(self, account: ServiceAccount) -> list[str]:
            return selectors.service_account_manager_names(account)

    @extend_schema(
        operation_id="service_accounts_read",
        tags=["service accounts"],
        summary=_("A service account and its tokens"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "An account",
                value={**ACCOUNT_EXAMPLE, "tokens": [TOKEN_EXAMPLE]},
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, pk: int) -> Response:
        account = selectors.service_account_get(user=request.user, pk=pk)
        return Response(self.OutputSerializer(account).data)


class ServiceAccountDeactivateApi(APIView):
    @extend_schema(
        operation_id="service_accounts_deactivate",
        tags=["service accounts"],
        summary=_("Deactivate a service account: every token of it stops at once"),
        request=ReasonInputSerializer,
        responses={200: ServiceAccountOutputSerializer, 400: BAD_INPUT, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "Deactivate",
                value={"reason": "The pipeline moved to another repository"},
                request_only=True,
            )
        ],
    )
    def post(self, request: Request, pk: int) -> Response:
        user = selectors.signed_in_user(request)
        account = selectors.service_account_get(user=user, pk=pk)
        serializer = ReasonInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.service_account_deactivate(
            account=account, user=user, reason=serializer.validated_data["reason"]
        )
        account.refresh_from_db()
        return Response(ServiceAccountOutputSerializer(account).data)


class ServiceAccountTokenCreateApi(APIView):
    @extend_schema(
        operation_id="service_accounts_tokens_create",
        tags=["service accounts"],
        summary=_("Make a token for a service account (its key is in this response only)"),
        request=TokenInputSerializer,
        responses={
            201: NewTokenOutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
        examples=[
            OpenApiExample(
                "A pipeline's token",
                value={"name": "release pipeline", "scopes": ["read", "request"]},
                request_only=True,
            ),
            OpenApiExample("The new token", value=NEW_TOKEN_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request, pk: int) -> Response:
        user = selectors.signed_in_user(request)
        account = selectors.service_account_get(user=user, pk=pk)
        serializer = TokenInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token = services.service_account_token_create(
            account=account,
            name=data["name"],
            scopes=data["scopes"],
            expires_in_days=data.get("expires_in_days"),
            user=user,
            parent=_parent(request),
        )
        return _new_token_response(token)


class ServiceAccountApproveApi(APIView):
    @extend_schema(
        operation_id="service_accounts_approve",
        tags=["service accounts"],
        summary=_(
            "Approve a site-wide service account (ops who did not make it): it works from now"
        ),
        request=None,
        responses={
            200: ServiceAccountOutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
        examples=[
            OpenApiExample(
                "Approved",
                value={**ACCOUNT_EXAMPLE, "project": None, "approved_by": "ops2"},
                response_only=True,
            )
        ],
    )
    def post(self, request: Request, pk: int) -> Response:
        user = selectors.signed_in_user(request)
        account = selectors.service_account_get(user=user, pk=pk)
        services.service_account_approve(account=account, user=user)
        account.refresh_from_db()
        return Response(ServiceAccountOutputSerializer(account).data)


class ServiceAccountTokenApproveApi(APIView):
    @extend_schema(
        operation_id="service_accounts_tokens_approve",
        tags=["service accounts"],
        summary=_(
            "Approve a service account's token with the request scope (ops not behind the "
            "account): it works from now"
        ),
        request=None,
        responses={200: TokenOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND},
        examples=[OpenApiExample("Approved", value=TOKEN_EXAMPLE, response_only=True)],
    )
    def post(self, request: Request, pk: int, token_pk: int) -> Response:
        user = selectors.signed_in_user(request)
        account = selectors.service_account_get(user=user, pk=pk)
        token = selectors.service_account_token_get(account=account, pk=token_pk)
        token = services.api_token_approve(token=token, user=user)
        return Response(TokenOutputSerializer(token).data)


class ServiceAccountTokenRevokeApi(APIView):
    @extend_schema(
        operation_id="service_accounts_tokens_revoke",
        examples=[
            OpenApiExample(
                "Revoked",
                value={**TOKEN_EXAMPLE, "revoked_at": "2026-12-02T08:00:00Z"},
                response_only=True,
            )
        ],
        tags=["service accounts"],
        summary=_("Revoke a service account's token (it stops at once)"),
        request=None,
        responses={200: TokenOutputSerializer, 400: BAD_INPUT, 404: NOT_FOUND},
    )
    def post(self, request: Request, pk: int, token_pk: int) -> Response:
        user = selectors.signed_in_user(request)
        account = selectors.service_account_get(user=user, pk=pk)
        token = selectors.service_account_token_get(account=account, pk=token_pk)
        token = services.api_token_revoke(token=token, user=user)
        return Response(TokenOutputSerializer(token).data)


class ServiceAccountWritesApi(APIView):
    pagination_class = LimitOffsetPagination

    class OutputSerializer(serializers.Serializer):
        at = serializers.DateTimeField()
        method = serializers.CharField()
        path = serializers.CharField()
        status_code = serializers.IntegerField()
        token = serializers.CharField(source="token.prefix")
        pipeline_run_url = serializers.CharField()
        address = serializers.IPAddressField(allow_null=True)

        class Meta:
            ref_name = "ServiceAccountWrite"

    @extend_schema(
        operation_id="service_accounts_writes",
        tags=["service accounts"],
        summary=_("A service account's latest writes through the API, newest first"),
        responses={200: OutputSerializer(many=True), 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "A request filed by a pipeline",
                value=[
                    {
                        "at": "2026-12-01T09:12:00Z",
                        "method": "POST",
                        "path": "/api/v1/requests/create/",
                        "status_code": 201,
                        "token": "3f9a1c2e",
                        "pipeline_run_url": "https://gitlab.example.com/vision/-/pipelines/811",
                        "address": "10.0.4.17",
                    }
                ],
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, pk: int) -> Response:
        account = selectors.service_account_get(user=request.user, pk=pk)
        return get_paginated_response(
            serializer_class=self.OutputSerializer,
            queryset=selectors.service_account_writes(account=account, limit=None),
            request=request,
            view=self,
        )
