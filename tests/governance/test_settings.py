"""The settings module: production checks, refusal without a secret, documented variables."""

import os
import re
import subprocess
import sys

from django.conf import settings

PRODUCTION_ENV = {
    "DJANGO_SECRET_KEY": "test-only-not-a-secret-5c1f9a7e3b8d2064f1a9c7e5b3d8f2a6c4e1b9d7",
    "DJANGO_ALLOWED_HOSTS": "arbiter.example.com",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://arbiter.example.com",
    "DJANGO_BEHIND_TLS_PROXY": "1",
}


def _run(args: list[str], env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    base = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "ARBITER_"))
    }
    # The demo's local .env (written by `make`) must not leak into these checks.
    return subprocess.run(
        [sys.executable, *args],
        cwd=settings.BASE_DIR,
        env={**base, "ARBITER_DATA_DIR": str(tmp_path), "ARBITER_ENV_FILE": "", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = _run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], PRODUCTION_ENV, tmp_path
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stderr


def test_check_deploy_flags_debug(tmp_path):
    """The check above can fail: DEBUG on is reported."""
    result = _run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        {**PRODUCTION_ENV, "DJANGO_DEBUG": "1"},
        tmp_path,
    )

    assert result.returncode != 0
    assert "security.W018" in result.stderr


def test_settings_refuse_to_load_without_a_secret_key_when_debug_is_off(tmp_path):
    code = "import django; django.setup()"
    env = {"DJANGO_SETTINGS_MODULE": "governance.settings", "DJANGO_DEBUG": "0"}

    result = _run(["-c", code], env, tmp_path)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_the_placeholder_secret_of_env_example_refuses_to_start_in_production(tmp_path):
    example = (settings.BASE_DIR / ".env.example").read_text(encoding="utf-8")
    placeholder = re.search(r"^DJANGO_SECRET_KEY=(\S+)$", example, flags=re.MULTILINE)
    assert placeholder is not None
    result = _run(
        ["manage.py", "check", "--deploy"],
        {**PRODUCTION_ENV, "DJANGO_SECRET_KEY": placeholder.group(1)},
        tmp_path,
    )
    assert result.returncode != 0
    assert "placeholder" in result.stderr and "ImproperlyConfigured" in result.stderr


def test_settings_load_without_a_secret_key_in_debug(tmp_path):
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    env = {"DJANGO_SETTINGS_MODULE": "governance.settings", "DJANGO_DEBUG": "1"}

    result = _run(["-c", code], env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_every_environment_variable_is_documented_in_env_example():
    source = (settings.BASE_DIR / "governance" / "settings.py").read_text()
    read = set(
        re.findall(r"""(?:environ\.get|env_bool|env_list)\(\s*["']([A-Z0-9_]+)["']""", source)
    )
    read.add("DATABASE_URL")  # read by dj_database_url.config()
    example = (settings.BASE_DIR / ".env.example").read_text()
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", example, flags=re.MULTILINE))

    assert len(read) > 20
    assert read - documented == set()


SHOW_SETTINGS = (
    "import django; django.setup(); from django.conf import settings; "
    "print(settings.DEBUG, settings.SECRET_KEY)"
)


def test_settings_read_a_local_env_file_for_what_the_environment_lacks(tmp_path):
    """`make run` writes such a file, so README commands need no exported variables."""
    env_file = tmp_path / "local.env"
    env_file.write_text(
        "# the demo's file\n\nDJANGO_DEBUG=1\nexport DJANGO_SECRET_KEY='from-the-file'\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "governance.settings", "ARBITER_ENV_FILE": str(env_file)}

    result = _run(["-c", SHOW_SETTINGS], env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "from-the-file"]


def test_the_environment_wins_over_the_env_file(tmp_path):
    env_file = tmp_path / "local.env"
    env_file.write_text("DJANGO_DEBUG=1\nDJANGO_SECRET_KEY=from-the-file\n")
    env = {
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        "ARBITER_ENV_FILE": str(env_file),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "from-the-environment",
    }

    result = _run(["-c", SHOW_SETTINGS], env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "from-the-environment"]


def test_a_missing_env_file_still_refuses_to_start_without_a_secret(tmp_path):
    env = {
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        "ARBITER_ENV_FILE": str(tmp_path / "absent.env"),
    }

    result = _run(["-c", "import django; django.setup()"], env, tmp_path)

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_make_writes_the_local_env_file_once(tmp_path):
    """The Makefile's `.env` target: debug on, a fresh secret, never overwritten."""
    makefile = settings.BASE_DIR / "Makefile"
    make = ["make", "--no-print-directory", "-f", str(makefile), "-C", str(tmp_path), ".env"]

    first = subprocess.run(make, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    written = (tmp_path / ".env").read_text()
    assert "DJANGO_DEBUG=1" in written
    secret = re.search(r"^DJANGO_SECRET_KEY=(\S{40,})$", written, flags=re.MULTILINE)
    assert secret is not None

    again = subprocess.run(make, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0
    assert (tmp_path / ".env").read_text() == written
