"""The Celery application. Configuration comes from Django settings (``CELERY_*``).

``SingleBeatScheduler`` is beat's scheduler (``CELERY_BEAT_SCHEDULER``): however many beat
processes run (a second one started by mistake, two replicas during a rolling update), only
the one holding a lock in Redis sends the schedule's tasks; the others wait and take over when
the holder stops or is lost.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.beat import PersistentScheduler
from celery.utils.log import get_logger

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

app = Celery("arbiter")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = get_logger(__name__)

# Renew the lock's expiry if (and only if) this holder still has it.
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


class SingleBeatScheduler(PersistentScheduler):
    """Beat's scheduler with a single-instance guard: a Redis lock (``SET NX PX``, renewed on
    every tick, released on a clean stop, expiring ``beat_lock_seconds`` after a lost holder).

    The holder records when it last sent each entry (a Redis hash beside the lock); a process
    taking over starts from those times, so an entry the old holder had just sent is not sent
    again, and one it was about to send is not skipped. With a broker other than Redis (the
    demo's files) there is one machine and no lock: beat runs as Celery's own.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._holding = False
        self._redis: Any = None
        super().__init__(*args, **kwargs)

    # --- the lock ----------------------------------------------------------------------
    @property
    def lock_key(self) -> str:
        return str(self.app.conf.get("beat_lock_key") or "arbiter:beat:lock")

    @property
    def lock_ms(self) -> int:
        return int(float(self.app.conf.get("beat_lock_seconds") or 60) * 1000)

    def _client(self) -> Any:
        url = str(self.app.conf.broker_url or "")
        if not url.startswith(("redis://", "rediss://")):
            return None
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        return self._redis

    def _hold(self) -> bool:
        """Whether this process holds the lock now (renewing or taking it)."""
        client = self._client()
        if client is None:
            return True
        try:
            if self._holding and client.eval(_RENEW, 1, self.lock_key, self._token, self.lock_ms):
                return True
            taken = bool(client.set(self.lock_key, self._token, nx=True, px=self.lock_ms))
        except Exception as error:  # Redis down: send nothing rather than risk twice
            logger.warning("beat: the single-instance lock could not be checked: %s", error)
            self._holding = False
            return False
        if taken:
            logger.info(
                "beat: holding the single-instance lock %s (%s)", self.lock_key, self._token
            )
            self._take_over(client)
        elif self._holding:
            logger.warning("beat: lost the single-instance lock %s; standing by", self.lock_key)
        self._holding = taken
        return taken

    def _take_over(self, client: Any) -> None:
        """Start each entry from the time the previous holder last sent it."""
        sent = client.hgetall(f"{self.lock_key}:last-run")
        for raw_name, raw_at in sent.items():
            entry = self.schedule.get(raw_name.decode())
            if entry is not None:
                at = datetime.fromtimestamp(float(raw_at), tz=UTC)
                if entry.last_run_at is None or at.timestamp() > entry.last_run_at.timestamp():
                    entry.last_run_at = at
        self._heap = None  # rebuilt from the entries on the next tick

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self._hold():
            # Standing by: try again well before a lost holder's lock expires.
            return min(float(self.max_interval), self.lock_ms / 3000)
        return float(super().tick(*args, **kwargs))

    def reserve(self, entry: Any) -> Any:
        new_entry = super().reserve(entry)
        client = self._client()
        if client is not None:
            sent_at = new_entry.last_run_at or datetime.now(tz=UTC)
            client.hset(f"{self.lock_key}:last-run", entry.name, sent_at.timestamp())
        return new_entry

    def close(self) -> None:
        try:
            client = self._client()
            if client is not None and self._holding:
                client.eval(_RELEASE, 1, self.lock_key, self._token)
                logger.info("beat: released the single-instance lock %s", self.lock_key)
        except Exception as error:  # the lock then expires by itself
            logger.warning("beat: the single-instance lock was not released: %s", error)
        finally:
            super().close()
