"""Measurements: batched sample inserts with their 1-minute aggregates, epoch events,
heartbeats, and the power and energy queries.

A batch of raw samples is inserted with one multi-row statement (PyMySQL rewrites the
``executemany`` into ``INSERT ... VALUES (...), (...), ...``; SQLite prepares once), and
its 1-minute partial aggregates with a second one, in the caller's transaction, so the
aggregates always account for exactly the raw samples that were committed. Every row and
the GPUs it names are checked first; a bad row fails the batch with a message instead of
landing in a table. Raw samples are append-only: rows written by other means (a bulk
load) need :func:`andreas.store.retention.rebuild_minutes` for their range.

Queries read the aggregates (``power_minutes``, ``host_minutes``) through covering
indexes, so their cost depends on the window (at most 1 440 rows per GPU and day), not on
the number of raw samples; a window counts the minutes that start in it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Select, func, insert, select, update
from sqlalchemy.orm import Session

from andreas.errors import InputError
from andreas.store.models import (EpochEvent, Gpu, HostMinute, HostSample, Node, NodeState,
                                  PowerMinute, PowerSample)

DEFAULT_BATCH = 2000
POWER_MINUTE_COLUMNS = ("gpu_id", "minute_s", "busy_gpus", "node_id", "samples", "power_sum_w",
                        "power_max_w", "energy_mj", "energy_samples", "utilization_sum",
                        "utilization_samples", "memory_used_max_mib")
HOST_MINUTE_COLUMNS = ("node_id", "minute_s", "busy_gpus", "samples", "cpu_utilization_sum",
                       "memory_used_max_mib", "host_power_sum_w", "host_power_samples",
                       "energy_mj", "energy_samples")


class PowerRow(NamedTuple):
    """One GPU reading; ``energy_mj`` is the energy since the GPU's previous sample."""

    gpu_id: int
    t: float
    node_id: int
    busy_gpus: int
    power_w: float
    energy_mj: int | None = None
    utilization: float | None = None
    memory_used_mib: int | None = None


class HostRow(NamedTuple):
    node_id: int
    t: float
    busy_gpus: int
    cpu_utilization: float
    memory_used_mib: int
    host_power_w: float | None = None
    energy_mj: int | None = None


def minute_of(t: float) -> float:
    """Start of the UTC minute that holds ``t``."""
    return math.floor(t / 60.0) * 60.0


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def _rows(rows: Iterable[Any], kind: type[NamedTuple]) -> list[tuple]:
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


def _busy(value: Any, gpus: int, row: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= gpus:
        raise InputError(f"sample {row}: busy_gpus must be 0..{gpus} (the node's GPUs), "
                         f"got {value!r}")


def insert_power_samples(db: Session | Connection, rows: Iterable[PowerRow | Mapping | Sequence],
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
        select(Gpu.id, Gpu.node_id, Node.gpu_count).join(Node, Node.id == Gpu.node_id)
        .where(Gpu.id.in_(ids)))}
    for r in data:
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
        if r[6] is not None:
            _finite(r[6], "utilization", r)
    if skip_duplicates:
        data = _new_rows(conn, PowerSample.gpu_id, PowerSample.t, data)
    written = 0
    for start in range(0, len(data), max(1, batch_size)):
        batch = data[start:start + batch_size]
        written += _execute_many(conn, "power_samples", PowerRow._fields, batch)
        _execute_many(conn, "power_minutes", POWER_MINUTE_COLUMNS, _power_minutes(batch))
    return written


def insert_host_samples(db: Session | Connection, rows: Iterable[HostRow | Mapping | Sequence],
                        *, batch_size: int = DEFAULT_BATCH,
                        skip_duplicates: bool = False) -> int:
    """Insert host samples (CPU, memory, host power) and their 1-minute aggregates; checked
    and batched like GPU samples."""
    data = _rows(rows, HostRow)
    if not data:
        return 0
    conn = _connection(db)
    ids = sorted({r[0] for r in data})
    counts = dict(conn.execute(select(Node.id, Node.gpu_count).where(Node.id.in_(ids))).all())
    for r in data:
        node_id, t, busy, cpu, mem, power, energy = r
        if node_id not in counts:
            raise InputError(f"sample {r}: node_id {node_id} is not a known node")
        _finite(t, "t", r, None)
        _finite(cpu, "cpu_utilization", r)
        _finite(mem, "memory_used_mib", r)
        if power is not None:
            _finite(power, "host_power_w", r)
        _busy(busy, counts[node_id], r)
        _energy(energy, r)
    if skip_duplicates:
        data = _new_rows(conn, HostSample.node_id, HostSample.t, data)
    written = 0
    for start in range(0, len(data), max(1, batch_size)):
        batch = data[start:start + batch_size]
        written += _execute_many(conn, "host_samples", HostRow._fields, batch)
        _execute_many(conn, "host_minutes", HOST_MINUTE_COLUMNS, _host_minutes(batch))
    return written


def _power_minutes(rows: list[tuple]) -> list[tuple]:
    """Partial aggregates of a batch, one row per (GPU, minute, busy count)."""
    acc: dict[tuple, list] = {}
    for gpu_id, t, node_id, busy, power, energy, util, mem in rows:
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
    for node_id, t, busy, cpu, mem, power, energy in rows:
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
    stored = set(conn.execute(select(key_col, t_col).where(
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


def insert_epoch_events(db: Session | Connection, events: Iterable[Mapping[str, Any]]) -> int:
    """Insert finished epochs (job_id, attempt, epoch, start_s, end_s, node_id, gpu_type, gpus)."""
    rows = [dict(e) for e in events]
    for e in rows:
        if e.get("end_s") is not None and e.get("start_s") is not None \
                and e["end_s"] < e["start_s"]:
            raise InputError(f"epoch event {e}: end_s is before start_s")
    if not rows:
        return 0
    _connection(db).execute(insert(EpochEvent), rows)
    return len(rows)


def heartbeat(db: Session | Connection, node: str, t: float,
              state: NodeState | None = NodeState.UP) -> None:
    """The agent's one write to its node row: last heartbeat and (optionally) state."""
    values: dict[str, Any] = {"last_heartbeat_s": t}
    if state is not None:
        values["state"] = state
    result = _connection(db).execute(update(Node).where(Node.name == node).values(**values))
    if result.rowcount != 1:
        raise InputError(f"node {node}: no such node (register it first)")


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


def mean_node_power(db: Session | Connection, node: str | int, busy_gpus: int, start_s: float,
                    end_s: float) -> NodePower | None:
    """Mean power of node ``node`` (name or id) with ``busy_gpus`` GPUs busy over the minutes
    that start in [start, end); None when there is no sample."""
    conn = _connection(db)
    node_id = node if isinstance(node, int) else conn.execute(
        select(Node.id).where(Node.name == node)).scalar_one_or_none()
    if node_id is None:
        raise InputError(f"node {node}: no such node")
    return _power_table(conn, start_s, end_s, node_id, busy_gpus).get((node_id, busy_gpus))


def mean_power_table(db: Session | Connection, start_s: float,
                     end_s: float) -> dict[tuple[int, int], NodePower]:
    """:func:`mean_node_power` of every (node id, busy count) with samples in the window."""
    return _power_table(_connection(db), start_s, end_s)


def power_queries(start_s: float, end_s: float, node_id: int | None = None,
                  busy_gpus: int | None = None) -> tuple[Select, Select]:
    """The queries behind the mean power: GPU minutes by (node, busy count, GPU) and host
    minutes by (node, busy count); for one node and count when given."""
    M, HM = PowerMinute, HostMinute

    def where(table):
        cond = [table.minute_s >= start_s, table.minute_s < end_s]
        if node_id is not None:
            cond = [table.node_id == node_id, table.busy_gpus == busy_gpus] + cond
        return cond

    gpu = (select(M.node_id, M.busy_gpus, M.gpu_id, func.sum(M.samples), func.sum(M.power_sum_w))
           .where(*where(M)).group_by(M.node_id, M.busy_gpus, M.gpu_id))
    host = (select(HM.node_id, HM.busy_gpus, func.sum(HM.host_power_samples),
                   func.sum(HM.host_power_sum_w))
            .where(*where(HM)).group_by(HM.node_id, HM.busy_gpus))
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


def gpu_energy_mj(db: Session | Connection, start_s: float = -math.inf, end_s: float = math.inf,
                  gpu_ids: Iterable[int] | None = None) -> int:
    """Energy (mJ) of the GPUs' samples in the minutes that start in [start, end).

    Exact (integer sums), and the same before and after the retention job deletes old raw
    samples, because it reads the 1-minute aggregates.
    """
    q = select(func.coalesce(func.sum(PowerMinute.energy_mj), 0))
    if math.isfinite(start_s):
        q = q.where(PowerMinute.minute_s >= start_s)
    if math.isfinite(end_s):
        q = q.where(PowerMinute.minute_s < end_s)
    if gpu_ids is not None:
        q = q.where(PowerMinute.gpu_id.in_(sorted(set(gpu_ids))))
    return int(_connection(db).execute(q).scalar_one())
