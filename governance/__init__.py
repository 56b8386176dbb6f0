"""Arbiter's core rules and the project wiring (settings, urls, celery)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
