# Arbiter: `make run` starts the demo, `make test` runs every check. Both set up .venv first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

# The checks and tests run in debug mode (no secret key needed, no HTTPS redirect) unless
# the caller sets DJANGO_DEBUG.
export DJANGO_DEBUG ?= 1

.PHONY: run test services install lint typecheck migrations-check pytest clean

run: $(INSTALLED) .env
	DJANGO_DEBUG=1 bash deploy/run-dev.sh

test: $(INSTALLED) .env lint typecheck migrations-check pytest

install: $(INSTALLED) .env

# PostgreSQL (127.0.0.1:5432, trust), Redis (6379) and MariaDB (3306) from Debian's packages,
# installed and started if they do not answer (as root; CI runs the same script first).
services:
	bash deploy/services.sh

# The demo's local settings, read by governance/settings.py: debug on and a secret key of its
# own, so that `.venv/bin/python manage.py ...` works without exporting anything. Written once
# (git-ignored); production sets its variables in the environment instead.
.env:
	@printf '%s\n' '# Written by `make` for the local demo (git-ignored). Not for production.' \
		'DJANGO_DEBUG=1' \
		"DJANGO_SECRET_KEY=$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(50))')" > $@
	@echo "Wrote $@ (debug on, a generated secret key) for the local demo."

# (Re)install when pyproject.toml changes.
$(INSTALLED): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Arbiter needs Python 3.11 or newer (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --quiet --editable ".[dev]"
	touch $@

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(INSTALLED)
	$(BIN)/mypy

migrations-check: $(INSTALLED)
	$(BIN)/python manage.py makemigrations --check --dry-run

# One process. PYTEST_WORKERS=N runs N pytest-xdist processes, but the groups that keep the
# tests sharing a lab or a service together (tests/conftest.py: xdist_group) do not take
# effect yet, so the lab tests collide there.
PYTEST_WORKERS ?= 0
pytest: $(INSTALLED)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
