"""The OpenAPI document and its Swagger UI."""

import re

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from drf_spectacular.validation import validate_schema

from governance.urls import api_patterns
from tests.conftest import login


def documented_path(route: str) -> str:
    """``quotas/<int:pk>/`` → ``/api/v1/quotas/{id}/`` (drf-spectacular names a pk ``id``)."""
    path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route).replace("{pk}", "{id}")
    return "/api/v1/" + path


@pytest.fixture
def schema(db, api_client) -> dict:
    response = api_client.get(reverse("api_schema"), {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_schema_is_valid_openapi(schema):
    validate_schema(schema)  # raises on an invalid document
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Arbiter API"


def test_schema_has_every_api_path(schema):
    expected = {documented_path(str(pattern.pattern)) for pattern in api_patterns}

    assert expected <= set(schema["paths"])


RULE_LISTS = ("projects", "flavors", "pools", "tiers", "preemption-classes", "quotas")
ACTIONS = ("/create/", "/revoke/", "/deactivate/", "/propose/", "/approve/")


def _expected_methods(path: str) -> list[str]:
    """Reads are GETs; rules change through proposals (POST a list, PATCH or DELETE one),
    a change's steps, reviews and token actions are POSTs."""
    parts = path.removeprefix("/api/v1/").strip("/").split("/")
    if path.startswith("/api/v1/changes/") and path != "/api/v1/changes/{id}/":
        return ["get"] if path == "/api/v1/changes/" else ["post"]
    if path.endswith(ACTIONS) or (parts[0] in ("reviews", "review-cycles") and len(parts) > 1):
        return ["post"]
    if parts[0] in RULE_LISTS and len(parts) == 1:
        return ["get", "post"]
    if parts[0] in RULE_LISTS and len(parts) == 2:
        return ["get", "patch", "delete"]
    if parts[0] == "projects" and parts[2:] == ["members"]:
        return ["get", "post"]
    if parts[0] == "projects" and parts[2:3] == ["members"]:
        return ["delete"]
    return ["get"]


def test_every_operation_is_named_tagged_and_authenticated(schema):
    operation_ids = []
    governance_paths = {documented_path(str(pattern.pattern)) for pattern in api_patterns}
    for path, operations in schema["paths"].items():
        if path not in governance_paths:  # other apps' APIs are tested with their app
            continue
        assert sorted(operations) == sorted(_expected_methods(path)), path
        for operation in operations.values():
            operation_ids.append(operation["operationId"])
            assert operation["tags"], path
            assert {"tokenAuth": []} in operation["security"], path
            assert {} not in operation["security"], path  # no anonymous access
    assert len(operation_ids) == len(set(operation_ids))


def test_list_operations_document_filters_and_pages(schema):
    parameters = {
        path: {parameter["name"] for parameter in operations["get"].get("parameters", [])}
        for path, operations in schema["paths"].items()
        if "get" in operations
    }

    assert parameters["/api/v1/quotas/"] >= {
        "project",
        "pool",
        "flavor",
        "preemption_class",
        "limit",
        "offset",
    }
    assert parameters["/api/v1/tiers/"] >= {"may_preempt", "is_default", "due_before"}
    assert parameters["/api/v1/projects/"] >= {"tier", "member", "q"}
    assert parameters["/api/v1/pools/"] >= {"parent"}
    assert parameters["/api/v1/flavors/"] >= {"q"}
    assert parameters["/api/v1/changes/"] >= {"status", "kind", "object", "author", "since"}
    ok = schema["paths"]["/api/v1/quotas/"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["$ref"].endswith("PaginatedQuotaList")


def test_schema_generates_without_warnings(db, tmp_path):
    # The command CI runs; --fail-on-warn turns any warning into a failure.
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    assert "/api/v1/quotas/{id}/" in target.read_text()


def test_docs_render_for_a_signed_in_user(member):
    response = login(member).get(reverse("api_docs"))

    assert response.status_code == 200
    content = response.content.decode()
    assert "swagger-ui" in content
    script = login(member).get(reverse("api_docs"), {"script": ""}).content.decode()
    assert reverse("api_schema") in script


def _references(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)


def test_docs_load_swagger_ui_from_local_static_files_only(member):
    """/api/docs/ works offline: every script, style and icon is served by Arbiter itself."""
    from django.contrib.staticfiles import finders

    client = login(member)
    html = client.get(reverse("api_docs")).content.decode()
    references = _references(html)
    assert any(ref.endswith("swagger-ui-bundle.js") for ref in references)
    assert any(ref.endswith("swagger-ui.css") for ref in references)
    for ref in references:
        assert not re.match(r"^(https?:)?//", ref), f"{ref} is loaded from another host"
        assert ref.startswith("/"), ref
        static_prefix = "/" + settings.STATIC_URL.lstrip("/")
        if ref.startswith(static_prefix):
            path = ref.removeprefix(static_prefix)
            assert finders.find(path), f"{ref} is not an installed static file"
    # No inline code: the page's own script is a separate response.
    assert "<script>" not in html.replace(" ", "")
    script = client.get(reverse("api_docs"), {"script": ""})
    assert script.status_code == 200
    assert reverse("api_schema") in script.content.decode()


def test_every_operation_has_an_example(schema):
    """Each operation shows an example of its body or of its successful answer."""
    without = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            bodies = list(operation.get("requestBody", {}).get("content", {}).values())
            for code, response in operation["responses"].items():
                if code.startswith("2"):
                    bodies += list(response.get("content", {}).values())
            if not any(body.get("examples") for body in bodies):
                without.append(f"{method.upper()} {path}")
    assert without == []


def test_errors_have_one_documented_shape(schema):
    error = schema["components"]["schemas"]["Error"]
    assert set(error["properties"]) == {"error", "detail", "fields"}
    create = schema["paths"]["/api/v1/requests/create/"]["post"]
    assert "409" in create["responses"]
    assert any(p["name"] == "Idempotency-Key" for p in create["parameters"])
    quota = schema["paths"]["/api/v1/quotas/{id}/"]["get"]
    assert "304" in quota["responses"]
    assert any(p["name"] == "If-None-Match" for p in quota["parameters"])
