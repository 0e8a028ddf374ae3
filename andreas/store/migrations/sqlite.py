"""Rebuilding a SQLite table in place, for migrations that change what SQLite cannot
alter (a CHECK constraint): one place, used by 0005 (jobs) and 0007 (nodes)."""

from __future__ import annotations

from sqlalchemy import Connection


def rebuild(bind: Connection, table: str, old: str, new: str) -> None:
    """Recreate ``table`` from its own DDL with the text ``old`` replaced by ``new``,
    keeping its rows and indexes, while other tables' rows reference it.

    Foreign keys are enforced on SQLite connections, so the checks are deferred to the
    commit, and the rows go back into a table of the *same name* after the drop: SQLite
    counts the children orphaned by the drop and settles each one only when a parent row
    of that name is inserted again (Alembic's copy-then-rename never settles them).
    pysqlite opens a transaction only before DML, and ``defer_foreign_keys`` lasts until
    the transaction ends, so a no-op DML opens it first.
    """
    ddl = bind.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' "
                               "AND name = ?", (table,)).scalar_one()
    if old not in ddl:
        raise RuntimeError(f"{table}: expected {old} in its DDL")
    indexes = [r[0] for r in bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
        "AND sql IS NOT NULL", (table,))]
    columns = ", ".join(f'"{r[1]}"' for r in bind.exec_driver_sql(
        f'PRAGMA table_info("{table}")'))
    copy = f"_{table}_rebuild"
    bind.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
    bind.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
    bind.exec_driver_sql(f'CREATE TABLE "{copy}" AS SELECT * FROM "{table}"')
    bind.exec_driver_sql(f'DROP TABLE "{table}"')
    bind.exec_driver_sql(ddl.replace(old, new))
    bind.exec_driver_sql(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{copy}"')
    bind.exec_driver_sql(f'DROP TABLE "{copy}"')
    for sql in indexes:
        bind.exec_driver_sql(sql)
