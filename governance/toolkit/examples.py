"""The schema's examples: a proposed change, a page of rows, a response, and the examples
captured from the demo data (``examples.json``)."""

import json
from pathlib import Path
from typing import Any

from drf_spectacular.utils import OpenApiExample

# --- examples shared by the schema's operations ---------------------------------------------

CHANGE_EXAMPLE_VALUE: dict[str, Any] = {
    "id": 14,
    "title": "Vision · Training · A100 80G: guarantee",
    "reason": "Model v3 needs more A100 until March",
    "ticket": "OPS-1234",
    "status": "proposed",
    "observation_days": 7,
    "rollback_condition": "",
    "warnings": [],
    "confirmation_reason": "",
    "rollback_of": None,
    "author": "ops",
    "created_at": "2026-12-01T08:00:00Z",
    "proposed_by": "ops",
    "proposed_at": "2026-12-01T08:00:00Z",
    "approved_by": None,
    "approved_at": None,
    "applied_by": None,
    "applied_at": None,
    "closed_by": None,
    "closed_at": None,
    "close_note": "",
    "edits": [
        {
            "object_type": "quota",
            "object": "3",
            "object_name": "Vision · Training · A100 80G",
            "field": "guarantee",
            "field_label": "Guarantee (GPUs)",
            "key": None,
            "kind": "quota",
            "old": 24,
            "new": 28,
            "old_display": "24",
            "new_display": "28",
        }
    ],
}


def change_example(name: str = "A proposed change", **overrides: Any) -> OpenApiExample:
    """A rule change as the change endpoints answer it."""
    return OpenApiExample(name, response_only=True, value={**CHANGE_EXAMPLE_VALUE, **overrides})


def page_example(name: str, *rows: dict[str, Any]) -> OpenApiExample:
    """One page of a list: ``count``, ``next``, ``previous`` and the rows."""
    return OpenApiExample(
        name,
        response_only=True,
        value={"count": len(rows), "next": None, "previous": None, "results": list(rows)},
    )


def response_example(name: str, value: dict[str, Any]) -> OpenApiExample:
    return OpenApiExample(name, response_only=True, value=value)


# Answers of the read operations on the demo data (``make run``), captured from the API
# itself: the schema shows each read with a real example.
_CAPTURED: dict[str, Any] = json.loads(
    (Path(__file__).with_name("examples.json")).read_text(encoding="utf-8")
)


def captured_example(operation_id: str, name: str = "On the demo data") -> OpenApiExample:
    """The answer ``operation_id`` gave on the demo data, as the schema's example."""
    return OpenApiExample(name, response_only=True, value=_CAPTURED[operation_id])
