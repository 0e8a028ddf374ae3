"""Least-privilege MariaDB accounts: what each component may do, as GRANT statements.

=========  =============================================================================
agent      INSERT on power_samples, host_samples, their 1-minute aggregate tables,
           epoch_events, gpu_gaps, job_energy and agent_gaps (the last four replayed with
           INSERT IGNORE, so no read-back is needed); SELECT on nodes and gpus (its own ids) and
           on the key columns of the sample tables (which samples are stored, for spool
           replays, not their values); SELECT on job_attempts' job_id, attempt, node_id,
           end_s and power_limit_w (the fence: is a container it runs still its job's
           current attempt here, ``store/fence.py``, and at which GPU power limit);
           UPDATE of nodes.last_heartbeat_s, nodes.state and nodes.power_caps (what its
           GPUs accept as power limits) only. Nothing else on jobs, attempts, decisions,
           profiles; no DDL, no DELETE.
           Listed in ``agent_accounts``: the triggers of ``store/procedures.py`` keep a
           node's own account (``add_agent``) to that node, and any agent to attempts
           that ran on the node it writes for, plausible energy and up/down moves.
manager    SELECT, INSERT, UPDATE, DELETE on every data table (jobs, decisions, retention);
           no DDL (CREATE, ALTER, DROP, INDEX).
reporter   SELECT on every data table.
migrator   ALL on the database (DDL for ``andreas db upgrade``), no GRANT OPTION.
submitter  a MariaDB *role* (no password, no login) that every person's own account gets
           as its default role (``andreas db add-user``): SELECT on the views
           ``my_jobs`` and ``my_job_attempts`` (the caller's own jobs) and on nodes, gpus,
           decisions, epoch_events, job_energy, the power readings and the view
           ``node_jobs`` (which job runs on which GPUs: inventory, plans and measurements,
           no job spec); EXECUTE on the procedures ``andreas_submit`` and
           ``andreas_cancel``. Nothing on the ``jobs`` table itself (migration 0006).
=========  =============================================================================

Every account may read ``alembic_version`` (the schema check every component makes).
MariaDB has no row-level privileges: the grant limits the agent to three columns of
``nodes``, the triggers to its own row (an account of its own per node) and to moves
between ``up`` and ``down``.

The statements are idempotent: create the account if missing, set its password, revoke
everything, grant exactly the list (re-run after an upgrade that adds tables).
Table-level grants need the tables, so run ``andreas db upgrade`` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from andreas.errors import InputError
from andreas.infra.fileio import read_text_capped
from andreas.store.models import Base
from andreas.store.procedures import literal

ROLES = ("agent", "manager", "reporter", "migrator")
SUBMITTER = "submitter"
SUBMITTER_SELECT = ("my_jobs", "my_job_attempts", "nodes", "gpus", "decisions",
                    "epoch_events", "job_energy", "node_jobs", "power_samples",
                    "host_samples", "gpu_gaps")
SUBMITTER_EXECUTE = ("andreas_submit", "andreas_cancel")
DEFAULT_PREFIX = "andreas_"
DEFAULT_HOST = "%"
VERSION_TABLE = "alembic_version"
AGENT_INSERT = ("power_samples", "power_minutes", "host_samples", "host_minutes",
                "epoch_events", "gpu_gaps", "job_energy", "agent_gaps")
AGENT_SELECT = ("nodes", "gpus")
AGENT_SELECT_COLUMNS: dict[str, tuple[str, ...]] = {"power_samples": ("gpu_id", "t"),
                                                    "host_samples": ("node_id", "t")}
AGENT_UPDATE: dict[str, tuple[str, ...]] = {"nodes": ("last_heartbeat_s", "state", "power_caps")}
AGENT_READ_ONLY_COLUMNS: dict[str, tuple[str, ...]] = {
    "job_attempts": ("job_id", "attempt", "node_id", "end_s", "power_limit_w")}
_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")          # fullmatch: '$' would take a final '\n'
_HOST = re.compile(r"[A-Za-z0-9_.%:\-]{1,255}")
# A person's own account: their OS user name as a rule (letters, digits, _ . -), never
# a service account's name (anything starting with the prefix) or the server's own.
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}")
_RESERVED_USERS = ("root", "mysql", "mariadb.sys", "public", "none")
# A person's account may keep one statement (a procedure call, a query of a view) busy
# this long and hold this many connections: enough for the CLI, not for a siege.
PERSON_MAX_STATEMENT_S = 30
PERSON_MAX_CONNECTIONS = 20


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
    if not prefix or not _NAME.fullmatch(prefix):
        raise InputError(f"account prefix {prefix!r}: use letters, digits and _ only")
    if not _HOST.fullmatch(host):
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
    if not _NAME.fullmatch(database):
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
    if not prefix or not _NAME.fullmatch(prefix):
        raise InputError(f"account prefix {prefix!r}: use letters, digits and _ only")
    return f"{prefix}{SUBMITTER}"


def submitter_grants(database: str, prefix: str = DEFAULT_PREFIX) -> list[str]:
    """The GRANT statements of the submitter role (after REVOKE ALL)."""
    if not _NAME.fullmatch(database):
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


def user_account(name: str, host: str = DEFAULT_HOST,
                 prefix: str = DEFAULT_PREFIX) -> Account:
    """A person's own account (role ``submitter``); the one rule for their names."""
    if not isinstance(name, str) or not _USER.fullmatch(name):
        raise InputError(f"user {name!r}: 1-80 letters, digits, '_', '.', '-' (an OS user "
                         "name, as a rule)")
    if name.lower().startswith(prefix.lower()) or name.lower() in _RESERVED_USERS:
        raise InputError(f"user {name!r}: the name of a service or server account (names "
                         f"starting with {prefix!r} and {', '.join(_RESERVED_USERS)} are "
                         "reserved)")
    if not _HOST.fullmatch(host):
        raise InputError(f"account host {host!r}: use a host name, an IP or a % pattern")
    return Account(SUBMITTER, name, host)


def _dbapi_cursor(conn: Connection) -> Any:
    """A raw DB-API cursor: account statements bind passwords as parameters, which
    SQLAlchemy's text() cannot do inside CREATE USER / ALTER USER."""
    raw = conn.connection.dbapi_connection
    if raw is None:
        raise RuntimeError("connection already closed")
    return raw.cursor()


def _case_clash(cursor: Any, name: str) -> str | None:
    """An existing account or role whose name differs from ``name`` only in case: owners
    are compared byte for byte, but two such people would be one to a person reading
    ``queue``, and to every tool that folds case."""
    cursor.execute("SELECT DISTINCT User FROM mysql.global_priv WHERE LOWER(User) = "
                   "LOWER(%s) AND CAST(User AS BINARY) <> CAST(%s AS BINARY) LIMIT 1",
                   (name, name))
    row = cursor.fetchone()
    if row is None:
        return None
    return row[0].decode() if isinstance(row[0], bytes) else str(row[0])


def add_user(engine: Engine, name: str, *, password: str | None, host: str = DEFAULT_HOST,
             prefix: str = DEFAULT_PREFIX) -> Account:
    """Create or update a person's account with the submitter role as its default role.

    ``password`` None: ``IDENTIFIED VIA unix_socket`` (the OS user of that name logs in
    through the server's socket, no password: the database account *is* the OS user).
    Passwords are bound parameters, never logged. Run ``create-users`` first (the role).
    """
    account = user_account(name, host, prefix)
    role = f"`{submitter_role(prefix)}`"
    with engine.begin() as conn:
        cursor = _dbapi_cursor(conn)
        try:
            clash = _case_clash(cursor, name)
            if clash is not None:
                raise InputError(f"user {name!r}: account {clash!r} exists; names must "
                                 "differ in more than case")
            quoted = account.sql_name.replace("%", "%%")
            if password is None:
                cursor.execute(f"CREATE USER IF NOT EXISTS {account.sql_name} "
                               "IDENTIFIED VIA unix_socket")
                cursor.execute(f"ALTER USER {account.sql_name} IDENTIFIED VIA unix_socket")
            else:
                cursor.execute(f"CREATE USER IF NOT EXISTS {quoted} IDENTIFIED BY %s",
                               (password,))
                cursor.execute(f"ALTER USER {quoted} IDENTIFIED BY %s", (password,))
            cursor.execute(f"ALTER USER {account.sql_name} WITH MAX_USER_CONNECTIONS "
                           f"{PERSON_MAX_CONNECTIONS} MAX_STATEMENT_TIME "
                           f"{PERSON_MAX_STATEMENT_S}")
            cursor.execute(f"GRANT {role} TO {account.sql_name}")
            cursor.execute(f"SET DEFAULT ROLE {role} FOR {account.sql_name}")
        finally:
            cursor.close()
    return account


def remove_user(engine: Engine, name: str, *, host: str = DEFAULT_HOST,
                prefix: str = DEFAULT_PREFIX) -> None:
    """Drop a person's account (their jobs keep their owner)."""
    account = user_account(name, host, prefix)
    with engine.begin() as conn:
        cursor = _dbapi_cursor(conn)
        try:
            cursor.execute(f"DROP USER IF EXISTS {account.sql_name}")
        finally:
            cursor.close()


# -- agents: which database accounts are node agents, and for which node
# (``agent_accounts``; the triggers of store/procedures.py keep each to its node).
_AGENT_LOGIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}")


def agent_login(node: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The default account of ``node``'s agent: ``<prefix>agent_<node>`` (characters a
    MariaDB name should not hold become '_')."""
    return (f"{prefix}agent_" + re.sub(r"[^A-Za-z0-9_.-]", "_", node))[:80]


def register_agent_sql(database: str, login: str, node: str | None) -> str:
    """The statement that records ``login`` as an agent of ``node`` (None: any node)."""
    if not _NAME.fullmatch(database) or not _AGENT_LOGIN.fullmatch(login):
        raise InputError(f"agent account {login!r} in {database!r}: not a valid name")
    value = "NULL" if node is None else literal(node)
    return (f"INSERT INTO `{database}`.`agent_accounts` (login, node) VALUES ('{login}', "
            f"{value}) ON DUPLICATE KEY UPDATE node = {value}")


def add_agent(engine: Engine, database: str, node: str, *, password: str,
              login: str | None = None, host: str = DEFAULT_HOST,
              prefix: str = DEFAULT_PREFIX) -> Account:
    """Create or update the account of one node's agent: the agent's grants, and an
    ``agent_accounts`` row that keeps it to ``node`` (samples, gaps, epochs, energy and
    the node row of that node only). Passwords are bound parameters, never logged."""
    if not node or len(node) > 128 or any(c.isspace() or c < " " for c in node):
        raise InputError(f"node {node!r}: 1-128 characters, no spaces or control characters")
    login = login or agent_login(node, prefix)
    if not _AGENT_LOGIN.fullmatch(login) or not login.lower().startswith(prefix.lower()):
        raise InputError(f"agent account {login!r}: 1-80 letters, digits, '_', '.', '-', "
                         f"starting with the service prefix {prefix!r}")
    if not _HOST.fullmatch(host):
        raise InputError(f"account host {host!r}: use a host name, an IP or a % pattern")
    account = Account("agent", login, host)
    statements = grants(database, account)
    with engine.begin() as conn:
        cursor = _dbapi_cursor(conn)
        try:
            quoted = account.sql_name.replace("%", "%%")
            cursor.execute(f"CREATE USER IF NOT EXISTS {quoted} IDENTIFIED BY %s", (password,))
            cursor.execute(f"ALTER USER {quoted} IDENTIFIED BY %s", (password,))
            cursor.execute(f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {account.sql_name}")
            for statement in statements:
                cursor.execute(statement)
            cursor.execute(register_agent_sql(database, login, node))
        finally:
            cursor.close()
    return account


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
        if a.role == "agent":
            lines.append(register_agent_sql(database, a.user, None) + ";")
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
            out[role] = read_text_capped(path, what="password file", limit=4096,
                                         label=f"{var}_FILE={path}").rstrip("\r\n")
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
        cursor = _dbapi_cursor(conn)
        try:
            for a in accts:
                name = a.sql_name.replace("%", "%%")
                cursor.execute(f"CREATE USER IF NOT EXISTS {name} IDENTIFIED BY %s",
                               (passwords[a.role],))
                cursor.execute(f"ALTER USER {name} IDENTIFIED BY %s", (passwords[a.role],))
                cursor.execute(f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {a.sql_name}")
                for statement in grants(database, a):
                    cursor.execute(statement)
                if a.role == "agent":                 # the fleet's: any node, as an agent
                    cursor.execute(register_agent_sql(database, a.user, None))
            if submitter:
                for statement in _submitter_statements(database, prefix):
                    cursor.execute(statement)
        finally:
            cursor.close()
    return accts


def drop(engine: Engine, prefix: str = DEFAULT_PREFIX, host: str = DEFAULT_HOST) -> None:
    with engine.begin() as conn:
        cursor = _dbapi_cursor(conn)
        try:
            for a in accounts(prefix, host):
                cursor.execute(f"DROP USER IF EXISTS {a.sql_name}")
            cursor.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                           "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'agent_accounts'")
            # COUNT(*) gives one row; a migrated database: forget its agents
            if cursor.fetchone()[0]:
                cursor.execute("DELETE FROM agent_accounts WHERE login LIKE %s",
                               (prefix.replace("_", "\\_") + "agent%",))
            cursor.execute(f"DROP ROLE IF EXISTS `{submitter_role(prefix)}`")
        finally:
            cursor.close()
