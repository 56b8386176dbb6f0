"""Requests for priority upgrades and urgent exceptions, their approvals and notifications.

A request is filed by a project lead (or a project's CI pipeline), carries its evidence and
a time box, and is decided by the approvers its ``ApprovalPolicy`` names. An approved
request becomes a ``governance.Grant``; from then on the request's state follows the grant's
(scheduled → active → expired / revoked). Every write goes through ``approvals.services``.

The models live in modules named after what they hold: ``vocabulary`` (kinds, stages,
states, actions and ``grant_summary``), ``policies``, ``requests``, ``decisions`` (a
request's timeline and its approvers' decisions), ``notifications`` and ``idempotency``.
The package imports every model, so that Django finds them, and re-exports every public
name (and ``TIER_KINDS``, the kinds of request that name a tier).
"""

from governance.models import TIER_KINDS

from .decisions import Approval, Decision, EventAction, RequestEvent
from .idempotency import IdempotencyKey
from .notifications import Notification, NotificationEvent
from .policies import ApprovalPolicy
from .requests import UpgradeRequest, UpgradeRequestQuerySet
from .vocabulary import (
    FINAL_STATES,
    GRANTED_STATES,
    STATE_BADGES,
    ApproverRule,
    RequestAction,
    RequestKind,
    RequestStage,
    RequestState,
    grant_summary,
    state_at,
)

__all__ = [
    "FINAL_STATES",
    "GRANTED_STATES",
    "STATE_BADGES",
    "TIER_KINDS",
    "Approval",
    "ApprovalPolicy",
    "ApproverRule",
    "Decision",
    "EventAction",
    "IdempotencyKey",
    "Notification",
    "NotificationEvent",
    "RequestAction",
    "RequestEvent",
    "RequestKind",
    "RequestStage",
    "RequestState",
    "UpgradeRequest",
    "UpgradeRequestQuerySet",
    "grant_summary",
    "state_at",
]
