from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from governance import selectors
from governance.models import (
    ChangeStatus,
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    Project,
    Quota,
    RuleChange,
    SiteRole,
    User,
)
from governance.services.demo import DEMO_PASSWORD, DEMO_REASON

GOVERNED = [
    GpuFlavor,
    Pool,
    PoolCapacity,
    PriorityTier,
    PreemptionClass,
    Project,
    Membership,
    Quota,
]


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _counts() -> dict[str, int]:
    counts = {model.__name__: model._default_manager.count() for model in [User, *GOVERNED]}
    counts.update(
        {f"{model.__name__} history": model.history.count() for model in GOVERNED}  # type: ignore[attr-defined]
    )
    return counts


@pytest.mark.django_db
def test_seed_demo_twice_creates_everything_once(capsys):
    call_command("seed_demo")
    first = _counts()
    assert "Demo data loaded" in capsys.readouterr().out

    call_command("seed_demo")

    assert _counts() == first
    assert "nothing to add" in capsys.readouterr().out
    assert first["User"] >= 19
    assert first["Project"] == 12
    assert first["Pool"] == 2
    assert first["GpuFlavor"] == 3
    assert first["PriorityTier"] == 4
    assert set(PreemptionClass.objects.values_list("kind", flat=True)) == set(PreemptionKind.values)


@pytest.mark.django_db
def test_seed_demo_keeps_what_exists(ops):
    call_command("seed_demo")

    ops.refresh_from_db()
    assert ops.check_password("pw-ops")  # an existing user is not touched
    assert not User.objects.filter(username="ops").exclude(pk=ops.pk).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("username", "site_role"),
    [
        ("ops", SiteRole.OPS),
        ("ops2", SiteRole.OPS),
        ("approver", SiteRole.APPROVER),
        ("lead", SiteRole.MEMBER),
        ("member", SiteRole.MEMBER),
    ],
)
def test_demo_users_log_in_with_the_demo_password(username, site_role):
    call_command("seed_demo")

    # Through the sign-in form, as people do (the lockout backend needs the request).
    client = Client()
    response = client.post(reverse("login"), {"username": username, "password": DEMO_PASSWORD})
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(User.objects.get(username=username).pk)
    assert User.objects.get(username=username).site_role == site_role


@pytest.mark.django_db
def test_demo_lead_and_member_share_a_project():
    call_command("seed_demo")

    lead = Membership.objects.get(user__username="lead")
    member = Membership.objects.filter(user__username="member", project=lead.project).get()
    assert lead.role == "lead"
    assert member.role == "member"


@pytest.mark.django_db
def test_demo_pools_are_mostly_but_not_over_committed():
    call_command("seed_demo")

    usage = selectors.pool_usage()
    assert len(usage) == 4
    for use in usage:
        assert 0.75 * use.capacity <= use.committed < use.capacity, use


@pytest.mark.django_db
def test_demo_tiers_are_complete_and_one_is_due_for_review(today):
    call_command("seed_demo")

    tiers = {tier.slug: tier for tier in PriorityTier.objects.all()}
    assert [tier.slug for tier in PriorityTier.objects.filter(is_default=True)] == ["regular"]
    production = tiers["production"]
    assert production.may_preempt
    assert {t.slug for t in production.preemptible_tiers.all()} == {"regular", "exploratory"}
    assert tiers["exploratory"].aging_cap == tiers["regular"]
    for tier in tiers.values():
        assert tier.owner.email
        assert tier.eligibility and tier.confirmed_by
        assert tier.next_review_on == tier.last_reviewed_on + timedelta(tier.review_cycle_days)
    due = list(selectors.tiers_due_for_review(today=today))
    assert [tier.slug for tier in due] == ["key-project"]
    assert today < due[0].next_review_on <= today + timedelta(days=14)


@pytest.mark.django_db
def test_every_demo_row_has_history_by_ops_with_the_demo_reason():
    call_command("seed_demo")

    ops = User.objects.get(username="ops")
    for model in GOVERNED:
        history = model.history.filter(rule_change__isnull=True)  # the demo's own changes aside
        assert history.exists(), model
        assert set(history.values_list("history_user", flat=True)) == {ops.pk}, model
        assert set(history.values_list("history_change_reason", flat=True)) == {DEMO_REASON}, model


@pytest.mark.django_db
def test_demo_timeline_holds_past_changes_one_rolled_back():
    call_command("seed_demo")

    statuses = sorted(RuleChange.objects.values_list("status", flat=True))
    assert statuses == ["applied", "applied", "applied", "proposed", "rolled_back"]
    rollback = RuleChange.objects.get(rollback_of__isnull=False)
    assert rollback.rollback_of.status == ChangeStatus.ROLLED_BACK
    assert PriorityTier.objects.get(slug="exploratory").aging_after_minutes == 240
    for change in RuleChange.objects.filter(status=ChangeStatus.APPLIED):
        assert change.approved_by != change.author
        assert PriorityTier.history.filter(rule_change=change).exists() or (
            Quota.history.filter(rule_change=change).exists()
            or PoolCapacity.history.filter(rule_change=change).exists()
        )
    assert list(
        selectors.quotas_due_for_review(today=timezone.localdate()).values_list(
            "project__slug", flat=True
        )
    ) == ["sandbox"]


@pytest.mark.django_db
def test_demo_changes_are_spread_over_the_past_with_their_own_people():
    now = timezone.now()
    call_command("seed_demo")

    changes = list(RuleChange.objects.order_by("proposed_at"))
    assert len({change.proposed_at.date() for change in changes}) == len(changes)
    assert len({change.created_at.date() for change in changes}) == len(changes)
    for change in changes:
        assert now - timedelta(days=90) < change.created_at < now - timedelta(days=1)
        assert change.created_at == change.proposed_at
        if change.applied_at:
            assert change.proposed_at < change.approved_at < change.applied_at < now
            # The change's own history rows carry the moment and the person of each step.
            dates = set(change.history.values_list("history_date", flat=True))
            assert {change.proposed_at, change.approved_at, change.applied_at} <= dates
    assert len({change.author_id for change in changes}) > 1
    assert len({change.applied_by_id for change in changes if change.applied_by_id}) > 1
    # The rules were set up before the first change.
    first = Quota.history.earliest("history_date").history_date
    assert first < changes[0].proposed_at


@pytest.mark.django_db
def test_the_readme_quota_can_be_changed_without_an_observation_warning():
    """The README's walk-through: no demo change is still observed, so editing the Vision
    quota of the training pool proposes at once, without a confirmation."""
    from governance.selectors.changes.plan import rule_change_warnings
    from governance.services import EditSpec, rule_change_create

    call_command("seed_demo")
    ops = User.objects.get(username="ops")
    quota = Quota.objects.get(
        project__slug="vision", pool__slug="training", flavor__slug="a100-80g"
    )

    change = rule_change_create(
        user=ops,
        reason="Model v3 needs more A100",
        edits=[EditSpec(target=quota, field="guarantee", value=28)],
    )

    assert change.status == ChangeStatus.PROPOSED
    assert change.warnings == []
    assert rule_change_warnings(change=change, now=timezone.now()) == []
