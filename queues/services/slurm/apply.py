"""Writing a plan to Slurm in as few sacctmgr and scontrol calls as it allows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.utils.translation import gettext as _

from queues.schedulers.backends import JOB, Action, ApplyResult, Change, Progress, State
from queues.schedulers.slurm.values import (
    ACCOUNT,
    ACCOUNT_OPTIONS,
    ASSOCIATION,
    ASSOCIATION_OPTIONS,
    CLEAR,
    GPU,
    LIMIT_OPTIONS,
    QOS,
    QOS_OPTIONS,
    ROOT_ACCOUNT,
    TRES_FIELDS,
    association_name,
    cap_families,
    format_duration,
    format_tres,
    parse_tres,
    split_association,
)

from .commands import SlurmCommands
from .tiercap import rebalance

# Changes per (kind, action), as the steps of ``apply_plan`` take them.
ByAction = dict[tuple[str, str], list[Change]]


def apply_plan(
    commands: SlurmCommands,
    *,
    cluster_name: str,
    plan: list[Change],
    desired: State,
    progress: Progress,
) -> ApplyResult:
    """Write the plan in as few ``sacctmgr -i`` calls as Slurm allows.

    1. ``add qos a,b,... <settings>`` for new QOS, marked as Arbiter's in the same call
       (one call per group of equal settings), then the Preempt lists and the changed QOS,
       grouped by identical settings (one ``modify qos`` per group);
    2. named jobs whose grant ended back to their old QOS (``scontrol update``, one call
       per QOS);
    3. one ``load`` for every new account and user association;
    4. account and association updates, grouped by identical settings;
    5. named jobs to the QOS their grants give them, one call per QOS;
    6. deletes: associations, then accounts (children first), then QOS.
    """
    start_writes = commands.writes
    warnings: list[str] = []
    by_action: ByAction = defaultdict(list)
    for change in plan:
        by_action[(change.kind, change.action)].append(change)

    _qos_write(commands, by_action, desired, warnings, progress)
    # Jobs go back to their old QOS before associations may stop allowing the one
    # Arbiter moved them to; raised jobs move once their associations allow the new one.
    moves = by_action[(JOB, Action.UPDATE)]
    backs = [c for c in moves if desired[JOB][c.name]["qos"] == desired[JOB][c.name]["restore"]]
    _move_jobs(commands, backs, warnings, progress)

    _accounts_load(commands, cluster_name, by_action, desired, progress)
    _accounts_update(commands, cluster_name, by_action, progress)
    _associations_update(commands, cluster_name, by_action, desired, progress)
    _move_jobs(commands, [c for c in moves if c not in backs], warnings, progress)
    _deletes(commands, cluster_name, by_action, progress)
    return ApplyResult(
        calls=commands.calls,
        writes=commands.writes - start_writes,
        warnings=[str(w) for w in warnings],
    )


def _qos_write(
    commands: SlurmCommands,
    by_action: ByAction,
    desired: State,
    warnings: list[str],
    progress: Progress,
) -> None:
    """Step 1: new QOS with their settings and mark, then Preempt lists and changed QOS."""
    new_qos = by_action[(QOS, Action.CREATE)]
    # Created with their settings and Arbiter's mark in the same command (one call per
    # group of equal settings), so a sync that stops halfway leaves only marked QOS; the
    # Preempt lists, which may name QOS of the same batch, follow.
    creations: dict[tuple[tuple[str, str], ...], list[str]] = defaultdict(list)
    # A capped tier's QOS share its cap: each is created with a share of 0 and the
    # rebalancer (``tiercap``) splits the cap afterwards, lowering before it raises.
    shared = {name for _cap, names in cap_families(desired.get(QOS, {})).values() for name in names}
    for change in new_qos:
        fields = desired[QOS][change.name]
        if change.name in shared:
            fields = {**fields, "grp_tres": _zero_share(fields["grp_tres"])}
        options = tuple(
            (QOS_OPTIONS[name], _qos_value(name, "", value))
            for name, value in fields.items()
            if name != "preempt" and value
        )
        creations[options].append(change.name)
    for options, names in creations.items():
        progress(_("creating QOS %(names)s") % {"names": ", ".join(names[:5])})
        commands.sacctmgr_write("add", "qos", ",".join(names), *_options(options))
    qos_sets: dict[tuple[tuple[str, str], ...], list[str]] = defaultdict(list)
    for change in new_qos + by_action[(QOS, Action.UPDATE)]:
        assignments = []
        for item in change.fields:
            value = item.desired
            if change.action == Action.CREATE and item.field != "preempt":
                continue
            if item.field == "grp_tres" and change.name in shared:
                continue  # the rebalancer's, below
            if item.field == "preempt" and not value:
                if change.action == Action.CREATE:
                    continue
                # Slurm 22.05: emptying a Preempt list upsets slurmdbd's QOS cache.
                warnings.append(
                    _(
                        "Cleared the Preempt list of QOS %(name)s: on Slurm 22.05 restart "
                        "slurmdbd before another QOS may preempt it."
                    )
                    % {"name": change.name}
                )
                value = CLEAR
            else:
                value = _qos_value(item.field, item.live, value)
            assignments.append((QOS_OPTIONS[item.field], value))
        if assignments:
            qos_sets[tuple(assignments)].append(change.name)
    for qos_assignments, names in qos_sets.items():
        progress(_("setting QOS %(names)s") % {"names": ", ".join(names[:5])})
        commands.sacctmgr_write(
            "modify",
            "qos",
            "where",
            f"name={','.join(names)}",
            "set",
            *_options(qos_assignments),
        )
    if shared:
        progress(_("splitting the tiers' GPU caps over their QOS"))
        rebalance(commands, qos=desired[QOS])


def _zero_share(grp_tres: str) -> str:
    return format_tres({**parse_tres(grp_tres), GPU: "0"})  # type: ignore[dict-item]


def _accounts_load(
    commands: SlurmCommands,
    cluster_name: str,
    by_action: ByAction,
    desired: State,
    progress: Progress,
) -> None:
    """Step 3: one ``load`` for every new account and user association."""
    new_accounts = by_action[(ACCOUNT, Action.CREATE)]
    new_associations = by_action[(ASSOCIATION, Action.CREATE)]
    if new_accounts or new_associations:
        progress(
            _("loading %(accounts)d accounts and %(associations)d user associations")
            % {"accounts": len(new_accounts), "associations": len(new_associations)}
        )
        commands.sacctmgr_write(
            "load",
            "file=/dev/stdin",
            stdin=_load_file(cluster_name, new_accounts, new_associations, desired),
        )


def _accounts_update(
    commands: SlurmCommands, cluster_name: str, by_action: ByAction, progress: Progress
) -> None:
    """Step 4a: changed accounts, grouped by identical settings."""
    account_sets: dict[tuple[tuple[str, str], ...], list[str]] = defaultdict(list)
    for change in by_action[(ACCOUNT, Action.UPDATE)]:
        account_assignments = tuple(
            (ACCOUNT_OPTIONS[item.field], _limit_value(item.field, item.live, item.desired))
            for item in change.fields
        )
        account_sets[account_assignments].append(change.name)
    for account_assignments, names in account_sets.items():
        progress(_("updating accounts %(names)s") % {"names": ", ".join(names[:5])})
        commands.sacctmgr_write(
            "modify",
            "account",
            "where",
            f"name={','.join(names)}",
            f"cluster={cluster_name}",
            "set",
            *_options(account_assignments),
        )


def _associations_update(
    commands: SlurmCommands,
    cluster_name: str,
    by_action: ByAction,
    desired: State,
    progress: Progress,
) -> None:
    """Step 4b: changed user associations, per account and identical settings."""
    association_sets: dict[tuple, list[str]] = defaultdict(list)
    for change in by_action[(ASSOCIATION, Action.UPDATE)]:
        user, account = split_association(change.name)
        # QOS and DefaultQOS go together: the default must be in the list.
        fields = desired[ASSOCIATION][change.name]
        user_assignments = tuple(
            (ASSOCIATION_OPTIONS[f], fields[f]) for f in ("qos", "default_qos") if f in fields
        ) + tuple(
            # Limits set by hand are cleared (-1); QOS lists are sent whole above.
            (ASSOCIATION_OPTIONS[item.field], _limit_value(item.field, item.live, item.desired))
            for item in change.fields
            if item.field not in ("qos", "default_qos")
        )
        association_sets[(account, user_assignments)].append(user)
    for (account, user_assignments), users in association_sets.items():
        progress(_("updating users of %(account)s") % {"account": account})
        commands.sacctmgr_write(
            "modify",
            "user",
            "where",
            f"name={','.join(users)}",
            f"account={account}",
            f"cluster={cluster_name}",
            "set",
            *_options(user_assignments),
        )


def _deletes(
    commands: SlurmCommands, cluster_name: str, by_action: ByAction, progress: Progress
) -> None:
    """Step 6: associations, then accounts (children first), then QOS."""
    removed_users: dict[str, list[str]] = defaultdict(list)
    for change in by_action[(ASSOCIATION, Action.DELETE)]:
        user, account = split_association(change.name)
        removed_users[account].append(user)
    deleted_accounts = {change.name for change in by_action[(ACCOUNT, Action.DELETE)]}
    for account, users in removed_users.items():
        if account in deleted_accounts:
            continue  # deleting the account removes its associations
        progress(_("removing users from %(account)s") % {"account": account})
        commands.sacctmgr_write(
            "delete",
            "user",
            "where",
            f"name={','.join(users)}",
            f"account={account}",
            f"cluster={cluster_name}",
        )
    if deleted_accounts:
        # Children before parents: project accounts, pool accounts, then the root one.
        depth = {name: name.count(".") + (name != ROOT_ACCOUNT) for name in deleted_accounts}
        for level in sorted(set(depth.values()), reverse=True):
            names = sorted(name for name in deleted_accounts if depth[name] == level)
            progress(_("deleting accounts %(names)s") % {"names": ", ".join(names[:5])})
            # Accounts are global in slurmdbd: deleting only this cluster's association
            # would leave an account that a later "add" skips as existing.
            commands.sacctmgr_write("delete", "account", "where", f"name={','.join(names)}")
    old_qos = [change.name for change in by_action[(QOS, Action.DELETE)]]
    if old_qos:
        progress(_("deleting QOS %(names)s") % {"names": ", ".join(old_qos[:5])})
        commands.sacctmgr_write("delete", "qos", "where", f"name={','.join(old_qos)}")


def _move_jobs(
    commands: SlurmCommands, changes: list[Change], warnings: list, progress: Progress
) -> None:
    """One ``scontrol update`` per target QOS; a job that started meanwhile is reported."""
    by_qos: dict[str, list[str]] = defaultdict(list)
    for change in changes:
        by_qos[change.fields[0].desired].append(change.name)
    for qos, jobs in sorted(by_qos.items()):
        progress(
            _("moving jobs %(jobs)s to QOS %(qos)s") % {"jobs": ", ".join(jobs[:5]), "qos": qos}
        )
        for job, error in sorted(commands.move_jobs(jobs, qos).items()):
            warnings.append(
                _("Job %(job)s was not moved to QOS %(qos)s: %(error)s")
                % {"job": job, "qos": qos, "error": error}
            )


def _load_file(
    cluster_name: str, accounts: list[Change], associations: list[Change], desired: State
) -> str:
    """A ``sacctmgr load`` file: new accounts under their parents, then new users."""
    lines = [f"Cluster - '{cluster_name}'"]
    # Parents first: the root account, then pool accounts, then project accounts.
    new = sorted(
        (change.name for change in accounts),
        key=lambda name: (name != ROOT_ACCOUNT, name.count("."), name),
    )
    parent = None
    for name in new:
        fields = desired[ACCOUNT][name]
        if fields["parent"] != parent:
            parent = fields["parent"]
            lines.append(f"Parent - '{parent}'")
        options = [
            f"Description='{fields['description']}'",
            f"Organization='{fields['organization']}'",
            f"Fairshare={fields['fairshare']}",
        ]
        if fields["grp_tres"]:
            options.append(f"GrpTRES='{fields['grp_tres']}'")
        lines.append(f"Account - '{name}':" + ":".join(options))
    by_account: dict[str, list[str]] = defaultdict(list)
    for change in associations:
        user, account = split_association(change.name)
        by_account[account].append(user)
    for account in sorted(by_account):
        lines.append(f"Parent - '{account}'")
        for user in sorted(by_account[account]):
            fields = desired[ASSOCIATION][association_name(user, account)]
            options = [f"QOS='{fields['qos']}'"]
            if fields["default_qos"]:
                options.append(f"DefaultQOS='{fields['default_qos']}'")
            lines.append(f"User - '{user}':" + ":".join(options))
    return "\n".join(lines) + "\n"


def _limit_value(name: str, live: str, desired: str) -> str:
    """An account or association field's sacctmgr value: TRES merged, a limit cleared (-1)."""
    if name in TRES_FIELDS:
        return _tres_assignment(live, desired)
    if name in LIMIT_OPTIONS and not desired:
        return "-1"
    return desired


def _tres_assignment(live: str, desired: str) -> str:
    """Set the desired TRES and clear (``=-1``) the ones no longer wanted: Slurm merges."""
    wanted: dict[str, int | str] = dict(parse_tres(desired))
    for key in parse_tres(live):
        wanted.setdefault(key, -1)
    return format_tres(wanted) if wanted else ""


def _qos_value(name: str, live: str, desired: str) -> str:
    """The sacctmgr value of one QOS field (clearing it when the desired value is empty)."""
    if name in TRES_FIELDS:
        return _tres_assignment(live, desired)
    if name == "grace_time":
        return desired or "0"
    if name == "preempt_exempt_time":
        return format_duration(desired) if desired else "-1"
    return desired


def _options(assignments: Iterable[tuple[str, str]]) -> list[str]:
    return [
        f"{option}=" if value == CLEAR else f"{option}={value}"
        for option, value in assignments
        if value != ""
    ]
