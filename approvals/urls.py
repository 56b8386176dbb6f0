"""Routes of approvals: pages and API (included at the site root)."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
