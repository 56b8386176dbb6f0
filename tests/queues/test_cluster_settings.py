"""Cluster connection settings carry no commands: a hostile value is refused at the form, the
API and the service, and the scheduler client has no shell anywhere."""

import ast
import base64
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from governance.models import RuleChange
from queues import forms, services
from queues.models import Cluster, ClusterBackend
from queues.services.slurm import SlurmCommands
from queues.services.slurm.commands import UnsafeCommand
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db

HOSTILE = "sh -c 'id > x' x"
ALLOWED = "/opt/slurm/bin"
PEM = (
    "-----BEGIN CERTIFICATE-----\n"
    + base64.b64encode(b"not really a certificate, but base64").decode()
    + "\n-----END CERTIFICATE-----\n"
)


@pytest.fixture(autouse=True)
def allow_list(settings, tmp_path):
    settings.ARBITER_SLURM_BIN_DIRS = [ALLOWED]
    creds = tmp_path / "kube"
    creds.mkdir()
    (creds / "token").write_text("secret-token\n")
    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(creds)


def test_no_shell_anywhere_in_the_scheduler_client():
    root = Path(django_settings.BASE_DIR) / "queues"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "os.system" not in text, path
        assert "sh -c" not in text, path
        assert "shlex" not in text, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "shell":
                        assert isinstance(keyword.value, ast.Constant), path
                        assert keyword.value.value is False, path
            if isinstance(node, ast.Attribute) and node.attr in ("popen", "system", "spawnl"):
                pytest.fail(f"{path}: os.{node.attr}")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("slurm_conf", HOSTILE),
        ("slurm_conf", "etc/slurm.conf"),
        ("slurm_conf", "/etc/../etc/slurm.conf"),
        ("slurm_conf", "/etc/slurm.conf\nx"),
        ("slurm_bin_dir", HOSTILE),
        ("slurm_bin_dir", "/usr/local/evil"),
        ("slurm_bin_dir", ALLOWED + "/../../tmp"),
        ("slurm_cluster", HOSTILE),
        ("slurm_partition", HOSTILE),
        ("slurm_partition", "gpu --qos=production"),
        ("slurm_partition", "-gpu"),
        ("command_timeout", 0),
        ("command_timeout", 601),
    ],
)
def test_a_hostile_slurm_setting_is_refused_by_the_service(ops, world, field, value):
    data = {"name": "lab", "slurm_cluster": "arbiter", field: value}
    with pytest.raises(ValidationError) as error:
        services.cluster_create(user=ops, reason=REASON, **data)
    assert field in error.value.message_dict
    with pytest.raises(ValidationError) as error:
        services.cluster_propose_create(user=ops, reason=REASON, data=data)
    assert field in error.value.message_dict
    assert not Cluster.objects.exists()
    assert not RuleChange.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kube_api_server", "http://k8s.example.com:6443"),
        ("kube_api_server", HOSTILE),
        ("kube_ca_bundle", "not a certificate"),
        ("kube_ca_bundle", PEM + "trailing garbage"),
        ("kube_credentials_file", "../../etc/shadow"),
        ("kube_credentials_file", "sub/token"),
        ("kube_credentials_file", HOSTILE),
        ("kube_credentials_file", "missing"),
        ("kube_namespace_template", "team-{user}"),
        ("kube_namespace_template", "fixed"),
        ("kube_namespace_template", "Team_{project}"),
        ("kube_namespace_template", "{project}{"),
        ("slurm_partition", "gpu"),
    ],
)
def test_a_bad_kueue_setting_is_refused_with_its_field(ops, world, field, value):
    data = {
        "name": "k8s",
        "backend": ClusterBackend.KUEUE,
        "kube_api_server": "https://k8s.example.com:6443",
        "kube_credentials_file": "token",
        "kube_ca_bundle": PEM,
        field: value,
    }
    with pytest.raises(ValidationError) as error:
        services.cluster_propose_create(user=ops, reason=REASON, data=data)
    assert field in error.value.message_dict, error.value.message_dict
    assert not RuleChange.objects.exists()


def test_a_kueue_namespace_rule_must_fit_every_project(ops, world):
    # The world's projects have short slugs; 60 characters of prefix make them too long.
    data = {
        "name": "k8s",
        "backend": ClusterBackend.KUEUE,
        "kube_api_server": "https://k8s.example.com:6443",
        "kube_credentials_file": "token",
        "kube_namespace_template": "a" * 55 + "-{project}",
    }
    with pytest.raises(ValidationError) as error:
        services.cluster_propose_create(user=ops, reason=REASON, data=data)
    assert "kube_namespace_template" in error.value.message_dict
    data["kube_namespace_template"] = "gpu-{pool}-{project}"
    change = services.cluster_propose_create(user=ops, reason=REASON, data=data)
    assert change.status == "proposed"


@pytest.mark.parametrize("backend", ClusterBackend.values)
def test_each_backend_requires_its_fields(ops, world, backend):
    with pytest.raises(ValidationError) as error:
        services.cluster_create(user=ops, reason=REASON, name="x", backend=backend)
    needed = {"slurm": {"slurm_cluster"}, "kueue": {"kube_api_server", "kube_credentials_file"}}
    assert needed[backend] <= set(error.value.message_dict)


@pytest.mark.parametrize(
    ("values", "constraint"),
    [
        ({"backend": "slurm", "slurm_cluster": ""}, "cluster_slurm_needs_cluster_name"),
        ({"backend": "kueue", "kube_api_server": ""}, "cluster_kueue_needs_api_server"),
        ({"backend": "slurm", "slurm_cluster": "a", "command_timeout": 0}, "timeout_bounded"),
        (
            {"backend": "slurm", "slurm_cluster": "a", "kube_namespace_template": "x"},
            "cluster_namespace_names_project",
        ),
        (
            {"backend": "kueue", "kube_api_server": "https://k", "kube_credentials_file": "t"}
            | {"slurm_partition": "gpu"},
            "cluster_partition_only_for_slurm",
        ),
    ],
)
def test_the_database_holds_the_per_backend_rules(values, constraint):
    with pytest.raises(IntegrityError) as error, transaction.atomic():
        Cluster.objects.create(name="raw", **values)
    assert constraint in str(error.value) or "CHECK constraint failed" in str(error.value)


def test_the_form_refuses_a_hostile_value_and_offers_only_allowed_directories(ops, world):
    form = forms.ClusterCreateForm(
        {
            "name": "lab",
            "backend": "slurm",
            "slurm_cluster": "arbiter",
            "slurm_conf": HOSTILE,
            "slurm_bin_dir": HOSTILE,
            "command_timeout": 60,
            "kube_namespace_template": "{project}",
            "pools": [world.training.pk],
            "reason": "Try",
        }
    )
    assert not form.is_valid()
    assert "slurm_conf" in form.errors
    assert "slurm_bin_dir" in form.errors
    assert [value for value, _label in form.fields["slurm_bin_dir"].choices] == ["", ALLOWED]
    response = login(ops).post(
        reverse("cluster_create"),
        {
            "name": "lab",
            "backend": "slurm",
            "slurm_cluster": "arbiter",
            "slurm_conf": HOSTILE,
            "command_timeout": 60,
            "kube_namespace_template": "{project}",
            "pools": [world.training.pk],
            "reason": "Try",
        },
    )
    assert response.status_code == 200
    assert "Enter an absolute path" in response.content.decode()
    assert not RuleChange.objects.exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"slurm_conf": HOSTILE}, "slurm_conf"),
        ({"slurm_bin_dir": HOSTILE}, "slurm_bin_dir"),
        ({"slurm_bin_dir": "/usr/bin\x00"}, "slurm_bin_dir"),
        ({"slurm_conf": "/etc/" + "a" * 600}, "slurm_conf"),
        ({"command_timeout": "12abc"}, "command_timeout"),
        ({"command_timeout": 2.7}, "command_timeout"),
        ({"command_timeout": 10**9}, "command_timeout"),
        ({"enabled": "maybe"}, "enabled"),
        ({"pools": "training"}, "pools"),
        ({"pools": ["nope"]}, "pools"),
        ({"pools": ["train\x00ing"]}, "pools"),
        ({"pools": [{"slug": "training"}]}, "pools"),
        ({"slurm_cluster": "a" * 64}, "slurm_cluster"),
        ({"slurm_partition": "gpu;id"}, "slurm_partition"),
        ({"slurm_partition": "a" * 64}, "slurm_partition"),
        ({"kube_ca_bundle": "x" * 100_001}, "kube_ca_bundle"),
        ({"name": "lab\x00"}, "name"),
        ({"name": {"a": 1}}, "name"),
        ({"backend": "pbs"}, "backend"),
        ({"reason": ""}, "reason"),
        ({"kube_credentials_file": "../token"}, "kube_credentials_file"),
    ],
)
def test_the_api_refuses_bad_input_with_field_messages(ops, world, api_client, payload, field):
    api_client.force_authenticate(ops)
    body = {
        "name": "lab",
        "backend": "slurm",
        "slurm_cluster": "arbiter",
        "pools": ["training"],
        "reason": "New cluster",
        **payload,
    }
    response = api_client.post(reverse("api_cluster_list"), body, format="json")
    assert response.status_code == 400, response.content
    # A field, or an item of a list field ("pools[0]": the JSON parser names the item).
    assert field in {key.split("[")[0] for key in response.json()["fields"]}, response.json()
    assert not RuleChange.objects.exists()


def test_the_runner_refuses_what_slipped_past_and_never_uses_a_shell(settings, tmp_path):
    with pytest.raises(UnsafeCommand):
        SlurmCommands(bin_dir="/usr/local/evil").run(["sacctmgr", "--version"])
    with pytest.raises(UnsafeCommand):
        SlurmCommands(slurm_conf=HOSTILE).run(["sacctmgr", "--version"])
    with pytest.raises(UnsafeCommand):
        SlurmCommands().run(["sh", "-c", "id"])
    with pytest.raises(UnsafeCommand):
        SlurmCommands(timeout=10_000).run(["sacctmgr", "--version"])
    # An allowed directory: the program is that directory's sacctmgr, arguments as given.
    settings.ARBITER_SLURM_BIN_DIRS = [str(tmp_path)]
    argv = SlurmCommands(bin_dir=str(tmp_path)).argv(["sacctmgr", "-n", "show", HOSTILE])
    assert argv == [str(tmp_path / "sacctmgr"), "-n", "show", HOSTILE]
    settings.ARBITER_SLURM_BIN_DIRS = []  # the allow-list shrank since the cluster was made
    with pytest.raises(UnsafeCommand):
        SlurmCommands(bin_dir=str(tmp_path)).argv(["sacctmgr"])


def test_a_partition_is_proposed_applied_and_shown(ops, world, api_client):
    cluster = services.cluster_create(user=ops, reason=REASON, name="lab", slurm_cluster="lab")
    api_client.force_authenticate(ops)

    response = api_client.patch(
        reverse("api_cluster_detail", args=["lab"]),
        {"slurm_partition": "gpu-a100", "reason": "Jobs go to the GPU partition"},
        format="json",
    )
    assert response.status_code == 201, response.content
    change = RuleChange.objects.get()
    assert change.status == "proposed"

    services.cluster_update(
        cluster=cluster, user=ops, reason=REASON, data={"slurm_partition": "gpu-a100"}
    )
    body = api_client.get(reverse("api_cluster_detail", args=["lab"])).json()
    assert body["slurm_partition"] == "gpu-a100"
    page = login(ops).get(reverse("cluster_detail", args=["lab"])).content.decode()
    assert "gpu-a100" in page
    assert "Slurm partition" in page
