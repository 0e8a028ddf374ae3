"""The manager's lease: which Job Manager may act, and the fencing token of its writes.

One row of ``manager_lease`` (id 1): ``holder`` (who), ``token`` (raised by one at every
take-over) and ``expires_s`` (the *database server's* clock, so managers on hosts whose
clocks differ agree). Only the manager's account may write the table (MariaDB grants;
on SQLite whoever may write the file, as for every row), so a submitter can neither take
nor hold it, unlike the server's named locks (``GET_LOCK``), which any account may take.

- :func:`take` is a compare-and-set on the token the caller read: of two managers that
  both saw the lease free, one gets it;
- :func:`renew` extends the lease while the token is still the caller's;
- :func:`install_fence` makes the first INSERT, UPDATE or DELETE of each transaction on
  an engine first run ``UPDATE manager_lease SET token = token WHERE id = 1 AND token =
  :mine`` in the same transaction, and raise :class:`LeaseLost` when it matches no row.
  The check and the writes commit together: a manager that took over has raised the
  token (its own write on that row, which waits for or is waited on by the other's
  transaction), so a manager that lost the lease, whatever it believes and however long
  a database blip lasted, cannot change anything; its transaction rolls back.

Times are seconds (the server's clock: ``UNIX_TIMESTAMP()`` on MariaDB, whole seconds;
``julianday('now')`` on SQLite).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Float, bindparam, event, func, literal_column
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.dml import UpdateBase

from andreas.errors import AndreasError
from andreas.store.tables import manager_lease as Lease

LEASE_ID = 1


class LeaseLost(AndreasError):
    """Another manager holds the lease now (its token replaced this one)."""


@dataclass(frozen=True, kw_only=True)
class LeaseState:
    """The lease as read, with the server's clock at the read (``now_s``)."""

    holder: str
    token: int
    expires_s: float
    now_s: float

    @property
    def expired(self) -> bool:
        return self.expires_s <= self.now_s

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.expires_s - self.now_s)


def server_now(conn: Connection) -> Any:
    """The database server's clock in seconds, as an SQL expression."""
    if conn.dialect.name == "sqlite":
        return literal_column("((julianday('now') - 2440587.5) * 86400.0)", Float)
    return func.unix_timestamp()


def read(conn: Connection) -> LeaseState:
    """The lease now (an empty one, token 0, when the row is missing)."""
    now = server_now(conn)
    row = conn.execute(select(Lease.c.holder, Lease.c.token, Lease.c.expires_s, now)
                       .where(Lease.c.id == LEASE_ID)).one_or_none()
    if row is None:
        return LeaseState(holder="", token=0, expires_s=0.0,
                          now_s=float(conn.execute(select(now)).scalar_one()))
    return LeaseState(holder=row[0], token=int(row[1]), expires_s=float(row[2]),
                      now_s=float(row[3]))


def take(conn: Connection, *, holder: str, seen: LeaseState, ttl_s: float) -> int | None:
    """Take the lease if its token is still the one in ``seen``; the new token, or None
    when another manager changed it first. The caller decides whether ``seen`` is free."""
    now = server_now(conn)
    token = seen.token + 1
    done = conn.execute(update(Lease).where(Lease.c.id == LEASE_ID,
                                            Lease.c.token == seen.token)
                        .values(holder=holder[:255], token=token, expires_s=now + ttl_s,
                                renewed_s=now))
    if done.rowcount == 1:
        return token
    if seen.token != 0:
        return None
    try:                           # no row yet (a schema made without the migration's row)
        conn.execute(Lease.insert().values(id=LEASE_ID, holder=holder[:255], token=token,
                                           expires_s=now + ttl_s, renewed_s=now))
    except IntegrityError:         # another manager inserted it first
        return None
    return token


def renew(conn: Connection, *, holder: str, token: int, ttl_s: float) -> bool:
    """Extend the lease by ``ttl_s`` from now if ``token`` is still current (also after it
    expired: nobody took it meanwhile, so nobody acted); False when it is not."""
    now = server_now(conn)
    done = conn.execute(update(Lease).where(Lease.c.id == LEASE_ID, Lease.c.token == token)
                        .values(holder=holder[:255], expires_s=now + ttl_s, renewed_s=now))
    return done.rowcount == 1


def give_up(conn: Connection, *, token: int) -> bool:
    """Let the lease expire now (a clean stop: a waiting manager takes it at once)."""
    done = conn.execute(update(Lease).where(Lease.c.id == LEASE_ID, Lease.c.token == token)
                        .values(expires_s=0.0))
    return done.rowcount == 1


_FENCE = (update(Lease).where(Lease.c.id == LEASE_ID, Lease.c.token == bindparam("mine"))
          .values(token=Lease.c.token))


def fence(conn: Connection, token: int) -> None:
    """Raise LeaseLost unless ``token`` is current; on MariaDB the lease row stays locked
    until the caller's transaction ends, so no take-over can commit in between."""
    if conn.execute(_FENCE, {"mine": token}).rowcount != 1:
        state = read(conn)
        raise LeaseLost(f"the manager lease is held by {describe(state.holder)} now (token "
                        f"{state.token}; this manager had {token})")


def install_fence(engine: Engine, token: Callable[[], int]) -> Callable[[], None]:
    """Fence every write made through ``engine`` (see the module docstring); ``token``
    returns the holder's token or raises LeaseLost. Returns the function that removes
    the fence (idempotent).

    Once per transaction: the fence's own write locks the lease row until the transaction
    ends (InnoDB's row lock; SQLite's write lock), so no take-over commits before a later
    write of the same transaction, and checking again would only repeat the round trip.
    A fence made inside a savepoint is not remembered (its rollback would undo it)."""
    fenced: weakref.WeakSet[Any] = weakref.WeakSet()   # transactions holding the row

    def before_execute(conn: Connection, clause: Any, *_args: Any) -> None:
        if isinstance(clause, UpdateBase) and getattr(clause, "table", None) is not Lease:
            root = conn.get_transaction()
            if root is not None and root in fenced:
                return
            fence(conn, token())
            if root is not None and conn.get_nested_transaction() is None:
                fenced.add(root)

    def remove() -> None:
        if event.contains(engine, "before_execute", before_execute):
            event.remove(engine, "before_execute", before_execute)

    event.listen(engine, "before_execute", before_execute)
    return remove


def describe(holder: str) -> str:
    """A holder string in words: ``pid 123 on host`` (see ``andreas/manager/lock.py``)."""
    parts = holder.split("/")
    if len(parts) >= 5 and parts[3].isdigit():
        return f"pid {parts[3]} on {parts[0]}"
    return holder or "nobody"
