"""Persona fixtures and a small, realistic set of rules built through the services.

Personas: ``ops`` (edits rules), ``ops2`` (a second operator, who approves what ``ops``
proposes), ``approver``, ``lead`` (lead of the ``vision`` project), ``member`` (member of
``vision``), ``outsider`` (a member of no project), ``ci_user`` (the service account
``ci-pipeline`` of ``vision``: a member of it that never signs in or decides) and ``ci_token``
(its API token with every scope, as a CI pipeline uses it; ``ci_token.key`` is the secret,
shown once).
"""

import os
import shutil
import warnings
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from django.db import connections
from django.test import Client, override_settings
from rest_framework.test import APIClient

from governance import selectors, services
from governance.models import (
    ApiToken,
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    SiteRole,
    TokenScope,
    User,
)
from tests import ci_labs

REASON = "Test set-up"

# Property tests (hypothesis): CI tries the same examples on every run, so that its verdict
# depends on the code alone and a failure there reproduces; elsewhere each run tries new ones
# (hypothesis' own advice for CI). Loaded here, before the test modules build their settings.
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    hypothesis.settings.load_profile("ci")


def with_terms(values: dict) -> dict:
    """Service keyword arguments with the grant terms among ``values`` gathered into ``terms``."""
    from governance.models import TERM_FIELDS, Terms

    rest = {name: value for name, value in values.items() if name not in TERM_FIELDS}
    return {**rest, "terms": Terms.from_data(values)}


def pytest_configure(config: pytest.Config) -> None:
    """The labs .ci/run builds in the background: their tests run last, and wait for them."""
    config.pluginmanager.register(ci_labs, "arbiter-ci-labs")


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing():
    """Hashing every persona's password with PBKDF2 would dominate the suite's time."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test databases. Before they are dropped, a PostgreSQL session another
    thread or process left connected to one is named in a warning (who, since when, its last
    query) and closed, so the drop does not fail on it and the leak can be found."""
    yield
    with django_db_blocker.unblock():
        left = [row for alias in connections for row in _close_other_sessions(alias)]
    for row in left:
        warnings.warn(f"a database session was left open by the tests: {row}", stacklevel=1)


def _close_other_sessions(alias: str) -> list[str]:
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT application_name, client_addr, backend_start, state, left(query, 300),"
            " pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        rows = cursor.fetchall()
    return [
        f"application {app or '-'} from {addr or 'a local socket'} since {since:%H:%M:%S},"
        f" {state}, last query: {query!r}"
        for app, addr, since, state, query, _closed in rows
    ]


def require_service(name: str, available: bool, why: str) -> None:
    """Skip a test whose service is missing, except in CI, where it must run."""
    if available:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{name} is required in CI but is not available: {why}")
    pytest.skip(f"{name} not available here: {why}")


def shared_dir() -> Path:
    """``../shared`` beside the repository (or beside the folder that holds its worktree): the
    project's trace samples and references, which a clone does not carry. A test that reads it
    skips through ``require_service`` when it is absent (and fails in CI)."""
    base = Path(__file__).resolve().parent.parent
    for folder in base.parents:
        if (folder / "shared").is_dir():
            return folder / "shared"
    return base.parent / "shared"


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _user(username: str, role: str = SiteRole.MEMBER, **extra) -> User:
    return User.objects.create_user(
        username=username,
        password="pw-" + username,
        email=f"{username}@example.com",
        site_role=role,
        first_name=username.capitalize(),
        **extra,
    )


@pytest.fixture
def ops(db) -> User:
    return _user("ops", SiteRole.OPS)


@pytest.fixture
def ops2(db) -> User:
    """A second operator: approves what ``ops`` proposes (no one approves their own change)."""
    return _user("ops2", SiteRole.OPS)


@pytest.fixture
def approver(db) -> User:
    return _user("approver", SiteRole.APPROVER)


@pytest.fixture
def lead(db) -> User:
    return _user("lead")


@pytest.fixture
def member(db) -> User:
    return _user("member")


@pytest.fixture
def outsider(db) -> User:
    return _user("outsider")


@pytest.fixture
def ci_user(world) -> User:
    """The service account of the ``vision`` project (a member of it, nothing more)."""
    account = services.service_account_create(
        project=world.vision, username="ci-pipeline", user=world.ops, reason=REASON
    )
    return account.user


@pytest.fixture
def ci_token(ci_user, world, ops2) -> ApiToken:
    """``ci_user``'s token with every scope; ``.key`` holds the secret (shown once). Minted
    by ops, approved by ops2 (its ``request`` scope needs a second person)."""
    token = services.service_account_token_create(
        account=ci_user.service_account,
        name="CI",
        scopes=TokenScope.values,
        user=world.ops,
        reason=REASON,
    )
    services.api_token_approve(token=token, user=ops2)
    return token


def _second_ops(account) -> User:
    """An ops person not behind ``account`` (made for the purpose when there is none)."""
    behind = selectors.service_account_people(account)
    second = (
        User.objects.filter(site_role=SiteRole.OPS, is_service_account=False, is_active=True)
        .exclude(pk__in=behind)
        .first()
    )
    return second or _user("ops-second", SiteRole.OPS)


def token_for(user: User, *scopes: str) -> str:
    """An ``Authorization`` header value with a new token of ``user`` (a person's personal
    token, or a service account's made by ops) with ``scopes`` (default: every scope)."""
    scopes = scopes or tuple(TokenScope.values)
    if user.is_service_account:
        account = user.service_account
        maker = User.objects.filter(site_role=SiteRole.OPS, is_service_account=False).first()
        assert maker is not None, "a service account's token needs an ops user to make it"
        token = services.service_account_token_create(
            account=account, name="test", scopes=scopes, user=maker, reason=REASON
        )
        if token.approved_at is None:
            services.api_token_approve(token=token, user=_second_ops(account))
        key = token.key
        return f"Bearer {key}"
    else:
        token = services.personal_token_create(user=user, name="test", scopes=scopes)
    return f"Bearer {token.key}"  # type: ignore[attr-defined]  # shown once, never stored


@dataclass
class World:
    ops: User
    a100: GpuFlavor
    h100: GpuFlavor
    training: Pool
    inference: Pool
    production: PriorityTier
    key: PriorityTier
    regular: PriorityTier
    exploratory: PriorityTier
    allowed: PreemptionClass
    cautious: PreemptionClass
    forbidden: PreemptionClass
    vision: Project
    speech: Project
    vision_a100: Quota
    speech_a100: Quota


@pytest.fixture
def world(ops, lead, member) -> World:
    """Two pools, two flavors, four tiers, three preemption classes, two projects."""
    s = services
    kw: dict[str, Any] = {"user": ops, "reason": REASON}
    a100 = s.flavor_create(
        **kw,
        slug="a100-80g",
        name="A100 80G",
        gpu_model="NVIDIA A100",
        memory_gb=80,
        gres_type="a100",
        node_labels={"gpu.example.com/model": "a100"},
    )
    h100 = s.flavor_create(
        **kw,
        slug="h100-80g",
        name="H100 80G",
        gpu_model="NVIDIA H100",
        memory_gb=80,
        gres_type="h100",
    )
    training = s.pool_create(**kw, slug="training", name="Training")
    inference = s.pool_create(**kw, slug="inference", name="Inference")
    s.pool_capacity_set(**kw, pool=training, flavor=a100, gpus=64)
    s.pool_capacity_set(**kw, pool=training, flavor=h100, gpus=32)
    s.pool_capacity_set(**kw, pool=inference, flavor=a100, gpus=16)
    common: dict[str, Any] = {
        "eligibility": "Any project",
        "confirmed_by": "Ops",
        "review_cycle_days": 90,
    }
    exploratory = s.tier_create(
        **kw,
        **common,
        slug="exploratory",
        name="Exploratory",
        score=10,
        scheduler_value=100,
        owner=ops,
    )
    regular = s.tier_create(
        **kw,
        **common,
        slug="regular",
        name="Regular",
        score=40,
        scheduler_value=400,
        owner=ops,
        is_default=True,
    )
    key = s.tier_create(
        **kw,
        **common,
        slug="key",
        name="Key project",
        score=70,
        scheduler_value=700,
        owner=ops,
    )
    production = s.tier_create(
        **kw,
        **common,
        slug="production",
        name="Production service",
        score=95,
        scheduler_value=950,
        owner=ops,
        may_preempt=True,
        preemptible_tiers=[regular, exploratory],
    )
    s.tier_update(
        tier=exploratory,
        **kw,
        data={"aging_after_minutes": 240, "aging_step": 10, "aging_cap": regular},
    )
    allowed = s.preemption_class_create(
        **kw,
        slug="allowed",
        name="Preemptible",
        kind="allowed",
        business_impact="Batch work that restarts from a checkpoint.",
        requires_verified_checkpoint=True,
        max_checkpoint_interval_minutes=30,
    )
    cautious = s.preemption_class_create(
        **kw,
        slug="cautious",
        name="Cautious",
        kind="cautious",
        business_impact="Long runs; preempt only after 2 h.",
        min_runtime_minutes=120,
        max_preemptions_per_day=1,
    )
    forbidden = s.preemption_class_create(
        **kw,
        slug="forbidden",
        name="Never preempt",
        kind="forbidden",
        business_impact="Online serving: preemption is an outage.",
    )
    vision = s.project_create(**kw, slug="vision", name="Vision", tier=key)
    speech = s.project_create(**kw, slug="speech", name="Speech")
    s.membership_set(**kw, project=vision, member=lead, role=ProjectRole.LEAD)
    s.membership_set(**kw, project=vision, member=member, role=ProjectRole.MEMBER)
    vision_a100 = s.quota_create(
        **kw,
        project=vision,
        pool=training,
        flavor=a100,
        guarantee=24,
        borrow_limit=16,
        lending_limit=12,
        fair_share_weight=3,
        preemption_class=cautious,
    )
    speech_a100 = s.quota_create(
        **kw,
        project=speech,
        pool=training,
        flavor=a100,
        guarantee=16,
        preemption_class=allowed,
    )
    return World(
        ops=ops,
        a100=a100,
        h100=h100,
        training=training,
        inference=inference,
        production=production,
        key=key,
        regular=regular,
        exploratory=exploratory,
        allowed=allowed,
        cautious=cautious,
        forbidden=forbidden,
        vision=vision,
        speech=speech,
        vision_a100=vision_a100,
        speech_a100=speech_a100,
    )


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def ops_client(ops) -> Client:
    return login(ops)


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def today() -> date:
    from django.utils import timezone

    return timezone.localdate()


@pytest.fixture(autouse=True)
def _no_api_throttling(settings):
    """Rate limits are off in tests (a suite makes many requests as one user); the tests of
    throttling switch them on with low rates. The counters live in the cache: start empty."""
    from django.core.cache import cache

    settings.ARBITER_API_THROTTLE = False
    cache.clear()


@pytest.fixture(autouse=True)
def _default_language():
    """Every test starts and ends in the default language: a test that renders in Chinese (a
    command, a mail, a thread of the live server) leaves no Chinese behind for the next."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _placement_cache_clear():
    """Placement keeps the compiled rules per process; each test starts from its own rules
    (a rolled-back test database may give the next test the same history ids)."""
    from queues.selectors.placement import placement_cache_clear

    placement_cache_clear()


# Tests that need PostgreSQL's row locks (they skip on SQLite, fail in CI without it).
POSTGRES_MODULES = {
    "test_quota_concurrency.py",
    "test_change_concurrency.py",
    "test_request_approve_concurrency.py",
    "test_token_mint_concurrency.py",
    "test_seed_demo_concurrent.py",
    "test_seed_demo_locks.py",
}


# Modules that share something outside their test database: the Redis broker and its Celery
# workers, the beat lock, files in the work tree or the var/ folder, commands run in a
# subprocess against a database of their own. Under pytest-xdist (``PYTEST_WORKERS=N make test``
# processes) each group below runs in one process, one test after another; everything else
# is spread over the processes.
SHARED_STATE_MODULES = {
    "test_beat_single.py",
    "test_ci_pipelines_doc.py",
    "test_container_image.py",
    "test_health_probes.py",
    "test_readme_commands.py",
    "test_readme_walkthrough.py",
    "test_review_worker.py",
    "test_settings.py",
    "test_task_delivery.py",
    "test_throttle_concurrency.py",
    "test_translations.py",
    "test_upgrade_and_restore.py",
    "test_worker.py",
    "test_worker_lost.py",
}


def xdist_group(item: pytest.Item) -> str | None:
    """The group whose tests must run in one process, or None for a test that runs anywhere.

    The labs and the shared services are one group: a Celery worker's task or a README
    command reaches the same Slurm and Kubernetes labs as the lab tests (SLURM_CONF and the
    lab's env are the run's), so they may not run beside them. The container stack has ports
    and images of its own."""
    if item.get_closest_marker("slurm") or item.get_closest_marker("k8s"):
        return "labs-and-services"
    if item.get_closest_marker("containers"):
        return "containers"
    if item.get_closest_marker("worker") or item.path.name in SHARED_STATE_MODULES:
        return "labs-and-services"
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that need a service, so that ``-m slurm`` / ``-m "not slurm"`` select,
    and keep the tests that share one service in one pytest-xdist process."""
    for item in items:
        if "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
        if item.path.name in POSTGRES_MODULES:
            item.add_marker(pytest.mark.postgres)
        group = xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
