"""Forms of the rule pages. They parse and check input; the services make the change.

Every form asks for a reason: it is stored with the history row of the change. The model
forms never ``save()``: a view passes ``service_data()`` to the service, and attaches the
service's ``ValidationError`` back to the form with ``add_service_error()``.

The forms live in modules named after the pages they serve: ``base`` (what every rule form
shares), ``rules`` (each rule kind's pages), ``changes`` (a rule change's pages and a review),
``accounts``, ``filters`` (the list filters) and ``tokens``. The package re-exports every
public name of them.
"""

from .accounts import NewPasswordForm, PasswordLinkForm
from .base import ReasonForm, RuleForm, ServiceErrorsMixin, active_users, reason_field
from .changes import ChangeNoteForm, ReviewForm, RollbackForm, RuleChangeMetaForm
from .filters import (
    ChangeFilterForm,
    FlavorFilterForm,
    ListFilterForm,
    LookupField,
    PersonFilterForm,
    PoolFilterForm,
    PreemptionClassFilterForm,
    ProjectFilterForm,
    QuotaFilterForm,
    TierFilterForm,
    UserLookupField,
    project_lookup_field,
    user_lookup_field,
)
from .rules import (
    FlavorCreateForm,
    FlavorForm,
    MembershipRemoveForm,
    MembershipSetForm,
    PoolCapacityForm,
    PoolCreateForm,
    PoolForm,
    PreemptionClassCreateForm,
    PreemptionClassForm,
    ProjectCreateForm,
    ProjectForm,
    QuotaCreateForm,
    QuotaForm,
    TierCreateForm,
    TierForm,
    UserAccessForm,
)
from .tokens import PersonalTokenForm, ServiceAccountForm, ServiceAccountTokenForm

__all__ = [
    "ChangeFilterForm",
    "ChangeNoteForm",
    "FlavorCreateForm",
    "FlavorFilterForm",
    "FlavorForm",
    "ListFilterForm",
    "LookupField",
    "MembershipRemoveForm",
    "MembershipSetForm",
    "NewPasswordForm",
    "PasswordLinkForm",
    "PersonFilterForm",
    "PersonalTokenForm",
    "PoolCapacityForm",
    "PoolCreateForm",
    "PoolFilterForm",
    "PoolForm",
    "PreemptionClassCreateForm",
    "PreemptionClassFilterForm",
    "PreemptionClassForm",
    "ProjectCreateForm",
    "ProjectFilterForm",
    "ProjectForm",
    "QuotaCreateForm",
    "QuotaFilterForm",
    "QuotaForm",
    "ReasonForm",
    "ReviewForm",
    "RollbackForm",
    "RuleChangeMetaForm",
    "RuleForm",
    "ServiceAccountForm",
    "ServiceAccountTokenForm",
    "ServiceErrorsMixin",
    "TierCreateForm",
    "TierFilterForm",
    "TierForm",
    "UserAccessForm",
    "UserLookupField",
    "active_users",
    "project_lookup_field",
    "reason_field",
    "user_lookup_field",
]
