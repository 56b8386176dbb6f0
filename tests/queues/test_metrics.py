"""Prometheus metrics at /metrics: who may scrape, and what the figures say."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from queues.models import EventKind
from queues.services.workload import JobEvent, events_ingest

URL = "/metrics"


@pytest.fixture
def waiting(world):
    now = timezone.now()
    events_ingest(
        events=[
            JobEvent(
                source="hpc",
                event_id="1:s",
                job_id="1",
                time=now - timedelta(minutes=30),
                kind=EventKind.SUBMITTED,
                project=world.vision,
                tier=world.key,
                gpus=2,
            ),
            JobEvent(
                source="hpc",
                event_id="1:p",
                job_id="1",
                time=now - timedelta(minutes=29),
                kind=EventKind.PENDING,
                reason="QOSGrpGRES",
            ),
        ]
    )
    return world


@pytest.mark.parametrize(
    "token, networks, header, address, allowed",
    [
        ("", [], "", "127.0.0.1", False),
        ("s3cret", [], "Bearer s3cret", "10.1.2.3", True),
        ("s3cret", [], "Bearer wrong", "10.1.2.3", False),
        ("s3cret", [], "s3cret", "10.1.2.3", False),
        ("", ["10.0.0.0/8"], "", "10.1.2.3", True),
        ("", ["10.0.0.0/8"], "", "192.168.1.1", False),
        ("", ["not-a-network"], "", "10.1.2.3", False),
        ("", ["127.0.0.1/32"], "Bearer anything", "127.0.0.1", True),
    ],
)
def test_who_may_scrape(client, db, token, networks, header, address, allowed):
    with override_settings(ARBITER_METRICS_TOKEN=token, ARBITER_METRICS_ALLOWED_NETWORKS=networks):
        extra = {"HTTP_AUTHORIZATION": header} if header else {}
        response = client.get(URL, REMOTE_ADDR=address, **extra)
    assert response.status_code == (200 if allowed else 403)


@override_settings(ARBITER_METRICS_TOKEN="t")
def test_the_figures(client, waiting):
    text = client.get(URL, HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert (
        'arbiter_pending_jobs{category="quota",cluster="hpc",project="vision",tier="key"} 1.0'
        in text
    )
    oldest = 'arbiter_oldest_pending_seconds{tier="key"}'
    line = next(row for row in text.splitlines() if row.startswith(oldest))
    assert 1790 <= float(line.split()[-1]) <= 1900
    assert "arbiter_open_alerts" in text and "arbiter_active_grants" in text
    assert "arbiter_last_collection_success_timestamp_seconds" in text
