"""Talking to a Kubernetes API server: the connection settings and a small REST client.

``KueueConnection`` is what a Kueue cluster's settings say: the API server URL, its CA
bundle, a credentials file (a bearer token or a kubeconfig) named inside the deployer's
allow-listed directory ``ARBITER_KUBE_CREDENTIALS_DIR``, and the rule that names a project's
namespace. ``KubeClient`` makes the few calls the sync needs with the official
``kubernetes`` client's ``ApiClient``: API discovery of kinds, list, server-side apply (field
manager ``arbiter``, optionally as a server dry run or forcing conflicts) and delete, counting
calls and writes. A call RBAC refuses raises ``PermissionMissing``, naming the verb and the
resource (the Helm chart's ClusterRole in deploy/helm/arbiter grants exactly these calls).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from django.conf import settings
from django.utils.translation import gettext as _
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from queues.schedulers.backends import SchedulerError, SchedulerUnavailable
from queues.schedulers.kueue.values import (
    FIELD_MANAGER,
    GROUP,
    LOCAL_QUEUE,
    MUTATING_API,
    MUTATING_BINDING,
    MUTATING_POLICY,
    NAMESPACE,
    NAMESPACED,
    PRIORITY_CLASS,
    VERSION,
    split_key,
)

DEFAULT_NAMESPACE_TEMPLATE = "{project}"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
COLLECTIONS = {
    NAMESPACE: "/api/v1/namespaces",
    PRIORITY_CLASS: "/apis/scheduling.k8s.io/v1/priorityclasses",
    "WorkloadPriorityClass": f"/apis/{GROUP}/{VERSION}/workloadpriorityclasses",
    "ResourceFlavor": f"/apis/{GROUP}/{VERSION}/resourceflavors",
    "Cohort": f"/apis/{GROUP}/{VERSION}/cohorts",
    "ClusterQueue": f"/apis/{GROUP}/{VERSION}/clusterqueues",
    LOCAL_QUEUE: f"/apis/{GROUP}/{VERSION}/localqueues",
    "ValidatingAdmissionPolicy": f"{ADMISSION}/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": f"{ADMISSION}/validatingadmissionpolicybindings",
    MUTATING_POLICY: f"/apis/{MUTATING_API}/mutatingadmissionpolicies",
    MUTATING_BINDING: f"/apis/{MUTATING_API}/mutatingadmissionpolicybindings",
}
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class ApplyConflict(SchedulerError):
    """Server-side apply met fields another manager owns (HTTP 409). ``owners`` maps each
    conflicting field to the field managers that hold it."""

    def __init__(self, message: str, owners: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.owners = owners or {}


class ServerRejected(SchedulerError):
    """The API server refused an object (400/403/422/500 with its message)."""


class PermissionMissing(SchedulerError):
    """RBAC refused a call (403): Arbiter's account lacks the verb on the resource, both
    named in the message."""


# How the API server's RBAC authorizer words a refusal (an admission policy's or webhook's
# 403 reads otherwise, and stays a ServerRejected of the object).
RBAC_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" '
    r'in API group "(?P<group>[^"]*)"(?P<scope>.*)$'
)


def permission_missing(body: dict[str, Any]) -> PermissionMissing | None:
    """The error naming the verb and resource RBAC refused, or ``None`` when a 403 is not
    RBAC's."""
    found = RBAC_FORBIDDEN.search(str(body.get("message", "")))
    if found is None:
        return None
    group = found["group"]
    return PermissionMissing(
        _(
            "Arbiter's Kubernetes account %(user)s lacks a permission: it may not %(verb)s "
            "%(resource)s (API group “%(group)s”)%(scope)s. Grant the verb “%(verb)s” on "
            "“%(resource)s” in its ClusterRole (the Helm chart's grants every call of the sync)."
        )
        % {
            "user": found["user"],
            "verb": found["verb"],
            "resource": f"{found['resource']}.{group}" if group else found["resource"],
            "group": group or "core",
            "scope": found["scope"].rstrip(". "),
        }
    )


@dataclass(frozen=True)
class KueueConnection:
    api_server: str = ""
    ca_bundle: str = ""
    credentials_path: str = ""
    namespace_template: str = DEFAULT_NAMESPACE_TEMPLATE
    # Why the settings cannot connect (reported when the sync connects, not before: an
    # export needs only the namespace rule).
    problem: str = ""

    @classmethod
    def from_cluster(cls, cluster: Any) -> KueueConnection:
        """The settings of a Kueue ``Cluster`` (read by name, so that any model with these
        attributes works): ``kube_api_server``, ``kube_ca_bundle``,
        ``kube_credentials_file`` and ``kube_namespace_template``."""
        name = str(getattr(cluster, "kube_credentials_file", "") or "")
        path, problem = "", ""
        try:
            path = str(credentials_path(name))
        except SchedulerError as error:
            problem = str(error)
        return cls(
            api_server=str(getattr(cluster, "kube_api_server", "") or ""),
            ca_bundle=str(getattr(cluster, "kube_ca_bundle", "") or ""),
            credentials_path=path,
            namespace_template=str(
                getattr(cluster, "kube_namespace_template", "") or DEFAULT_NAMESPACE_TEMPLATE
            ),
            problem=problem,
        )


def credentials_path(name: str) -> Path:
    """The credentials file ``name`` inside ``ARBITER_KUBE_CREDENTIALS_DIR``, never outside."""
    directory = getattr(settings, "ARBITER_KUBE_CREDENTIALS_DIR", "") or ""
    if not name:
        raise SchedulerError(_("The cluster names no Kubernetes credentials file."))
    if not directory:
        raise SchedulerError(
            _("Set ARBITER_KUBE_CREDENTIALS_DIR: Kubernetes credentials are read only from there.")
        )
    base = Path(directory).resolve()
    path = (base / name).resolve()
    if path.parent != base or not name or "/" in name or name.startswith("."):
        raise SchedulerError(
            _("The credentials file “%(name)s” must be a plain file name inside %(dir)s.")
            % {"name": name, "dir": directory}
        )
    return path


def request_timeout() -> int:
    return int(getattr(settings, "ARBITER_KUBE_TIMEOUT", 30))


class KubeClient:
    """The REST calls of a sync, counted (``calls``; ``writes`` for non-dry-run writes)."""

    def __init__(self, connection: KueueConnection) -> None:
        self.connection = connection
        self.calls = 0
        self.writes = 0
        self._api: k8s.ApiClient | None = None
        self._ca_file: Any = None

    # -- connection --

    def _build(self) -> k8s.ApiClient:
        conn = self.connection
        if conn.problem:
            raise SchedulerError(conn.problem)
        path = Path(conn.credentials_path) if conn.credentials_path else None
        if path is None or not path.is_file():
            raise SchedulerError(
                _("The Kubernetes credentials file %(path)s does not exist.")
                % {"path": conn.credentials_path or "-"}
            )
        text = path.read_text()
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, dict) and "clusters" in parsed:
            try:
                api = k8s_config.new_client_from_config(config_file=str(path))
            except Exception as error:  # the loader raises many kinds
                raise SchedulerError(
                    _("The kubeconfig %(path)s cannot be used: %(error)s")
                    % {"path": path.name, "error": error}
                ) from error
            if conn.api_server:
                api.configuration.host = conn.api_server.rstrip("/")
        else:
            token = text.strip()
            if not token or "\n" in token:
                raise SchedulerError(
                    _("%(path)s holds neither a bearer token nor a kubeconfig.")
                    % {"path": path.name}
                )
            if not conn.api_server.startswith("https://"):
                raise SchedulerError(_("The API server URL must start with https://."))
            configuration = k8s.Configuration(host=conn.api_server.rstrip("/"))
            configuration.api_key = {"authorization": f"Bearer {token}"}
            api = k8s.ApiClient(configuration)
        if conn.ca_bundle.strip():
            # The client reads the CA from a file: a private temporary one per client.
            self._ca_file = tempfile.NamedTemporaryFile(  # noqa: SIM115
                "w", suffix=".pem", prefix="arbiter-ca-"
            )
            self._ca_file.write(conn.ca_bundle)
            self._ca_file.flush()
            os.chmod(self._ca_file.name, 0o600)
            api.configuration.ssl_ca_cert = self._ca_file.name
            api.configuration.verify_ssl = True
            api.rest_client = k8s.rest.RESTClientObject(api.configuration)
        return api

    @property
    def api(self) -> k8s.ApiClient:
        if self._api is None:
            self._api = self._build()
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
        if self._ca_file is not None:
            self._ca_file.close()
            self._ca_file = None

    # -- requests --

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict[str, Any]]:
        """One call; the status and the decoded body. Connection failures are
        ``SchedulerUnavailable`` (worth a retry)."""
        api = self.api
        headers = {"Accept": "application/json", "Content-Type": content_type}
        self.calls += 1
        try:
            method, url, headers, body, post = api.param_serialize(
                method,
                path,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = api.call_api(
                method, url, headers, body, post, _request_timeout=request_timeout()
            )
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise SchedulerUnavailable(
                _("The Kubernetes API server %(server)s does not answer: %(error)s")
                % {"server": api.configuration.host, "error": error}
            ) from error
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            decoded = {"message": data.decode(errors="replace")[:500]}
        if response.status == 401:
            raise SchedulerError(
                _("The Kubernetes API server refused Arbiter's credentials (%(status)s): %(msg)s")
                % {"status": response.status, "msg": decoded.get("message", "")}
            )
        if response.status == 403 and (missing := permission_missing(decoded)) is not None:
            raise missing
        if response.status >= 500 and response.status != 500:
            raise SchedulerUnavailable(
                _("The Kubernetes API server failed (%(status)s): %(msg)s")
                % {"status": response.status, "msg": decoded.get("message", "")}
            )
        return response.status, decoded

    def object_path(self, kind: str, key: str) -> str:
        namespace, name = split_key(kind, key)
        if kind in NAMESPACED:
            return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/localqueues/{name}"
        return f"{COLLECTIONS[kind]}/{name}"

    def serves(self, *kinds: str) -> bool:
        """API discovery: whether the server serves every one of ``kinds``.
        MutatingAdmissionPolicy, for one, is served only where it is enabled."""
        return self.discover(*(COLLECTIONS[kind] for kind in kinds))

    def discover(self, *collections: str) -> bool:
        """Whether the server serves every one of these collection paths: one call per group
        version, whose resource list must name each of them (404: not served at all)."""
        wanted: dict[str, set[str]] = {}
        for collection in collections:
            group_version, _sep, resource = collection.rpartition("/")
            wanted.setdefault(group_version, set()).add(resource)
        for group_version, resources in wanted.items():
            status, body = self.request("GET", group_version)
            if status == 404:
                return False
            if status != 200:
                raise SchedulerError(
                    _("API discovery of %(path)s failed (%(status)s): %(msg)s")
                    % {"path": group_version, "status": status, "msg": body.get("message", "")}
                )
            if not resources <= {item.get("name") for item in body.get("resources") or []}:
                return False
        return True

    def list(self, kind: str) -> list[dict[str, Any]]:
        status, body = self.request("GET", COLLECTIONS[kind])
        if status == 404:
            raise SchedulerError(
                _(
                    "The API server does not serve %(kind)s (%(path)s): install Kueue's CRDs "
                    "(v1beta2) first."
                )
                % {"kind": kind, "path": COLLECTIONS[kind]}
            )
        if status != 200:
            raise SchedulerError(
                _("Listing %(kind)s failed (%(status)s): %(msg)s")
                % {"kind": kind, "status": status, "msg": body.get("message", "")}
            )
        return list(body.get("items") or [])

    def apply(
        self, manifest: dict[str, Any], *, dry_run: bool = False, force: bool = False
    ) -> dict[str, Any]:
        """Server-side apply of one object (``ApplyConflict`` on 409, ``ServerRejected``
        for any other refusal, with the server's message)."""
        kind = manifest["kind"]
        meta = manifest["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if kind in NAMESPACED else meta["name"]
        query = [("fieldManager", FIELD_MANAGER)]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        status, body = self.request(
            "PATCH",
            self.object_path(kind, key),
            query=query,
            body=manifest,
            content_type="application/apply-patch+yaml",
        )
        if not dry_run and status in (200, 201):
            self.writes += 1
        if status == 409:
            raise ApplyConflict(_conflict_message(kind, key, body), _conflict_owners(body))
        if status not in (200, 201):
            raise ServerRejected(
                _("The API server rejected %(kind)s %(name)s (%(status)s): %(msg)s")
                % {"kind": kind, "name": key, "status": status, "msg": body.get("message", "")}
            )
        return body

    def restore(self, kind: str, key: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch by Arbiter's field manager: how values another manager added
        to a field Arbiter sets as a set or a map (server-side apply merges those, and never
        removes what another manager owns) are removed."""
        status, body = self.request(
            "PATCH",
            self.object_path(kind, key),
            query=[("fieldManager", FIELD_MANAGER)],
            body=patch,
            content_type="application/merge-patch+json",
        )
        if status not in (200, 201):
            raise ServerRejected(
                _("The API server rejected restoring %(kind)s %(name)s (%(status)s): %(msg)s")
                % {"kind": kind, "name": key, "status": status, "msg": body.get("message", "")}
            )
        self.writes += 1

    def delete(self, kind: str, key: str) -> None:
        status, body = self.request("DELETE", self.object_path(kind, key))
        if status in (200, 202):
            self.writes += 1
        elif status != 404:
            raise ServerRejected(
                _("Deleting %(kind)s %(name)s failed (%(status)s): %(msg)s")
                % {"kind": kind, "name": key, "status": status, "msg": body.get("message", "")}
            )

    def ensure_crd(self, crd: dict[str, Any]) -> None:
        """Create or replace a CRD (tests and the demo; ops install Kueue themselves)."""
        name = crd["metadata"]["name"]
        status, body = self.request(
            "PATCH",
            f"{CRDS}/{name}",
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=crd,
            content_type="application/apply-patch+yaml",
        )
        if status not in (200, 201):
            raise ServerRejected(
                _("Installing the CRD %(name)s failed (%(status)s): %(msg)s")
                % {"name": name, "status": status, "msg": body.get("message", "")}
            )


CONFLICT_WITH = re.compile(
    r'conflict with "([^"]+)"(?: with subresource "[^"]*")?(?: using [^:]+)?'
)


def _conflict_owners(body: dict[str, Any]) -> dict[str, list[str]]:
    """``{field: [manager, ...]}`` of a 409's causes (``.spec.x`` → ``spec.x``)."""
    owners: dict[str, list[str]] = {}
    for cause in (body.get("details") or {}).get("causes") or []:
        field = str(cause.get("field", "")).lstrip(".")
        managers = CONFLICT_WITH.findall(str(cause.get("message", "")))
        owners.setdefault(field, [])
        owners[field] += [m for m in managers if m not in owners[field]]
    return owners


def _conflict_message(kind: str, key: str, body: dict[str, Any]) -> str:
    causes = (body.get("details") or {}).get("causes") or []
    fields = [f"{c.get('field', '')} ({c.get('message', '')})" for c in causes][:10]
    return _(
        "%(kind)s %(name)s: another field manager owns fields Arbiter sets: %(fields)s. "
        "Nothing was forced; sync with --force-conflicts to take them over."
    ) % {"kind": kind, "name": key, "fields": "; ".join(fields) or body.get("message", "")}
