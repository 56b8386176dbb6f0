"""The requests API, under ``/api/v1/``: one ``APIView`` per operation.

Reads: ``requests/`` (filters), ``requests/<id>/``, ``inbox/`` and ``notifications/counts/``.
Writes: ``requests/create/`` and ``requests/<id>/{submit,withdraw,approve,reject,revoke}/``.
A write parses its body with a nested ``InputSerializer`` (400 with the field's message),
calls the service (a ``ValidationError`` is a 400 naming the field, a ``PermissionDenied``
a 403, e.g. for approving one's own request) and answers with the request as
``RequestDetailApi`` shows it.

The package re-exports every public name it held as one module.
"""

from .grants import (
    GRANT_EXAMPLE,
    GrantDetailApi,
    GrantListApi,
    GrantOutputSerializer,
    ProjectGrantListApi,
)
from .requests import (
    FORBIDDEN,
    InboxApi,
    InboxOutputSerializer,
    NotificationCountsApi,
    RequestDetailApi,
    RequestDetailOutputSerializer,
    RequestListApi,
    RequestOutputSerializer,
)
from .writes import (
    IDEMPOTENCY_KEY,
    RequestApproveApi,
    RequestCreateApi,
    RequestRejectApi,
    RequestRevokeApi,
    RequestSubmitApi,
    RequestWithdrawApi,
    idempotent,
)

__all__ = [
    "FORBIDDEN",
    "GRANT_EXAMPLE",
    "IDEMPOTENCY_KEY",
    "GrantDetailApi",
    "GrantListApi",
    "GrantOutputSerializer",
    "InboxApi",
    "InboxOutputSerializer",
    "NotificationCountsApi",
    "ProjectGrantListApi",
    "RequestApproveApi",
    "RequestCreateApi",
    "RequestDetailApi",
    "RequestDetailOutputSerializer",
    "RequestListApi",
    "RequestOutputSerializer",
    "RequestRejectApi",
    "RequestRevokeApi",
    "RequestSubmitApi",
    "RequestWithdrawApi",
    "idempotent",
]
