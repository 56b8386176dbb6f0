"""The inbox: its SQL filter agrees with ``approval_blocker`` request by request, and its
count and pages read a fixed number of queries however many requests wait."""

from django.urls import reverse

from approvals import selectors, services
from approvals.models import ApproverRule, RequestStage, UpgradeRequest
from tests.approvals.conftest import HOUR, T0, quota_exception, upgrade
from tests.conftest import token_for


def _waits_for(request: UpgradeRequest, user) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``request`` waits for ``user``: the rule request by request, in Python."""
    if request.stage != RequestStage.SUBMITTED or request.requester_id == user.pk:
        return False
    mine = request.owner_approver_id == user.pk or (
        user.is_ops
        and (
            request.approver_rule == ApproverRule.OPS
            or request.owner_approver_id is None
            or request.approvals_required > 1
        )
    )
    return mine and selectors.approval_blocker(request=request, user=user) is None


def test_the_inbox_holds_what_approval_blocker_lets_each_person_decide(
    world, policies, lead, member, ops, second_ops, approver
):
    quota_exception(world, lead)  # ops decide
    quota_exception(world, ops)  # filed by ops: the other ops decide
    upgrade(world, ops)  # the tier's business owner decides
    upgrade(world, ops, submit=False)  # a draft: nobody yet
    # Production: the owner and one of ops. Ops approved first: the other ops wait.
    by_ops = upgrade(world, lead, project=world.vision, tier=world.production)
    services.request_approve(request=by_ops, user=ops, now=T0 - HOUR)
    # The owner approved first: the seat of ops is free.
    by_owner = upgrade(world, lead, project=world.vision, tier=world.production)
    services.request_approve(request=by_owner, user=approver, now=T0 - HOUR)
    untouched = upgrade(world, lead, project=world.vision, tier=world.production)
    decided = quota_exception(world, lead, extra_gpus=2)
    services.request_approve(request=decided, user=second_ops, now=T0 - HOUR)

    requests = list(UpgradeRequest.objects.prefetch_related("approvals"))
    for user in (ops, second_ops, approver, lead, member):
        expected = sorted(
            (r for r in requests if _waits_for(r, user)), key=lambda r: (r.submitted_at, r.pk)
        )
        assert list(selectors.inbox(user=user)) == expected, user
        assert selectors.inbox_count(user=user) == len(expected)
    # The cases above are all there: each person waits on some and not on others.
    assert by_owner in selectors.inbox(user=second_ops)
    assert by_ops not in selectors.inbox(user=second_ops)
    assert by_ops in selectors.inbox(user=approver) and untouched in selectors.inbox(user=ops)
    assert decided not in selectors.inbox(user=ops)


def _half_approved(world, lead):  # type: ignore[no-untyped-def]
    """A production upgrade its business owner approved: it waits for ops."""
    half = upgrade(world, lead, project=world.vision, tier=world.production)
    services.request_approve(request=half, user=half.owner_approver, now=T0 - HOUR)


def test_the_inbox_api_and_counts_cost_a_fixed_number_of_queries(
    world, policies, lead, ops, api_client, django_assert_num_queries
):
    api_client.credentials(HTTP_AUTHORIZATION=token_for(ops))
    _half_approved(world, lead)
    api_client.get(reverse("api_inbox"))  # the token's first use records it (not counted)
    # token with its user, the count, the page, approvals, approvers
    with django_assert_num_queries(5):
        first = api_client.get(reverse("api_inbox")).json()
    # token with its user, unread notifications, the inbox's count
    with django_assert_num_queries(3):
        counts = api_client.get(reverse("api_notification_counts")).json()
    assert counts["inbox"] == first["count"] == 1
    for index in range(4):
        _half_approved(world, lead)
        quota_exception(world, lead, extra_gpus=index + 2)
    with django_assert_num_queries(5):
        more = api_client.get(reverse("api_inbox"), {"limit": 5}).json()
    assert more["count"] == 9 and len(more["results"]) == 5
    with django_assert_num_queries(3):
        assert api_client.get(reverse("api_notification_counts")).json()["inbox"] == 9
