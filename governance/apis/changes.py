"""Rule changes: the timeline with its filters, one change with its diff, and one endpoint per
step of a change (propose, approve, reject, withdraw, apply, roll back).

Values in edits are given as pages show them: a related object by slug (a user by username),
a many-to-many field as a list of slugs, a date as ``YYYY-MM-DD``. Stored values (``old``,
``new``) are ids, as in the database; ``old_display`` and ``new_display`` are the names.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import selectors, services
from governance.models import ChangeStatus, ConflictChoice, EditKind, RuleChange
from governance.selectors import (
    CHANGE_SORTS,
    edit_rows,
    model_field,
    object_lookup,
    object_types,
    rule_change_get,
    rule_change_list,
    rule_kind_for,
)
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    captured_example,
    change_example,
    parse_filters,
    sort_filter,
)
from governance.toolkit.changes import (
    BAD_INPUT,
    FORBIDDEN,
    ChangeOutputSerializer,
    change_response,
)

User = get_user_model()


class RuleChangeListApi(ETagMixin, APIView):
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        status = serializers.ChoiceField(
            choices=ChangeStatus.choices, required=False, help_text=_("Changes in this status.")
        )
        kind = serializers.ChoiceField(
            choices=EditKind.choices,
            required=False,
            help_text=_("Changes with an edit of this kind."),
        )
        object = serializers.CharField(
            required=False,
            help_text=_("Changes that edit this object, as kind:key, e.g. tier:production."),
        )
        author = serializers.SlugRelatedField(
            slug_field="username",
            queryset=User.objects.all(),
            required=False,
            help_text=_("Changes by this author (a username)."),
        )
        since = serializers.DateField(required=False, help_text=_("Created on or after."))
        until = serializers.DateField(required=False, help_text=_("Created on or before."))
        sort = sort_filter(CHANGE_SORTS)

        def validate_object(self, value: str) -> models.Model:
            object_type, _sep, key = value.partition(":")
            found = object_lookup(object_type, key)
            if found is None:
                raise serializers.ValidationError(
                    _("No such object: write kind:key with a kind among %(kinds)s.")
                    % {"kinds": ", ".join(object_types())}
                )
            return found

    @extend_schema(
        operation_id="changes_list",
        examples=[captured_example("changes_list")],
        tags=["changes"],
        summary=_("List rule changes, newest first, each with its edits"),
        parameters=[FilterSerializer],
        responses={200: ChangeOutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        filters = parse_filters(self.FilterSerializer, request)
        if "object" in filters:
            filters["target"] = filters.pop("object")
        changes = rule_change_list(**filters)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(changes, request, view=self)
        assert page is not None
        data = ChangeOutputSerializer(page, many=True, context={"rows": edit_rows(page)}).data
        return paginator.get_paginated_response(data)


class RuleChangeDetailApi(ETagMixin, APIView):
    @extend_schema(
        operation_id="changes_retrieve",
        examples=[captured_example("changes_retrieve")],
        tags=["changes"],
        summary=_("Show a rule change with its edits"),
        responses={200: ChangeOutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, pk: int) -> Response:
        return change_response(rule_change_get(user=request.user, pk=pk))


def _related_value(model: type[models.Model], name: str, value: Any) -> Any:
    """An edit's value from the API's form (slugs, usernames) to the service's (objects)."""
    field = model_field(model, name)
    if field is None or not field.is_relation or value is None:
        return value
    related = field.related_model
    lookup = "username" if related is User else "slug"
    values = value if field.many_to_many else [value]
    if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
        raise serializers.ValidationError(
            _("Name related objects by %(lookup)s.") % {"lookup": lookup}
        )
    found = {
        getattr(obj, lookup): obj
        for obj in related._default_manager.filter(**{f"{lookup}__in": values})
    }
    missing = [item for item in values if item not in found]
    if missing:
        raise serializers.ValidationError(
            _("Unknown %(lookup)s: %(values)s.") % {"lookup": lookup, "values": ", ".join(missing)}
        )
    objects = [found[item] for item in values]
    return objects if field.many_to_many else objects[0]


class EditInputSerializer(serializers.Serializer):
    object_type = serializers.ChoiceField(choices=object_types())
    object = serializers.CharField(help_text=_("A slug, or a quota's id."))
    field = serializers.CharField(
        help_text=_("A field of the object; a pool's “capacity”; a project's “membership”.")
    )
    key = serializers.CharField(
        required=False,
        help_text=_("capacity: the flavor's slug; membership: the user's username."),
    )
    value = serializers.JSONField(
        allow_null=True,
        help_text=_(
            "The new value: a slug (username) for a related object, a list of slugs for a "
            "many-to-many field; a role or null for a membership."
        ),
    )

    class Meta:
        ref_name = "RuleEditInput"

    def validate(self, attrs: dict[str, Any]) -> services.EditSpec:
        target = object_lookup(attrs["object_type"], attrs["object"])
        if target is None:
            raise serializers.ValidationError({"object": _("No such object.")})
        name, key = attrs["field"], None
        kind = rule_kind_for(type(target))
        keyed = kind.keyed.get(name) if kind is not None else None
        if keyed is not None:
            key_model = keyed.key_model
            lookup = "username" if key_model is User else "slug"
            key = key_model._default_manager.filter(**{lookup: attrs.get("key", "")}).first()
            if key is None:
                raise serializers.ValidationError(
                    {"key": _("No such %(lookup)s.") % {"lookup": lookup}}
                )
            value = attrs["value"]
        else:
            try:
                value = _related_value(type(target), name, attrs["value"])
            except serializers.ValidationError as error:
                raise serializers.ValidationError({"value": error.detail}) from None
        return services.EditSpec(target=target, field=name, value=value, key=key)


class RuleChangeProposeApi(APIView):
    class InputSerializer(serializers.Serializer):
        title = serializers.CharField(required=False, allow_blank=True, max_length=200)
        reason = serializers.CharField(help_text=_("Why: recorded with every history row."))
        ticket = serializers.CharField(required=False, allow_blank=True, max_length=300)
        observation_days = serializers.IntegerField(required=False, min_value=0, max_value=366)
        rollback_condition = serializers.CharField(required=False, allow_blank=True)
        rollback_trigger = serializers.CharField(required=False, allow_blank=True, max_length=200)
        confirmation_reason = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text=_("Needed when the plan warns: why it should go ahead anyway."),
        )
        edits = EditInputSerializer(many=True, allow_empty=False)

        class Meta:
            ref_name = "RuleChangeProposeInput"

    @extend_schema(
        operation_id="changes_propose",
        examples=[change_example()],
        tags=["changes"],
        summary=_("Propose a rule change"),
        request=InputSerializer,
        responses={201: ChangeOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN},
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        change = services.rule_change_create(user=selectors.signed_in_user(request), **data)
        return change_response(change, status_code=status.HTTP_201_CREATED)


class NoteInputSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="")

    class Meta:
        ref_name = "RuleChangeNote"


class _DecisionApi(APIView):
    """Approve, reject, withdraw or apply: the change, the user, an optional note."""

    InputSerializer = NoteInputSerializer
    takes_note = True

    def decide(self, **kwargs: Any) -> RuleChange:
        raise NotImplementedError

    def post(self, request: Request, pk: int) -> Response:
        change = rule_change_get(user=request.user, pk=pk)
        kwargs: dict[str, Any] = {}
        if self.takes_note:
            serializer = self.InputSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            kwargs["note"] = serializer.validated_data["note"]
        return change_response(self.decide(change=change, user=request.user, **kwargs))


DECISION_RESPONSES = {200: ChangeOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND}


class RuleChangeApproveApi(_DecisionApi):
    def decide(self, **kwargs: Any) -> RuleChange:
        return services.rule_change_approve(**kwargs)

    @extend_schema(
        operation_id="changes_approve",
        examples=[change_example("Approved", status="approved", approved_by="ops2")],
        tags=["changes"],
        summary=_("Approve a proposed change (never your own)"),
        request=NoteInputSerializer,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RuleChangeRejectApi(_DecisionApi):
    def decide(self, **kwargs: Any) -> RuleChange:
        return services.rule_change_reject(**kwargs)

    @extend_schema(
        operation_id="changes_reject",
        examples=[
            change_example("Rejected", status="rejected", closed_by="ops2", close_note="Not now")
        ],
        tags=["changes"],
        summary=_("Reject a proposed or approved change, with a note"),
        request=NoteInputSerializer,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RuleChangeWithdrawApi(_DecisionApi):
    def decide(self, **kwargs: Any) -> RuleChange:
        return services.rule_change_withdraw(**kwargs)

    @extend_schema(
        operation_id="changes_withdraw",
        examples=[change_example("Withdrawn", status="withdrawn", closed_by="ops")],
        tags=["changes"],
        summary=_("Withdraw a change that is not applied yet"),
        request=NoteInputSerializer,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RuleChangeApplyApi(_DecisionApi):
    takes_note = False

    def decide(self, **kwargs: Any) -> RuleChange:
        return services.rule_change_apply(**kwargs)

    @extend_schema(
        operation_id="changes_apply",
        examples=[
            change_example("Applied", status="applied", approved_by="ops2", applied_by="ops")
        ],
        tags=["changes"],
        summary=_("Apply an approved change: every edit in one transaction (ops)"),
        request=None,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class RuleChangeRollbackApi(APIView):
    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField()
        confirmation_reason = serializers.CharField(required=False, allow_blank=True, default="")
        choices = serializers.DictField(
            child=serializers.ChoiceField(choices=ConflictChoice.choices),
            required=False,
            default=dict,
            help_text=_(
                "For each field a later change touched (by edit id): keep the current value "
                "or restore the old one."
            ),
        )

        class Meta:
            ref_name = "RuleChangeRollbackInput"

        def validate_choices(self, value: dict[str, str]) -> dict[int, str]:
            try:
                return {int(key): choice for key, choice in value.items()}
            except ValueError:
                raise serializers.ValidationError(_("Keys are edit ids.")) from None

    @extend_schema(
        operation_id="changes_rollback",
        examples=[change_example("A rollback", rollback_of=12)],
        tags=["changes"],
        summary=_("Propose a change that rolls an applied change back"),
        request=InputSerializer,
        responses={201: ChangeOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, pk: int) -> Response:
        change = rule_change_get(user=request.user, pk=pk)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rollback = services.rule_change_rollback(
            change=change,
            user=selectors.signed_in_user(request),
            **serializer.validated_data,
        )
        return change_response(rollback, status_code=status.HTTP_201_CREATED)
