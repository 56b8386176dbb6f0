"""Rules checked at submit time: Arbiter's ``job_submit`` Lua plugin and the table it reads.

Slurm holds typed GPU requests natively (typed account and QOS limits) but checks untyped ones
(``--gres=gpu:N``, ``--gpus=N``) against untyped limits only. The plugin
(``job_submit.lua`` in this package, installed once next to ``slurm.conf``) closes that gap
before a job exists: for a GPU request in one of Arbiter's project accounts it accepts,
rewrites an untyped request to the one GPU type the project may use in its pool, or refuses
with a message naming the rule, the project's quota and what to submit instead.

The plugin holds no rules. Every sync writes ``arbiter_submit_table.lua`` beside
``slurm.conf`` (atomically: a new file renamed over the old one) from the state it applied:
per project account its maximum per GPU type, per QOS its tier cap and per-job cap, per user
association its default QOS, and the messages in English and Chinese. Its first line carries
the table's fingerprint, expiry and the checksum of the rest of the file; the plugin reads the
file on each GPU submission and loads it when it changed and its body matches the checksum —
no restart, no ``scontrol reconfigure``. The guard renews the expiry each minute while the
cluster is in sync; a table past its expiry (the sync has been failing longer than
``ARBITER_SLURM_SUBMIT_TABLE_TTL``), missing, empty, damaged or unreadable makes the plugin
refuse GPU jobs of governed accounts. The file's format: docs/slurm-submit-table.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from queues.schedulers.backends import State, gc_paused
from queues.schedulers.slurm.values import (
    ACCOUNT,
    ASSOCIATION,
    GPU,
    QOS,
    ROOT_ACCOUNT,
    parse_tres,
    split_association,
)

from .commands import SlurmCommands

PLUGIN_FILE = Path(__file__).with_name("job_submit.lua")
PLUGIN_NAME = "job_submit.lua"
TABLE_NAME = "arbiter_submit_table.lua"
TABLE_FORMAT = 1
DEFAULT_CONF = "/etc/slurm/slurm.conf"
VERSION_LINE = re.compile(r'^ARBITER_PLUGIN_VERSION = "(?P<version>[^"]+)"', re.MULTILINE)
# Lua 5.1 escapes: backslash, quote, and control bytes as decimal \ddd.
LUA_ESCAPE = re.compile(r'[\\"\x00-\x1f]')
HEADER = re.compile(
    r"^-- arbiter-submit-table format=(\d+) fingerprint=(\S+) expires=(\d+)"
    r"(?: checksum=(\d+))?"
)


def plugin_source() -> str:
    """The plugin as ops install it (``manage.py slurm_submit_plugin`` prints it)."""
    return PLUGIN_FILE.read_text(encoding="utf-8")


def plugin_version(source: str | None = None) -> str:
    """The version line of a plugin's source, plus a digest of its code."""
    text = plugin_source() if source is None else source
    match = VERSION_LINE.search(text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{match['version']} ({digest})" if match else ""


def config_dir(commands: SlurmCommands) -> Path:
    """Where slurm.conf is, hence job_submit.lua and the table (Slurm looks there)."""
    conf = commands.slurm_conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF
    return Path(conf).parent


def _messages() -> dict[str, str]:
    """The plugin's messages (``{name}`` placeholders filled in by the plugin)."""
    refused = _("Refused by Arbiter")
    return {
        "rewritten": _(
            "Arbiter rewrote the untyped request gpu:{count} to gpu:{type}:{count} (rule: "
            "project {project} may use only {type} GPUs in pool {pool}; its quota: {quota}). "
            "Ask for --gres=gpu:{type}:{count} yourself to silence this note."
        ),
        "untyped_many": refused
        + _(
            " (rule: an untyped GPU request must name a type when the project has quota for "
            "several): project {project} may use {types} in pool {pool} (its quota: {quota}). "
            "Submit a typed request instead, e.g. --gres=gpu:{example}:{count}."
        ),
        "no_quota": refused
        + _(
            " (rule: GPU quota): project {project} has no GPU quota in pool {pool} (account "
            "{account}). Submit without GPUs, or ask the project's owner for a quota."
        ),
        "no_quota_type": refused
        + _(
            " (rule: GPU quota per type): project {project} has no quota for {type} GPUs in "
            "pool {pool} (its quota: {quota}). Submit --gres=gpu:{example}:N instead."
        ),
        "over_max": refused
        + _(
            " (rule: project maximum): project {project} may hold at most {max} {type} GPUs "
            "in pool {pool} (its quota: {quota}); this job asks for {total}, so it could never "
            "start. Submit at most {max}."
        ),
        "over_per_job": refused
        + _(
            " (rule: GPUs per job in QOS {qos}): at most {cap} GPUs per job; this job asks for "
            "{total}. Submit at most {cap} GPUs per job, or use another tier (project "
            "{project}'s quota: {quota})."
        ),
        "over_tier_cap": refused
        + _(
            " (rule: GPU cap of QOS {qos}): the tier holds at most {cap} GPUs across projects; "
            "this job asks for {total}, so it could never start. Submit at most {cap} GPUs, or "
            "use another tier (project {project}'s quota: {quota})."
        ),
    }


@gc_paused()
def table_data(*, state: State, cluster_name: str, on_expiry: str = "refuse") -> dict[str, Any]:
    """The table's content, compiled from the state Arbiter applied (no expiry).
    ``on_expiry``: what the plugin does once it has expired ("refuse" or "native", the
    cluster's ``submit_table_lapse``)."""
    accounts: dict[str, dict[str, Any]] = {}
    for name, fields in sorted(state.get(ACCOUNT, {}).items()):
        if fields.get("parent") in ("", "root", ROOT_ACCOUNT) or "." not in name:
            continue
        tres = {key: int(value) for key, value in parse_tres(fields.get("grp_tres", "")).items()}
        typed = {
            key.removeprefix(f"{GPU}:"): value
            for key, value in tres.items()
            if key.startswith(f"{GPU}:")
        }
        total = tres.get(GPU, 0)
        pool, _sep, project = name.partition(".")
        accounts[name] = {
            "project": project,
            "pool": pool,
            "max": typed,
            "untyped": total,
            # An untyped flavor's quota: untyped requests are its own, held natively.
            "untyped_ok": total > sum(typed.values()),
        }
    qos: dict[str, dict[str, int]] = {}
    for name, fields in sorted(state.get(QOS, {}).items()):
        limits = {}
        cap = parse_tres(fields.get("grp_tres", "")).get(GPU)
        per_job = parse_tres(fields.get("max_tres_per_job", "")).get(GPU)
        if cap:
            limits["cap"] = int(cap)
        if per_job:
            limits["per_job"] = int(per_job)
        if limits:
            qos[name] = limits
    default_qos = {
        name: fields["default_qos"]
        for name, fields in sorted(state.get(ASSOCIATION, {}).items())
        if fields.get("default_qos") and split_association(name)[1] in accounts
    }
    messages = {}
    for code, language in (("en", "en"), ("zh", "zh-hans")):
        with translation.override(language):
            messages[code] = _messages()
    data = {
        "format": TABLE_FORMAT,
        "cluster": cluster_name,
        "accounts": accounts,
        "qos": qos,
        "default_qos": default_qos,
        "messages": messages,
    }
    if on_expiry != "refuse":  # tables of clusters that refuse stay as they were
        data["on_expiry"] = on_expiry
    data["fingerprint"] = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return data


def _lua_escape(match: re.Match[str]) -> str:
    return f"\\{ord(match[0]):03d}"


def _lua(value: Any, indent: str = "") -> str:
    """A Lua literal for JSON-like data (strings escaped, keys always bracketed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + LUA_ESCAPE.sub(_lua_escape, value) + '"'
    inner = indent + "  "
    items = [f"{inner}[{_lua(key)}] = {_lua(item, inner)}," for key, item in value.items()]
    return "{\n" + "\n".join(items) + f"\n{indent}}}" if items else "{}"


@gc_paused()
def table_text(data: dict[str, Any], *, expires: int) -> str:
    body = {**data, "expires": expires}
    text = (
        "-- Written by Arbiter's Slurm sync; read by job_submit.lua. Do not edit.\n"
        f"return {_lua(body)}\n"
    )
    header = (
        f"-- arbiter-submit-table format={TABLE_FORMAT} fingerprint={data['fingerprint']} "
        f"expires={expires} checksum={table_checksum(text)}"
    )
    return f"{header}\n{text}"


def table_checksum(body: str) -> int:
    """Adler-32 of the table's body (every byte after the first line), as the plugin checks
    it: any damage to the body, not only to the first line, is found."""
    return zlib.adler32(body.encode("utf-8"))


def table_intact(text: str) -> bool:
    """The file's first line is a table header and its body matches the header's checksum."""
    first, newline, body = text.partition("\n")
    header = HEADER.match(first)
    return bool(newline and header and header.group(4)) and int(
        header.group(4)  # type: ignore[union-attr]
    ) == table_checksum(body)


def table_ttl() -> int:
    return int(getattr(settings, "ARBITER_SLURM_SUBMIT_TABLE_TTL", 900))


def table_render(*, state: State, cluster_name: str, on_expiry: str = "refuse") -> dict[str, Any]:
    """The table's text as the sync writes it (beside slurm.conf, or for the pull agent),
    valid ``ARBITER_SLURM_SUBMIT_TABLE_TTL`` from now; with its fingerprint and expiry."""
    data = table_data(state=state, cluster_name=cluster_name, on_expiry=on_expiry)
    expires = int(time.time()) + table_ttl()
    return {
        "text": table_text(data, expires=expires),
        "fingerprint": data["fingerprint"],
        "expires": expires,
    }


def table_header(text: str) -> tuple[str, int] | None:
    """The fingerprint and expiry on a table's first line (None: not a table)."""
    header = HEADER.match(text)
    return (header.group(2), int(header.group(3))) if header else None


def table_write(
    *, commands: SlurmCommands, state: State, cluster_name: str, on_expiry: str = "refuse"
) -> dict[str, Any]:
    """Write the table beside slurm.conf (atomically); returns its fingerprint and expiry."""
    rendered = table_render(state=state, cluster_name=cluster_name, on_expiry=on_expiry)
    target = config_dir(commands) / TABLE_NAME
    handle, temporary = tempfile.mkstemp(prefix=".arbiter-table-", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(rendered["text"])
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return {"fingerprint": rendered["fingerprint"], "expires": rendered["expires"]}


def plugin_status(
    *,
    commands: SlurmCommands,
    state: State,
    cluster_name: str,
    now: float | None = None,
    plugins: str | None = None,
    on_expiry: str = "refuse",
    agent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Whether the plugin is installed and current, and whether its table is.

    ``agent``: the table is pulled by the agent on the controller host (no file here); what
    the agent last reported (its plugin's version, the table it holds) stands for the files.

    ``installed``: slurmctld runs ``JobSubmitPlugins=lua`` and job_submit.lua beside
    slurm.conf is Arbiter's; ``current``: it is this version of Arbiter's plugin;
    ``table_current``: the table is the one compiled from ``state`` and has not expired.
    """
    now = time.time() if now is None else now
    directory = config_dir(commands)
    if plugins is None:  # else: JobSubmitPlugins as read a moment ago
        out = commands.run(["scontrol", "show", "config"])
        plugins = next(
            (
                line.partition("=")[2].strip()
                for line in out.splitlines()
                if line.split("=")[0].strip() == "JobSubmitPlugins"
            ),
            "",
        )
    enabled = "lua" in {item.strip().removeprefix("job_submit/") for item in plugins.split(",")}
    wanted = table_data(state=state, cluster_name=cluster_name, on_expiry=on_expiry)["fingerprint"]
    if agent is not None:
        # The agent checks the header, the checksum and the digest before it keeps a table.
        installed_version = str(agent.get("plugin_version", ""))
        fingerprint = str(agent.get("fingerprint", ""))
        expires = int(agent.get("expires", 0) or 0)
        found, intact = ("" if fingerprint else "missing"), bool(fingerprint)
    else:
        try:
            installed_source = (directory / PLUGIN_NAME).read_text(encoding="utf-8")
        except OSError:
            installed_source = ""
        installed_version = plugin_version(installed_source) if installed_source else ""
        try:
            text = (directory / TABLE_NAME).read_text(encoding="utf-8")
            found = "empty" if not text else ""
        except FileNotFoundError:
            text, found = "", "missing"
        except (OSError, UnicodeDecodeError):
            text, found = "", "unreadable"
        header = HEADER.match(text.partition("\n")[0])
        intact = table_intact(text)
        if not found and not intact:
            found = "damaged"
        fingerprint = header.group(2) if header else ""
        expires = int(header.group(3)) if header else 0
    return {
        "plugins": plugins,
        "installed": enabled and bool(installed_version),
        "installed_version": installed_version,
        "version": plugin_version(),
        "current": enabled and installed_version == plugin_version(),
        "table_fingerprint": fingerprint,
        "wanted_fingerprint": wanted,
        "table_expires": expires,
        "table_current": intact and fingerprint == wanted and expires > now,
        # "" when the file is a whole table; else missing, empty, unreadable or damaged
        # (its body does not match the checksum in its first line).
        "table_problem": found,
    }
