"""Measurements: batched sample inserts with their 1-minute aggregates, epoch events,
heartbeats, and the power and energy queries.

A batch of raw samples is inserted with one multi-row statement (PyMySQL rewrites the
``executemany`` into ``INSERT ... VALUES (...), (...), ...``; SQLite prepares once), and
its 1-minute partial aggregates with a second one, in the caller's transaction, so the
aggregates always account for exactly the raw samples that were committed. Every row and
the GPUs it names are checked first; a bad row fails the batch with a message instead of
landing in a table. Raw samples are append-only: rows written by other means (a bulk
load) need :func:`andreas.store.retention.rebuild_minutes` for their range.

Every sample says how it was measured (``energy_source``: counter | integrated | rapl |
model; ``power_source``: instant | average | rapl | model; ``counter_reset``), GPUs that
could not be read get ``gpu_gaps`` rows instead of zeros, and the agent's attribution of
energy to jobs goes to ``job_energy``. Every insert an agent makes can be repeated
without effect (``skip_duplicates``): an agent replaying its spool after an outage may
send rows that were committed just before the connection was lost.

Queries read the aggregates (``power_minutes``, ``host_minutes``) through covering
indexes, so their cost depends on the window (at most 1 440 rows per GPU and day), not on
the number of raw samples; a window counts the minutes that start in it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Select, func, insert, select
from sqlalchemy.exc import IntegrityError

from andreas.errors import InputError
from andreas.limits import REASON_CHARS
from andreas.sources import EnergySource, PowerSource
from andreas.store.nodes import Db
from andreas.store.tables import epoch_events as EpochEvent
from andreas.store.tables import gpus as Gpu
from andreas.store.tables import host_minutes as HostMinute
from andreas.store.tables import host_samples as HostSample
from andreas.store.tables import nodes as Node
from andreas.store.tables import power_minutes as PowerMinute
from andreas.store.tables import power_samples as PowerSample

DEFAULT_BATCH = 2000
POWER_MINUTE_COLUMNS = ("gpu_id", "minute_s", "busy_gpus", "node_id", "samples", "power_sum_w",
                        "power_max_w", "energy_mj", "energy_samples", "utilization_sum",
                        "utilization_samples", "memory_used_max_mib")
HOST_MINUTE_COLUMNS = ("node_id", "minute_s", "busy_gpus", "samples", "cpu_utilization_sum",
                       "memory_used_max_mib", "host_power_sum_w", "host_power_samples",
                       "energy_mj", "energy_samples")


class PowerRow(NamedTuple):
    """One GPU reading; ``energy_mj`` is the energy since the GPU's previous sample.

    ``energy_source`` / ``power_source`` take the store's enums, their values, or any enum
    with the same values (the agent's records); None when unknown.
    """

    gpu_id: int
    t: float
    node_id: int
    busy_gpus: int
    power_w: float
    energy_mj: int | None = None
    utilization: float | None = None
    memory_used_mib: int | None = None
    energy_source: EnergySource | str | None = None
    power_source: PowerSource | str | None = None
    counter_reset: bool = False
    power_limit_w: float | None = None      # the GPU's limit in force (agents/powerlimits.py)


class HostRow(NamedTuple):
    node_id: int
    t: float
    busy_gpus: int
    cpu_utilization: float
    memory_used_mib: int
    host_power_w: float | None = None
    energy_mj: int | None = None
    power_source: PowerSource | str | None = None    # rapl | model (estimated)
    energy_source: EnergySource | str | None = None
    agent_cpu_percent: float | None = None           # the agent's own use of one core
    agent_rss_mib: float | None = None


class GapRow(NamedTuple):
    """A GPU that could not be read at ``t``: a gap, not a zero sample."""

    gpu_id: int
    t: float
    reason: str


class AgentGapRow(NamedTuple):
    """Time the node's agent did not sample (``agent_gaps``); ``charged``: its GPUs'
    energy over it came from their energy counters."""

    node_id: int
    start_s: float
    end_s: float
    charged: bool
    reason: str


class JobEnergyRow(NamedTuple):
    """Energy attributed to a job over a window ending at ``t`` (see models.JobEnergy)."""

    job_id: str
    attempt: int
    t: float
    node_id: int
    interval_s: float
    gpus: int
    gpu_energy_mj: int | None = None
    host_energy_mj: int | None = None


_ENERGY_SOURCES = frozenset(e.value for e in EnergySource)
_POWER_SOURCES = frozenset(e.value for e in PowerSource)


def minute_of(t: float) -> float:
    """Start of the UTC minute that holds ``t``."""
    return math.floor(t / 60.0) * 60.0


def _connection(db: Db) -> Connection:
    return db if isinstance(db, Connection) else db.connection()


def _rows(rows: Iterable[Any], kind: type[Any]) -> list[tuple]:
    out = []
    for row in rows:
        if isinstance(row, Mapping):
            try:
                row = kind(**row)
            except TypeError as e:
                raise InputError(f"{kind.__name__}: {e}") from None
        elif not isinstance(row, kind):
            row = kind(*row)
        out.append(tuple(row))
    return out


def _finite(value: Any, what: str, row: Any, minimum: float | None = 0.0) -> None:
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or (minimum is not None and value < minimum)):
        raise InputError(f"sample {row}: {what} must be a finite number"
                         f"{f' >= {minimum:g}' if minimum is not None else ''}, got {value!r}")


def _energy(value: Any, row: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise InputError(f"sample {row}: energy_mj must be a whole number >= 0 or None, "
                         f"got {value!r}")


def _source(value: Any, allowed: frozenset[str], what: str, row: Any) -> str | None:
    """An enum member (of any enum class with the store's values) or its value, as the value."""
    value = getattr(value, "value", value)
    if value is not None and value not in allowed:
        raise InputError(f"sample {row}: {what} must be one of {', '.join(sorted(allowed))} "
                         f"or None, got {value!r}")
    return value


def _optional(value: Any, what: str, row: Any) -> None:
    if value is not None:
        _finite(value, what, row)


def _busy(value: Any, gpus: int, row: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= gpus:
        raise InputError(f"sample {row}: busy_gpus must be 0..{gpus} (the node's GPUs), "
                         f"got {value!r}")


def insert_power_samples(db: Db, rows: Iterable[PowerRow | Mapping | Sequence],
                         *, batch_size: int = DEFAULT_BATCH,
                         skip_duplicates: bool = False) -> int:
    """Insert GPU power samples and their 1-minute aggregates, in batches, in the caller's
    transaction; returns the raw rows written.

    Every row is checked (finite time and power, whole non-negative energy, busy count
    within the node's GPUs, GPU known and on that node). A second sample of the same GPU
    at the same time is a duplicate: an IntegrityError, or skipped with
    ``skip_duplicates`` (an agent replaying its spool after an outage).
    """
    data = _rows(rows, PowerRow)
    if not data:
        return 0
    conn = _connection(db)
    ids = sorted({r[0] for r in data})
    gpus = {g: (n, c) for g, n, c in conn.execute(
        select(Gpu.c.id, Gpu.c.node_id, Node.c.gpu_count).join(Node, Node.c.id == Gpu.c.node_id)
        .where(Gpu.c.id.in_(ids)))}
    for i, r in enumerate(data):
        gpu_id, t, node_id, busy, power, energy = r[:6]
        where = gpus.get(gpu_id)
        if where is None:
            raise InputError(f"sample {r}: gpu_id {gpu_id} is not a known GPU")
        if where[0] != node_id:
            raise InputError(f"sample {r}: gpu_id {gpu_id} is on node_id {where[0]}, "
                             f"not {node_id}")
        _finite(t, "t", r, None)
        _finite(power, "power_w", r)
        _busy(busy, where[1], r)
        _energy(energy, r)
        _optional(r[6], "utilization", r)
        if not isinstance(r[10], bool):
            raise InputError(f"sample {r}: counter_reset must be true or false, got {r[10]!r}")
        _optional(r[11], "power_limit_w", r)
        data[i] = (*r[:8], _source(r[8], _ENERGY_SOURCES, "energy_source", r),
                   _source(r[9], _POWER_SOURCES, "power_source", r), r[10], r[11])
    if skip_duplicates:
        data = _new_rows(conn, PowerSample.c.gpu_id, PowerSample.c.t, data)
    written = 0
    for start in range(0, len(data), max(1, batch_size)):
        batch = data[start:start + batch_size]
        written += _execute_many(conn, "power_samples", PowerRow._fields, batch)
        _execute_many(conn, "power_minutes", POWER_MINUTE_COLUMNS, _power_minutes(batch))
    return written


def insert_host_samples(db: Db, rows: Iterable[HostRow | Mapping | Sequence],
                        *, batch_size: int = DEFAULT_BATCH,
                        skip_duplicates: bool = False) -> int:
    """Insert host samples (CPU, memory, host power) and their 1-minute aggregates; checked
    and batched like GPU samples."""
    data = _rows(rows, HostRow)
    if not data:
        return 0
    conn = _connection(db)
    ids = sorted({r[0] for r in data})
    counts = dict(conn.execute(select(Node.c.id, Node.c.gpu_count).where(Node.c.id.in_(ids))).all())
    for i, r in enumerate(data):
        node_id, t, busy, cpu, mem, power, energy = r[:7]
        if node_id not in counts:
            raise InputError(f"sample {r}: node_id {node_id} is not a known node")
        _finite(t, "t", r, None)
        _finite(cpu, "cpu_utilization", r)
        _finite(mem, "memory_used_mib", r)
        _optional(power, "host_power_w", r)
        _busy(busy, counts[node_id], r)
        _energy(energy, r)
        _optional(r[9], "agent_cpu_percent", r)
        _optional(r[10], "agent_rss_mib", r)
        data[i] = (*r[:7], _source(r[7], _POWER_SOURCES, "power_source", r),
                   _source(r[8], _ENERGY_SOURCES, "energy_source", r), *r[9:])
    if skip_duplicates:
        data = _new_rows(conn, HostSample.c.node_id, HostSample.c.t, data)
    written = 0
    for start in range(0, len(data), max(1, batch_size)):
        batch = data[start:start + batch_size]
        written += _execute_many(conn, "host_samples", HostRow._fields, batch)
        _execute_many(conn, "host_minutes", HOST_MINUTE_COLUMNS, _host_minutes(batch))
    return written


def _power_minutes(rows: list[tuple]) -> list[tuple]:
    """Partial aggregates of a batch, one row per (GPU, minute, busy count)."""
    acc: dict[tuple, list] = {}
    for gpu_id, t, node_id, busy, power, energy, util, mem, *_ in rows:
        key = (gpu_id, minute_of(t), busy)
        a = acc.get(key)
        if a is None:
            a = acc[key] = [node_id, 0, 0.0, power, 0, 0, 0.0, 0, None]
        a[1] += 1
        a[2] += power
        a[3] = max(a[3], power)
        if energy is not None:
            a[4] += energy
            a[5] += 1
        if util is not None:
            a[6] += util
            a[7] += 1
        if mem is not None:
            a[8] = mem if a[8] is None else max(a[8], mem)
    return [(*key, *a) for key, a in sorted(acc.items())]


def _host_minutes(rows: list[tuple]) -> list[tuple]:
    acc: dict[tuple, list] = {}
    for node_id, t, busy, cpu, mem, power, energy, *_ in rows:
        key = (node_id, minute_of(t), busy)
        a = acc.get(key)
        if a is None:
            a = acc[key] = [0, 0.0, mem, 0.0, 0, 0, 0]
        a[0] += 1
        a[1] += cpu
        a[2] = max(a[2], mem)
        if power is not None:
            a[3] += power
            a[4] += 1
        if energy is not None:
            a[5] += energy
            a[6] += 1
    return [(*key, *a) for key, a in sorted(acc.items())]


def _new_rows(conn: Connection, key_col, t_col, data: list[tuple]) -> list[tuple]:
    """The rows whose (key, t) is not stored yet; repeats within the batch are dropped too."""
    times = [r[1] for r in data]
    stored: set[tuple[Any, ...]] = set(conn.execute(select(key_col, t_col).where(
        key_col.in_(sorted({r[0] for r in data})), t_col >= min(times),
        t_col <= max(times))).all())
    out = []
    for r in data:
        if (r[0], r[1]) not in stored:
            stored.add((r[0], r[1]))
            out.append(r)
    return out


def _execute_many(conn: Connection, table: str, columns: Sequence[str], rows: list[tuple]) -> int:
    if not rows:
        return 0
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = (f"INSERT INTO {table} ({', '.join(columns)}) "
           f"VALUES ({', '.join([mark] * len(columns))})")
    result = conn.exec_driver_sql(sql, rows)
    return len(rows) if result.rowcount < 0 else result.rowcount


EPOCH_COLUMNS = ("job_id", "attempt", "epoch", "start_s", "end_s", "node_id", "gpu_type", "gpus")


def insert_epoch_events(db: Db, events: Iterable[Mapping[str, Any]], *,
                        skip_duplicates: bool = False) -> int:
    """Insert finished epochs (job_id, attempt, epoch, start_s, end_s, node_id, gpu_type, gpus).

    An epoch already stored (same job, attempt, epoch) is an IntegrityError, or skipped with
    ``skip_duplicates`` (a replayed spool); returns the rows written.
    """
    rows = [dict(e) for e in events]
    for e in rows:
        if e.get("end_s") is not None and e.get("start_s") is not None \
                and e["end_s"] < e["start_s"]:
            raise InputError(f"epoch event {e}: end_s is before start_s")
    if not rows:
        return 0
    if skip_duplicates:
        unknown = sorted({k for e in rows for k in e} - set(EPOCH_COLUMNS))
        if unknown:
            raise InputError(f"epoch event {rows[0]}: unknown field(s) {', '.join(unknown)}")
        return _insert_ignoring_duplicates(_connection(db), "epoch_events", EPOCH_COLUMNS,
                                           [tuple(e.get(c) for c in EPOCH_COLUMNS) for e in rows])
    _connection(db).execute(insert(EpochEvent), rows)
    return len(rows)


def insert_gpu_gaps(db: Db, rows: Iterable[GapRow | Mapping | Sequence], *,
                    skip_duplicates: bool = False) -> int:
    """Record GPUs that could not be read (one row per GPU and sampling time)."""
    data = _rows(rows, GapRow)
    for r in data:
        _finite(r[1], "t", r, None)
        if not isinstance(r[2], str) or not r[2]:
            raise InputError(f"gap {r}: reason must be a non-empty string")
    data = [(g, t, reason[:REASON_CHARS]) for g, t, reason in data]
    return _insert(_connection(db), "gpu_gaps", GapRow._fields, data, skip_duplicates)


def insert_agent_gaps(db: Db, rows: Iterable[AgentGapRow | Mapping | Sequence], *,
                      skip_duplicates: bool = False) -> int:
    """Record the times a node's agent was not running (one row per gap)."""
    data = _rows(rows, AgentGapRow)
    for r in data:
        _finite(r[1], "start_s", r, None)
        _finite(r[2], "end_s", r, None)
        if r[2] < r[1] or not isinstance(r[4], str) or not r[4]:
            raise InputError(f"agent gap {r}: end before start, or no reason")
    data = [(n, a, b, bool(c), reason[:REASON_CHARS]) for n, a, b, c, reason in data]
    return _insert(_connection(db), "agent_gaps", AgentGapRow._fields, data, skip_duplicates)


def insert_job_energy(db: Db,
                      rows: Iterable[JobEnergyRow | Mapping | Sequence], *,
                      skip_duplicates: bool = False) -> int:
    """Record energy attributed to jobs (one row per job attempt and window end)."""
    data = _rows(rows, JobEnergyRow)
    for r in data:
        _finite(r[2], "t", r, None)
        _finite(r[4], "interval_s", r)
        if not isinstance(r[5], int) or isinstance(r[5], bool) or r[5] < 0:
            raise InputError(f"job energy {r}: gpus must be a whole number >= 0, got {r[5]!r}")
        _energy(r[6], r)
        _energy(r[7], r)
    return _insert(_connection(db), "job_energy", JobEnergyRow._fields, data, skip_duplicates)


def _insert(conn: Connection, table: str, columns: Sequence[str], rows: list[tuple],
            skip_duplicates: bool) -> int:
    if not rows:
        return 0
    if skip_duplicates:
        return _insert_ignoring_duplicates(conn, table, columns, rows)
    return _execute_many(conn, table, columns, rows)


# MariaDB's INSERT IGNORE turns more than duplicates into warnings (a foreign key that
# fails, a NULL in a NOT NULL column, truncation): any of those fails the statement here.
_DUPLICATE_WARNING = 1062


def _insert_ignoring_duplicates(conn: Connection, table: str, columns: Sequence[str],
                                rows: list[tuple]) -> int:
    """Insert rows, skipping those whose primary or unique key is already stored.

    Needs only the INSERT privilege (the agent may not read these tables back): SQLite's
    ``INSERT OR IGNORE`` skips only key conflicts (foreign keys still fail); on MariaDB,
    ``INSERT IGNORE`` followed by ``SHOW WARNINGS``, where anything but a duplicate key
    raises (the caller's transaction is then rolled back).
    """
    if not rows:
        return 0
    sqlite = conn.dialect.name == "sqlite"
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    verb = "INSERT OR IGNORE" if sqlite else "INSERT IGNORE"
    sql = (f"{verb} INTO {table} ({', '.join(columns)}) "
           f"VALUES ({', '.join([mark] * len(columns))})")
    if not sqlite:   # list every warning of a batch, not just the first 64
        conn.exec_driver_sql(f"SET SESSION max_error_count = {max(DEFAULT_BATCH, 64)}")
    written = 0
    for start in range(0, len(rows), DEFAULT_BATCH):
        batch = rows[start:start + DEFAULT_BATCH]
        result = conn.exec_driver_sql(sql, batch)
        if not sqlite:
            bad = [w for w in conn.exec_driver_sql("SHOW WARNINGS").all()
                   if int(w[1]) != _DUPLICATE_WARNING]
            if bad:
                raise IntegrityError(sql, None, Exception(int(bad[0][1]), str(bad[0][2])))
        written += result.rowcount if result.rowcount >= 0 else 0
    return written


@dataclass(frozen=True, kw_only=True)
class NodePower:
    """Mean power of a node while ``busy_gpus`` of its GPUs were busy, over a window.

    ``gpu_w`` is the sum over the node's GPUs of each GPU's mean power (the node's mean
    GPU power when all GPUs are sampled at the same instants); ``host_w`` the mean host
    power where a host meter reports one (None otherwise).
    """

    node_id: int
    busy_gpus: int
    gpu_w: float
    host_w: float | None
    samples: int
    gpus_seen: int

    @property
    def total_w(self) -> float:
        return self.gpu_w + (self.host_w or 0.0)


def mean_node_power(db: Db, node: str | int, busy_gpus: int, start_s: float,
                    end_s: float) -> NodePower | None:
    """Mean power of node ``node`` (name or id) with ``busy_gpus`` GPUs busy over the minutes
    that start in [start, end); None when there is no sample."""
    conn = _connection(db)
    node_id = node if isinstance(node, int) else conn.execute(
        select(Node.c.id).where(Node.c.name == node)).scalar_one_or_none()
    if node_id is None:
        raise InputError(f"node {node}: no such node")
    return _power_table(conn, start_s, end_s, node_id, busy_gpus).get((node_id, busy_gpus))


def mean_power_table(db: Db, start_s: float,
                     end_s: float) -> dict[tuple[int, int], NodePower]:
    """:func:`mean_node_power` of every (node id, busy count) with samples in the window."""
    return _power_table(_connection(db), start_s, end_s)


def power_queries(start_s: float, end_s: float, node_id: int | None = None,
                  busy_gpus: int | None = None) -> tuple[Select, Select]:
    """The queries behind the mean power: GPU minutes by (node, busy count, GPU) and host
    minutes by (node, busy count); for one node and count when given."""
    M, HM = PowerMinute, HostMinute

    def where(table):
        cond = [table.c.minute_s >= start_s, table.c.minute_s < end_s]
        if node_id is not None:
            cond = [table.c.node_id == node_id, table.c.busy_gpus == busy_gpus] + cond
        return cond

    gpu = (select(M.c.node_id, M.c.busy_gpus, M.c.gpu_id, func.sum(M.c.samples),
                  func.sum(M.c.power_sum_w))
           .where(*where(M)).group_by(M.c.node_id, M.c.busy_gpus, M.c.gpu_id))
    host = (select(HM.c.node_id, HM.c.busy_gpus, func.sum(HM.c.host_power_samples),
                   func.sum(HM.c.host_power_sum_w))
            .where(*where(HM)).group_by(HM.c.node_id, HM.c.busy_gpus))
    return gpu, host


def _power_table(conn: Connection, start_s: float, end_s: float, node_id: int | None = None,
                 busy_gpus: int | None = None) -> dict[tuple[int, int], NodePower]:
    gpu_query, host_query = power_queries(start_s, end_s, node_id, busy_gpus)
    per_node: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for n, g, _gpu, count, total in conn.execute(gpu_query):
        if count:
            per_node.setdefault((n, g), []).append((int(count), float(total)))
    host = {(n, g): (int(count or 0), float(total or 0.0))
            for n, g, count, total in conn.execute(host_query)}
    out: dict[tuple[int, int], NodePower] = {}
    for (n, g), parts in per_node.items():
        hc, ht = host.get((n, g), (0, 0.0))
        out[(n, g)] = NodePower(node_id=n, busy_gpus=g,
                                gpu_w=sum(total / count for count, total in parts),
                                host_w=ht / hc if hc else None,
                                samples=sum(count for count, _ in parts), gpus_seen=len(parts))
    return out


def gpu_energy_mj(db: Db, start_s: float = -math.inf, end_s: float = math.inf,
                  gpu_ids: Iterable[int] | None = None) -> int:
    """Energy (mJ) of the GPUs' samples in the minutes that start in [start, end).

    Exact (integer sums), and the same before and after the retention job deletes old raw
    samples, because it reads the 1-minute aggregates.
    """
    q = select(func.coalesce(func.sum(PowerMinute.c.energy_mj), 0))
    if math.isfinite(start_s):
        q = q.where(PowerMinute.c.minute_s >= start_s)
    if math.isfinite(end_s):
        q = q.where(PowerMinute.c.minute_s < end_s)
    if gpu_ids is not None:
        q = q.where(PowerMinute.c.gpu_id.in_(sorted(set(gpu_ids))))
    return int(_connection(db).execute(q).scalar_one())
