"""Least-privilege MariaDB accounts: what each component may do, as GRANT statements.

=========  =============================================================================
agent      INSERT on power_samples, host_samples, their 1-minute aggregate tables,
           epoch_events, gpu_gaps and job_energy (the last three replayed with INSERT
           IGNORE, so no read-back is needed); SELECT on nodes and gpus (its own ids) and
           on the key columns of the sample tables (which samples are stored, for spool
           replays, not their values); SELECT on job_attempts' job_id, attempt, node_id,
           end_s and power_limit_w (the fence: is a container it runs still its job's
           current attempt here, ``store/fence.py``, and at which GPU power limit);
           UPDATE of nodes.last_heartbeat_s, nodes.state and nodes.power_caps (what its
           GPUs accept as power limits) only. Nothing else on jobs, attempts, decisions,
           profiles; no DDL, no DELETE.
manager    SELECT, INSERT, UPDATE, DELETE on every data table (jobs, decisions, retention);
           no DDL (CREATE, ALTER, DROP, INDEX).
reporter   SELECT on every data table.
migrator   ALL on the database (DDL for ``andreas db upgrade``), no GRANT OPTION.
submitter  a MariaDB *role* (no password, no login) that every person's own account gets
           as its default role (``andreas db add-user``): SELECT on the views
           ``my_jobs`` and ``my_job_attempts`` (the caller's own jobs) and on nodes, gpus,
           decisions, epoch_events, job_energy (inventory, plans and measurements, no
           job spec); EXECUTE on the procedures ``andreas_submit`` and
           ``andreas_cancel``. Nothing on the ``jobs`` table itself (migration 0006).
=========  =============================================================================

Every account may read ``alembic_version`` (the schema check every component makes).
MariaDB has no row-level privileges: "its own node row" is what the agent's code
updates (``WHERE name = <its node>``); the grant limits it to the three columns.

The statements are idempotent: create the account if missing, set its password, revoke
everything, grant exactly the list (re-run after an upgrade that adds tables).
Table-level grants need the tables, so run ``andreas db upgrade`` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from andreas.errors import InputError
from andreas.store.models import Base

ROLES = ("agent", "manager", "reporter", "migrator")
SUBMITTER = "submitter"
SUBMITTER_SELECT = ("my_jobs", "my_job_attempts", "nodes", "gpus", "decisions",
                    "epoch_events", "job_energy")
SUBMITTER_EXECUTE = ("andreas_submit", "andreas_cancel")
DEFAULT_PREFIX = "andreas_"
DEFAULT_HOST = "%"
VERSION_TABLE = "alembic_version"
AGENT_INSERT = ("power_samples", "power_minutes", "host_samples", "host_minutes",
                "epoch_events", "gpu_gaps", "job_energy")
AGENT_SELECT = ("nodes", "gpus")
AGENT_SELECT_COLUMNS = {"power_samples": ("gpu_id", "t"), "host_samples": ("node_id", "t")}
AGENT_UPDATE = {"nodes": ("last_heartbeat_s", "state", "power_caps")}
AGENT_READ_ONLY_COLUMNS = {"job_attempts": ("job_id", "attempt", "node_id", "end_s",
                                            "power_limit_w")}
_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HOST = re.compile(r"^[A-Za-z0-9_.%:\-]{1,255}$")
# A person's account: their OS user name as a rule (letters, digits, _ . -).
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$")


@dataclass(frozen=True)
class Account:
    role: str
    user: str
    host: str

    @property
    def sql_name(self) -> str:
        return f"'{self.user}'@'{self.host}'"


def accounts(prefix: str = DEFAULT_PREFIX, host: str = DEFAULT_HOST,
             roles: Iterable[str] = ROLES) -> list[Account]:
    if not prefix or not _NAME.match(prefix):
        raise InputError(f"account prefix {prefix!r}: use letters, digits and _ only")
    if not _HOST.match(host):
        raise InputError(f"account host {host!r}: use a host name, an IP or a % pattern")
    out = []
    for role in roles:
        if role not in ROLES:
            raise InputError(f"unknown role {role!r} (known: {', '.join(ROLES)})")
        out.append(Account(role, f"{prefix}{role}", host))
    return out


def data_tables() -> list[str]:
    return [t.name for t in Base.metadata.sorted_tables]


def grants(database: str, account: Account) -> list[str]:
    """The GRANT statements of one account (after REVOKE ALL)."""
    if not _NAME.match(database):
        raise InputError(f"database name {database!r}: use letters, digits and _ only")
    to = f"TO {account.sql_name}"

    def on(table: str) -> str:
        return f"`{database}`.`{table}`"

    if account.role == "migrator":
        return [f"GRANT ALL PRIVILEGES ON `{database}`.* {to}"]
    out = [f"GRANT SELECT ON {on(VERSION_TABLE)} {to}"]
    if account.role == "agent":
        for table in AGENT_INSERT:
            cols = AGENT_SELECT_COLUMNS.get(table)
            select = f"SELECT ({', '.join(cols)}), " if cols else ""
            out.append(f"GRANT {select}INSERT ON {on(table)} {to}")
        for table in AGENT_SELECT:
            cols = AGENT_UPDATE.get(table)
            update = f", UPDATE ({', '.join(cols)})" if cols else ""
            out.append(f"GRANT SELECT{update} ON {on(table)} {to}")
        for table, cols in AGENT_READ_ONLY_COLUMNS.items():
            out.append(f"GRANT SELECT ({', '.join(cols)}) ON {on(table)} {to}")
    elif account.role == "manager":
        out += [f"GRANT SELECT, INSERT, UPDATE, DELETE ON {on(t)} {to}" for t in data_tables()]
    elif account.role == "reporter":
        out += [f"GRANT SELECT ON {on(t)} {to}" for t in data_tables()]
    return out


def submitter_role(prefix: str = DEFAULT_PREFIX) -> str:
    """The role's name, ``<prefix>submitter``."""
    if not prefix or not _NAME.match(prefix):
        raise InputError(f"account prefix {prefix!r}: use letters, digits and _ only")
    return f"{prefix}{SUBMITTER}"


def submitter_grants(database: str, prefix: str = DEFAULT_PREFIX) -> list[str]:
    """The GRANT statements of the submitter role (after REVOKE ALL)."""
    if not _NAME.match(database):
        raise InputError(f"database name {database!r}: use letters, digits and _ only")
    to = f"TO `{submitter_role(prefix)}`"
    return ([f"GRANT SELECT ON `{database}`.`{t}` {to}"
             for t in (VERSION_TABLE, *SUBMITTER_SELECT)]
            + [f"GRANT EXECUTE ON PROCEDURE `{database}`.`{p}` {to}"
               for p in SUBMITTER_EXECUTE])


def _submitter_statements(database: str, prefix: str) -> list[str]:
    role = f"`{submitter_role(prefix)}`"
    return [f"CREATE ROLE IF NOT EXISTS {role}",
            f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {role}",
            *submitter_grants(database, prefix)]


def user_account(name: str, host: str = DEFAULT_HOST) -> Account:
    """A person's own account (role ``submitter``)."""
    if not _USER.match(name):
        raise InputError(f"user {name!r}: 1-80 letters, digits, '_', '.', '-' (an OS user "
                         "name, as a rule)")
    if not _HOST.match(host):
        raise InputError(f"account host {host!r}: use a host name, an IP or a % pattern")
    return Account(SUBMITTER, name, host)


def add_user(engine: Engine, name: str, *, password: str | None, host: str = DEFAULT_HOST,
             prefix: str = DEFAULT_PREFIX) -> Account:
    """Create or update a person's account with the submitter role as its default role.

    ``password`` None: ``IDENTIFIED VIA unix_socket`` (the OS user of that name logs in
    through the server's socket, no password: the database account *is* the OS user).
    Passwords are bound parameters, never logged. Run ``create-users`` first (the role).
    """
    account = user_account(name, host)
    role = f"`{submitter_role(prefix)}`"
    with engine.begin() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            quoted = account.sql_name.replace("%", "%%")
            if password is None:
                cursor.execute(f"CREATE USER IF NOT EXISTS {account.sql_name} "
                               "IDENTIFIED VIA unix_socket")
                cursor.execute(f"ALTER USER {account.sql_name} IDENTIFIED VIA unix_socket")
            else:
                cursor.execute(f"CREATE USER IF NOT EXISTS {quoted} IDENTIFIED BY %s",
                               (password,))
                cursor.execute(f"ALTER USER {quoted} IDENTIFIED BY %s", (password,))
            cursor.execute(f"GRANT {role} TO {account.sql_name}")
            cursor.execute(f"SET DEFAULT ROLE {role} FOR {account.sql_name}")
        finally:
            cursor.close()
    return account


def remove_user(engine: Engine, name: str, *, host: str = DEFAULT_HOST) -> None:
    """Drop a person's account (their jobs keep their owner)."""
    account = user_account(name, host)
    with engine.begin() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.execute(f"DROP USER IF EXISTS {account.sql_name}")
        finally:
            cursor.close()


def _password_var(role: str) -> str:
    return f"@{role}_password"


def setup_script(database: str = "andreas", prefix: str = DEFAULT_PREFIX,
                 host: str = DEFAULT_HOST, roles: Iterable[str] = ROLES,
                 submitter: bool = True) -> str:
    """The SQL script (``scripts/mariadb-setup.sql``): passwords come from user variables
    set beforehand in the same session, never from the script itself."""
    accts = accounts(prefix, host, roles)
    lines = [
        "-- Least-privilege MariaDB accounts of andreas (generated by `andreas db create-users`;",
        "-- keep in sync: tests/store/test_privileges.py compares the two).",
        "--",
        f"-- Run as an administrator after `andreas db upgrade` created the schema of "
        f"`{database}`,",
        "-- with the passwords set first in the same session, e.g. from a root-only file:",
        "--   ( cat /root/andreas-passwords.sql; cat scripts/mariadb-setup.sql ) | mariadb -u root",
        "-- where andreas-passwords.sql holds lines like  SET @agent_password = '...';",
        "-- (one per role: " + ", ".join(_password_var(a.role) for a in accts) + ").",
        "-- Re-running it is safe: it resets passwords and grants exactly this list.",
        "",
        "DELIMITER //",
        "BEGIN NOT ATOMIC",
    ]
    for a in accts:
        var = _password_var(a.role)
        lines.append(f"  IF {var} IS NULL OR {var} = '' THEN SIGNAL SQLSTATE '45000' "
                     f"SET MESSAGE_TEXT = 'set {var} before running this script'; END IF;")
    lines += ["END //", "DELIMITER ;", ""]
    for a in accts:
        var = _password_var(a.role)
        lines.append(f"-- {a.role}")
        for verb in ("CREATE USER IF NOT EXISTS", "ALTER USER"):
            quoted = a.sql_name.replace("'", "''")
            lines.append(f"SET @andreas_sql = CONCAT('{verb} {quoted} IDENTIFIED BY ', "
                         f"QUOTE({var}));")
            lines.append("PREPARE andreas_stmt FROM @andreas_sql; EXECUTE andreas_stmt; "
                         "DEALLOCATE PREPARE andreas_stmt;")
        lines.append(f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {a.sql_name};")
        lines += [g + ";" for g in grants(database, a)]
        lines.append("")
    if submitter:
        lines.append(f"-- {SUBMITTER} (a role: people's own accounts get it from "
                     "`andreas db add-user`)")
        lines += [g + ";" for g in _submitter_statements(database, prefix)]
        lines.append("")
    lines.append("SET @andreas_sql = NULL;")
    return "\n".join(lines) + "\n"


def passwords_from_env(roles: Iterable[str],
                       environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``ANDREAS_DB_<ROLE>_PASSWORD`` or ``ANDREAS_DB_<ROLE>_PASSWORD_FILE`` per role."""
    env = os.environ if environ is None else environ
    out, missing = {}, []
    for role in roles:
        var = f"ANDREAS_DB_{role.upper()}_PASSWORD"
        if env.get(var + "_FILE"):
            path = env[var + "_FILE"]
            try:
                out[role] = Path(path).read_text().rstrip("\r\n")
            except OSError as e:
                raise InputError(f"{var}_FILE={path}: cannot read ({e.strerror})") from None
        elif env.get(var):
            out[role] = env[var]
        if not out.get(role):
            missing.append(f"{var} or {var}_FILE")
    if missing:
        raise InputError("no password for " + "; ".join(missing))
    return out


def apply(engine: Engine, database: str, passwords: Mapping[str, str],
          prefix: str = DEFAULT_PREFIX, host: str = DEFAULT_HOST, *,
          submitter: bool = False) -> list[Account]:
    """Create or update the accounts (and with ``submitter`` the role) through an
    administrator's connection.

    Passwords are sent as bound parameters (PyMySQL escapes them), never logged.
    """
    accts = accounts(prefix, host, passwords)
    with engine.begin() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            for a in accts:
                name = a.sql_name.replace("%", "%%")
                cursor.execute(f"CREATE USER IF NOT EXISTS {name} IDENTIFIED BY %s",
                               (passwords[a.role],))
                cursor.execute(f"ALTER USER {name} IDENTIFIED BY %s", (passwords[a.role],))
                cursor.execute(f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {a.sql_name}")
                for statement in grants(database, a):
                    cursor.execute(statement)
            if submitter:
                for statement in _submitter_statements(database, prefix):
                    cursor.execute(statement)
        finally:
            cursor.close()
    return accts


def drop(engine: Engine, prefix: str = DEFAULT_PREFIX, host: str = DEFAULT_HOST) -> None:
    with engine.begin() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            for a in accounts(prefix, host):
                cursor.execute(f"DROP USER IF EXISTS {a.sql_name}")
            cursor.execute(f"DROP ROLE IF EXISTS `{submitter_role(prefix)}`")
        finally:
            cursor.close()
