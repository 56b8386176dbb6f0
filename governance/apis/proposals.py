"""Rules through the API as proposed rule changes: the same change sets the pages make.

``POST`` on a rule list proposes creating one (an edit of its ``exists`` pseudo-field),
``PATCH`` on a rule proposes a change of the fields given, ``DELETE`` proposes deleting it,
and ``POST``/``DELETE`` on a project's members propose a membership edit. Each answers 201
with the proposed change (as ``changes/<id>/`` shows it); someone else approves it and ops
apply it through the change endpoints. The body is the change's own fields (``reason``,
required; ``title``, ``ticket``, ``observation_days``, ``rollback_condition``,
``confirmation_reason``) next to the rule's fields, as the rule's read API names them:
related objects by slug, people by username, a many-to-many field as a list of slugs.
"""

from collections.abc import Callable
from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance import selectors, services
from governance.models import (
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    RuleChange,
    User,
)
from governance.models.limits import whole_number_max, whole_number_message
from governance.selectors.changes import RuleKind, rule_kind_for
from governance.services.changes import MEMBERSHIP
from governance.toolkit.api import NOT_FOUND, change_example
from governance.toolkit.changes import (
    BAD_INPUT,
    FORBIDDEN,
    ChangeOutputSerializer,
    change_response,
)

PROPOSED = OpenApiResponse(
    response=ChangeOutputSerializer,
    description=_(
        "The proposed rule change: applied once someone else approves it and ops apply it."
    ),
)
PROPOSAL_RESPONSES = {201: PROPOSED, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND}
META_FIELDS = (
    "reason",
    "title",
    "ticket",
    "observation_days",
    "rollback_condition",
    "rollback_trigger",
    "confirmation_reason",
)


def _meta_fields() -> dict[str, serializers.Field]:
    return {
        "reason": serializers.CharField(
            max_length=services.REASON_MAX_LENGTH,
            help_text=_("Why: recorded with the change and every history row."),
        ),
        "title": serializers.CharField(
            max_length=200, required=False, allow_blank=True, default=""
        ),
        "ticket": serializers.CharField(
            max_length=300, required=False, allow_blank=True, default=""
        ),
        "observation_days": serializers.IntegerField(
            min_value=0, max_value=366, required=False, allow_null=True, default=None
        ),
        "rollback_condition": serializers.CharField(
            max_length=2000, required=False, allow_blank=True, default=""
        ),
        "rollback_trigger": serializers.CharField(
            max_length=200,
            required=False,
            allow_blank=True,
            default="",
            help_text=_(
                "The rollback condition as a replay evaluates it, e.g. "
                "“p90 wait tier training > 30 min” (docs/replay.md)."
            ),
        ),
        "confirmation_reason": serializers.CharField(
            max_length=1000,
            required=False,
            allow_blank=True,
            default="",
            help_text=_("Needed when the plan warns: why it should go ahead anyway."),
        ),
    }


class _RuleFieldsSerializer(serializers.ModelSerializer):
    """A rule's fields as the API names them: related objects by slug, people by username."""

    serializer_related_field = serializers.SlugRelatedField

    def build_relational_field(self, field_name: str, relation_info: Any) -> Any:
        field_class, kwargs = super().build_relational_field(field_name, relation_info)
        kwargs["slug_field"] = "username" if relation_info.related_model is User else "slug"
        return field_class, kwargs

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The model's own checks run in the service (at proposal, by the dry run).
        return attrs

    def get_validators(self) -> list[Any]:
        return []


def _field_kwargs(model: type[models.Model], name: str, required: set[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"required": name in required, "validators": []}
    field = model._meta.get_field(name)
    if isinstance(field, models.IntegerField):
        kwargs["max_value"] = whole_number_max(name)
        kwargs["error_messages"] = {"max_value": whole_number_message(name)}
    return kwargs


def rule_input_serializer(
    model: type[models.Model], fields: tuple[str, ...], *, ref_name: str, partial: bool
) -> type[serializers.ModelSerializer]:
    """The input of a proposal about ``model``: the change's fields and ``fields``."""
    required = set() if partial else set(_kind(model).required_fields)
    meta = type(
        "Meta",
        (),
        {
            "model": model,
            "fields": (*META_FIELDS, *fields),
            "ref_name": ref_name,
            "extra_kwargs": {name: _field_kwargs(model, name, required) for name in fields},
        },
    )
    return type(  # type: ignore[return-value]
        ref_name + "Serializer", (_RuleFieldsSerializer,), {**_meta_fields(), "Meta": meta}
    )


def _split(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = {name: data.pop(name) for name in META_FIELDS if name in data}
    if meta.get("observation_days") is None:
        meta.pop("observation_days", None)
    return meta, data


def _proposed(change: RuleChange) -> Response:
    return change_response(change, status_code=status.HTTP_201_CREATED)


def _kind(model: type[models.Model]) -> RuleKind:
    kind = rule_kind_for(model)
    assert kind is not None, model
    return kind


def editable_fields(model: type[models.Model]) -> tuple[str, ...]:
    """The fields a ``PATCH`` proposes changing (keyed fields have their own operations)."""
    return tuple(_kind(model).fields)


def propose_create(model: type[models.Model], *, tag: str) -> Callable[..., Response]:
    """A ``post`` for a rule list: propose creating a ``model``."""
    fields = _kind(model).snapshot_fields
    name = model.__name__
    input_serializer = rule_input_serializer(
        model, fields, ref_name=f"{name}CreateProposal", partial=False
    )

    @extend_schema(
        operation_id=f"{tag.replace('-', '_')}_create",
        tags=[tag],
        summary=_("Propose creating one (a rule change someone else approves)"),
        request=input_serializer,
        responses=PROPOSAL_RESPONSES,
        examples=[
            OpenApiExample("Create", request_only=True, value=CREATE_EXAMPLES[model]),
            change_example("The proposed creation"),
        ],
    )
    def post(self: Any, request: Request) -> Response:
        serializer = input_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        meta, data = _split(dict(serializer.validated_data))
        return _proposed(
            services.rule_object_propose_create(
                user=selectors.signed_in_user(request), model=model, data=data, **meta
            )
        )

    return post


def propose_edit(
    model: type[models.Model],
    get: Callable[..., models.Model],
    *,
    tag: str,
    key: str,
) -> Callable[..., Response]:
    """A ``patch`` for a rule: propose a change of the fields given."""
    fields = editable_fields(model)
    input_serializer = rule_input_serializer(
        model, fields, ref_name=f"{model.__name__}EditProposal", partial=True
    )

    @extend_schema(
        operation_id=f"{tag.replace('-', '_')}_partial_update",
        tags=[tag],
        summary=_("Propose a change of the fields given (a rule change someone else approves)"),
        request=input_serializer,
        responses=PROPOSAL_RESPONSES,
        examples=[
            OpenApiExample("Edit", request_only=True, value=EDIT_EXAMPLES[model]),
            change_example(),
        ],
    )
    def patch(self: Any, request: Request, **kwargs: Any) -> Response:
        obj = get(user=request.user, for_edit=True, **{key: kwargs[key]})
        serializer = input_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        meta, data = _split(dict(serializer.validated_data))
        if not data:
            raise serializers.ValidationError(
                {"non_field_errors": [_("Give at least one field to change.")]}
            )
        return _proposed(
            services.rule_object_propose_update(
                obj=obj, user=selectors.signed_in_user(request), data=data, **meta
            )
        )

    return patch


def _meta_serializer(ref_name: str) -> type[serializers.Serializer]:
    return type(  # type: ignore[return-value]
        ref_name + "Serializer",
        (serializers.Serializer,),
        {**_meta_fields(), "Meta": type("Meta", (), {"ref_name": ref_name})},
    )


DELETE_EXAMPLE = OpenApiExample(
    "Delete", request_only=True, value={"reason": "Retired with the old cluster (OPS-1234)."}
)


def propose_delete(
    model: type[models.Model], get: Callable[..., models.Model], *, tag: str, key: str
) -> Callable[..., Response]:
    """A ``delete`` for a rule: propose deleting it (refused while anything uses it)."""
    input_serializer = _meta_serializer(f"{model.__name__}DeleteProposal")

    @extend_schema(
        operation_id=f"{tag.replace('-', '_')}_destroy",
        tags=[tag],
        summary=_("Propose deleting it (refused while anything still uses it)"),
        request=input_serializer,
        responses=PROPOSAL_RESPONSES,
        examples=[DELETE_EXAMPLE, change_example("The proposed deletion")],
    )
    def delete(self: Any, request: Request, **kwargs: Any) -> Response:
        obj = get(user=request.user, for_edit=True, **{key: kwargs[key]})
        serializer = input_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        meta, _data = _split(dict(serializer.validated_data))
        return _proposed(
            services.rule_object_propose_delete(
                obj=obj, user=selectors.signed_in_user(request), **meta
            )
        )

    return delete


# --- examples -------------------------------------------------------------------------------

REASON = "Model v3 needs more A100 until March (OPS-1234)."
CREATE_EXAMPLES: dict[type[models.Model], dict[str, Any]] = {
    Project: {"reason": REASON, "slug": "robotics", "name": "Robotics", "tier": "regular"},
    GpuFlavor: {
        "reason": REASON,
        "slug": "l40s",
        "name": "L40S",
        "gpu_model": "NVIDIA L40S",
        "memory_gb": 48,
        "gres_type": "l40s",
    },
    Pool: {"reason": REASON, "slug": "lab", "name": "Lab", "parent": "training"},
    PriorityTier: {
        "reason": REASON,
        "slug": "urgent",
        "name": "Urgent",
        "score": 90,
        "scheduler_value": 9000,
        "owner": "approver",
        "eligibility": "Incidents in production.",
        "confirmed_by": "The on-call lead.",
        "review_cycle_days": 90,
    },
    PreemptionClass: {
        "reason": REASON,
        "slug": "checkpointed",
        "name": "Checkpointed",
        "kind": "cautious",
        "business_impact": "Loses up to 30 minutes of work.",
        "requires_verified_checkpoint": True,
    },
    Quota: {
        "reason": REASON,
        "project": "vision",
        "pool": "training",
        "flavor": "a100-80g",
        "guarantee": 8,
        "preemption_class": "cautious",
    },
}
EDIT_EXAMPLES: dict[type[models.Model], dict[str, Any]] = {
    Project: {"reason": REASON, "tier": "key"},
    GpuFlavor: {"reason": REASON, "gres_type": "a100"},
    Pool: {"reason": REASON, "description": "The A100 nodes in hall B."},
    PriorityTier: {"reason": REASON, "max_gpus_per_job": 48},
    PreemptionClass: {"reason": REASON, "min_runtime_minutes": 30},
    Quota: {"reason": REASON, "guarantee": 28, "ticket": "OPS-1234"},
}


# --- memberships ----------------------------------------------------------------------------


class MembershipOutputSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    name = serializers.CharField(source="user.get_full_name")
    role = serializers.ChoiceField(choices=ProjectRole.choices)

    class Meta:
        ref_name = "Membership"


class MembershipSetInputSerializer(serializers.Serializer):
    username = serializers.SlugRelatedField(
        slug_field="username", queryset=User.objects.all(), help_text=_("Who (a username).")
    )
    role = serializers.ChoiceField(choices=ProjectRole.choices)

    class Meta:
        ref_name = "MembershipSetProposal"

    def get_fields(self) -> dict[str, serializers.Field]:
        return {**_meta_fields(), **super().get_fields()}


MembershipRemoveInputSerializer = _meta_serializer("MembershipRemoveProposal")


def membership_edit(
    request: Request, *, project: Project, member: User, role: str | None, meta: dict[str, Any]
) -> Response:
    meta, _rest = _split(meta)
    edit = services.EditSpec(target=project, field=MEMBERSHIP, key=member, value=role)
    return _proposed(
        services.rule_change_create(user=selectors.signed_in_user(request), edits=[edit], **meta)
    )


__all__ = [
    "CREATE_EXAMPLES",
    "EDIT_EXAMPLES",
    "PROPOSAL_RESPONSES",
    "MembershipOutputSerializer",
    "MembershipRemoveInputSerializer",
    "MembershipSetInputSerializer",
    "membership_edit",
    "propose_create",
    "propose_delete",
    "propose_edit",
]
