"""``andreas db``: create and upgrade the store, check it, make MariaDB accounts, down-sample.

The database is the configured one (``ANDREAS_DB_URL``, the config file's ``[store] url``,
or the default SQLite file; see ``andreas.config``). URLs are printed with the password
masked; passwords are read from files or the environment, never from the command line.
"""

from __future__ import annotations

import time
from typing import Any
from datetime import UTC, datetime

import click

from andreas.cli.common import Finite, db_errors
from andreas.config import MAX_DAYS, load_settings, mask_url
from andreas.errors import InputError
from andreas.store import accounts, migrate
from andreas.store.engine import connect, is_sqlite, make_engine
from andreas.store.opener import open_store
from andreas.store.errors import SchemaError
from andreas.store.retention import downsample


def _engine(create_dir: bool = False):
    settings = load_settings()
    engine = make_engine(settings.db_url, password_file=settings.db_password_file,
                         create_dir=create_dir)
    connect(engine)
    return settings, engine


@click.group("db")
def db_group() -> None:
    """The store: create or upgrade the schema, check it, accounts, retention.

    The database is ANDREAS_DB_URL, else [store] url in $ANDREAS_CONFIG or
    /etc/andreas/andreas.toml, else SQLite at $XDG_DATA_HOME/andreas/andreas.db
    (~/.local/share/andreas/andreas.db).
    """


@db_group.command("upgrade")
@click.option("--sql", "as_sql", is_flag=True,
              help="Print the DDL of a full upgrade for the configured backend instead of "
                   "running it (for a DBA to review or apply).")
@db_errors
def upgrade_cmd(as_sql: bool) -> None:
    """Create the schema, or upgrade it to this version's head; at head it does nothing."""
    if as_sql:
        settings = load_settings()
        from andreas.store.engine import parse_url

        url = parse_url(settings.db_url)
        click.echo(migrate.upgrade_sql(url.get_dialect().name), nl=False)
        return
    _, engine = _engine(create_dir=True)
    try:
        before, after = migrate.upgrade(engine)
    finally:
        engine.dispose()
    shown = mask_url(engine.url)
    if before == after:
        click.echo(f"database {shown}: already at revision {after} (head); nothing to do")
    else:
        click.echo(f"database {shown}: upgraded from {before or 'empty'} to {after} (head)")


@db_group.command("current")
@db_errors
def current_cmd() -> None:
    """Print the database in use (password masked), where its URL came from, and its revision."""
    settings, engine = _engine()
    try:
        st = migrate.status(engine)
    finally:
        engine.dispose()
    click.echo(f"url: {st.url} (from {settings.db_url_source})")
    click.echo(f"revision: {st.revision or 'none'}; head: {st.head}; state: {st.state}")
    if st.state is not migrate.SchemaState.HEAD:
        click.echo(st.describe())


@db_group.command("check")
@db_errors
def check_cmd() -> None:
    """Exit 0 when the database is reachable and at head; otherwise say what to run (exit 2)."""
    settings = load_settings()
    store = open_store(settings=settings, retries=0)
    try:
        click.echo(f"database {store.url}: ok (revision {migrate.head_revision()})")
    finally:
        store.dispose()


@db_group.command("downgrade")
@click.argument("revision")
@db_errors
def downgrade_cmd(revision: str) -> None:
    """Refused: migrations are forward-only (a downgrade would drop data).

    Restore a backup taken before the upgrade instead. Naming the current revision is a
    no-op, so scripts that pin a revision keep working.
    """
    _, engine = _engine()
    try:
        migrate.downgrade(engine, revision)
    finally:
        engine.dispose()
    click.echo(f"database {mask_url(engine.url)}: already at revision {revision}; nothing to do")


@db_group.command("create-users")
@click.option("--apply", "do_apply", is_flag=True,
              help="Create or update the accounts through the configured URL (an "
                   "administrator's); default: print the SQL script, passwords as variables.")
@click.option("--prefix", default=accounts.DEFAULT_PREFIX, show_default=True,
              help="Account names are PREFIX + agent / manager / reporter / migrator.")
@click.option("--host", "account_host", default=accounts.DEFAULT_HOST, show_default=True,
              help="Host part of the accounts ('%' = any host; e.g. '10.0.%').")
@click.option("--role", "roles", multiple=True,
              type=click.Choice((*accounts.ROLES, accounts.SUBMITTER)),
              help="Only these roles (repeatable); default: all four accounts and the "
                   "submitter role.")
@click.option("--database", default=None,
              help="Database the grants are on; default: the configured URL's database.")
@db_errors
def create_users_cmd(do_apply: bool, prefix: str, account_host: str, roles: tuple[str, ...],
                     database: str | None) -> None:
    """Least-privilege MariaDB accounts: agent, manager, reporter, migrator, and the role
    `submitter` that people's own accounts get (`andreas db add-user`).

    Passwords come from ANDREAS_DB_<ROLE>_PASSWORD_FILE or ANDREAS_DB_<ROLE>_PASSWORD
    (e.g. ANDREAS_DB_AGENT_PASSWORD_FILE), never from the command line. Run
    `andreas db upgrade` first: the grants name the tables.
    """
    submitter = not roles or accounts.SUBMITTER in roles
    roles = tuple(r for r in roles if r != accounts.SUBMITTER) if roles else accounts.ROLES
    settings = load_settings()
    from andreas.store.engine import parse_url

    url = parse_url(settings.db_url, settings.db_password_file)
    if not do_apply:
        if is_sqlite(url) and database is None:
            database = "andreas"
        target = database or url.database    # parse_url refuses a server URL without one
        if target is None:                     # (an in-memory SQLite URL and --database '')
            raise InputError(f"database URL {mask_url(url)!r} names no database: give "
                             "--database")
        click.echo(accounts.setup_script(target, prefix, account_host, roles,
                                         submitter=submitter), nl=False)
        return
    if is_sqlite(url):
        raise InputError(f"database URL {mask_url(url)!r}: accounts exist only on MariaDB; "
                         "SQLite is protected by its file's permissions")
    passwords = accounts.passwords_from_env(roles)
    _, engine = _engine()
    try:
        st = migrate.status(engine)
        if st.state is not migrate.SchemaState.HEAD:
            raise SchemaError(st.describe())
        made = accounts.apply(engine, database or engine.url.database, passwords, prefix,
                              account_host, submitter=submitter)
    finally:
        engine.dispose()
    for a in made:
        click.echo(f"account {a.sql_name}: {a.role} privileges on "
                   f"{database or engine.url.database}")
    if submitter:
        click.echo(f"role `{accounts.submitter_role(prefix)}`: submitter privileges on "
                   f"{database or engine.url.database} (give it to people with "
                   "`andreas db add-user`)")


def _admin_engine(what: str) -> Any:
    settings = load_settings()
    from andreas.store.engine import parse_url
    url = parse_url(settings.db_url, settings.db_password_file)
    if is_sqlite(url):
        raise InputError(f"database URL {mask_url(url)!r}: {what} exist only on MariaDB; on "
                         "SQLite the OS user is the job's owner")
    _, engine = _engine()
    return engine


@db_group.command("add-user")
@click.argument("name")
@click.option("--unix-socket", is_flag=True,
              help="Log in through the server's unix socket as the OS user NAME, no "
                   "password (MariaDB's unix_socket plugin; on the database host only).")
@click.option("--prefix", default=accounts.DEFAULT_PREFIX, show_default=True,
              help="The prefix given to `create-users` (the role is PREFIX + submitter).")
@click.option("--host", "account_host", default=accounts.DEFAULT_HOST, show_default=True,
              help="Host part of the account ('%' = any host).")
@db_errors
def add_user_cmd(name: str, unix_socket: bool, prefix: str, account_host: str) -> None:
    """A person's own MariaDB account NAME, with the submitter role: they submit, see and
    cancel their own jobs, nothing else. The password comes from
    ANDREAS_DB_USER_PASSWORD_FILE or ANDREAS_DB_USER_PASSWORD (never the command line),
    unless --unix-socket. Run as an administrator, after `create-users`.
    """
    password = None
    if not unix_socket:
        password = accounts.passwords_from_env(["user"])["user"]
    engine = _admin_engine("accounts")
    try:
        account = accounts.add_user(engine, name, password=password, host=account_host,
                                    prefix=prefix)
    finally:
        engine.dispose()
    how = "unix socket" if unix_socket else "password"
    click.echo(f"account {account.sql_name}: role {accounts.submitter_role(prefix)} "
               f"(login by {how}); their jobs are owned by {name!r}")


@db_group.command("add-agent")
@click.argument("node")
@click.option("--account", "login", default=None,
              help="The account's name [default: PREFIX + agent_ + NODE].")
@click.option("--prefix", default=accounts.DEFAULT_PREFIX, show_default=True,
              help="The prefix given to `create-users`.")
@click.option("--host", "account_host", default=accounts.DEFAULT_HOST, show_default=True,
              help="Host part of the account ('%' = any host).")
@db_errors
def add_agent_cmd(node: str, login: str | None, prefix: str, account_host: str) -> None:
    """An account of NODE's agent alone: the agent's privileges, and the database refuses
    its rows for any other node (samples, gaps, epochs, energy, the node's state). The
    password comes from ANDREAS_DB_AGENT_PASSWORD_FILE or ANDREAS_DB_AGENT_PASSWORD.
    Run as an administrator after `db upgrade`; put the account in that node's agent
    config ([store] url).
    """
    password = accounts.passwords_from_env(["agent"])["agent"]
    engine = _admin_engine("accounts")
    try:
        account = accounts.add_agent(engine, engine.url.database, node, password=password,
                                     login=login, host=account_host, prefix=prefix)
    finally:
        engine.dispose()
    click.echo(f"account {account.sql_name}: agent privileges, for node {node!r} only")


@db_group.command("remove-user")
@click.argument("name")
@click.option("--host", "account_host", default=accounts.DEFAULT_HOST, show_default=True)
@db_errors
def remove_user_cmd(name: str, account_host: str) -> None:
    """Drop a person's account; their jobs keep NAME as owner (operators can cancel them)."""
    engine = _admin_engine("accounts")
    try:
        accounts.remove_user(engine, name, host=account_host)
    finally:
        engine.dispose()
    click.echo(f"account {accounts.user_account(name, account_host).sql_name}: removed")


@db_group.command("retention")
@click.option("--keep-days", type=Finite(min=0, min_open=True, max=MAX_DAYS), default=None,
              help="Raw samples younger than this are kept (default: [store] "
                   "raw_retention_days, 7).")
@db_errors
def retention_cmd(keep_days: float | None) -> None:
    """Delete raw samples and GPU gaps older than the retention time, once; keep the 1-minute
    aggregates. Job energy windows go after ``[store] job_energy_retention_days`` (400).

    Also compacts the recent aggregates. Energy totals and mean powers do not change; safe
    to run while agents insert (e.g. hourly from a timer).
    """
    settings = load_settings()
    store = open_store(settings=settings, retries=0)
    days = settings.raw_retention_days if keep_days is None else keep_days
    start = time.perf_counter()
    try:
        r = downsample(store, keep_days=days,
                       job_energy_days=settings.job_energy_retention_days)
    finally:
        store.dispose()
    cutoff = datetime.fromtimestamp(r.cutoff_s, UTC).strftime("%Y-%m-%d %H:%M UTC")
    click.echo(f"retention ({days:g} days, raw samples before {cutoff}): deleted "
               f"{r.power_samples} GPU and {r.host_samples} host samples (their 1-minute "
               f"aggregates stay); compacted {r.power_rows_merged + r.host_rows_merged} "
               f"partial aggregate rows; deleted {r.gpu_gaps} GPU gap rows and "
               f"{r.job_energy} job energy windows (older than "
               f"{settings.job_energy_retention_days:g} days); "
               f"{time.perf_counter() - start:.1f} s")
