"""Retention: raw samples are kept N days (default 7); the 1-minute aggregates stay.

The GPU gaps (``gpu_gaps``, raw too) go with the raw samples. Per-job energy
(``job_energy``, what reports and ``andreas show`` bill jobs by) has its own, longer
retention (``[store] job_energy_retention_days``, default 400): a report over a window
older than that shows the energy as unattributed (it stays in the node totals).

Every batch of raw samples already wrote its 1-minute partial aggregates in the same
transaction (``samples.insert_power_samples``), so the aggregates always hold every
committed sample: deleting raw samples never changes an energy total or a mean power,
whatever else runs at the same time. One run of :func:`downsample`, per GPU (and per
node for host samples), each step its own short transaction:

1. compacts the partial aggregate rows of each recent minute (the last
   ``compact_days``, complete minutes only) into one row: sums of sums, so exact;
2. deletes the raw samples before the cut-off, the start of the minute ``keep_days``
   ago (on MariaDB in chunks, so no transaction holds many locks for long).

Late samples (an agent's spool replayed after an outage) simply add partial rows; a
later run compacts them if they fall in its window, and they are correct either way.
:func:`rebuild_minutes` recomputes the aggregates of a range from the raw samples, for
data loaded around ``insert_power_samples`` (a bulk load); the range must still be raw.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, func, insert, select, text
from sqlalchemy.exc import DBAPIError

from andreas.infra.backoff import Backoff
from andreas.config import DEFAULT_RAW_RETENTION_DAYS
from andreas.store.engine import Store, error_code
from andreas.store.errors import StoreError
from andreas.store.models import Gpu, HostMinute, Node, PowerMinute
from andreas.store.samples import HOST_MINUTE_COLUMNS, POWER_MINUTE_COLUMNS, minute_of

DEFAULT_COMPACT_DAYS = 2.0
DELETE_CHUNK = 20_000
_RETRY_CODES = {1205, 1213}     # lock wait timeout, deadlock: the transaction is retried
_RETRY = Backoff(initial_s=0.05, max_s=1.0)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RetentionResult:
    cutoff_s: float
    power_samples: int      # raw GPU samples deleted
    host_samples: int       # raw host samples deleted
    power_rows_merged: int  # partial aggregate rows folded into others by compaction
    host_rows_merged: int
    gpu_gaps: int = 0       # gap rows deleted (with the raw samples)
    job_energy: int = 0     # job energy windows deleted (their own retention)
    job_energy_cutoff_s: float | None = None


def cutoff_for(now_s: float, keep_days: float) -> float:
    """The start of the minute ``keep_days`` before ``now_s``."""
    return minute_of(now_s - keep_days * 86400.0)


def downsample(db: Store | Engine, *, keep_days: float = DEFAULT_RAW_RETENTION_DAYS,
               now_s: float | None = None,
               compact_days: float = DEFAULT_COMPACT_DAYS,
               job_energy_days: float | None = None) -> RetentionResult:
    """Run the retention once; safe to repeat and to run while agents insert.
    ``job_energy_days``: keep job energy windows this long (None: all)."""
    if not keep_days > 0:
        raise StoreError(f"retention: keep_days must be > 0, got {keep_days!r}")
    if job_energy_days is not None and not job_energy_days > 0:
        raise StoreError(f"retention: job_energy_days must be > 0, got {job_energy_days!r}")
    engine = db.engine if isinstance(db, Store) else db
    now = time.time() if now_s is None else now_s
    cutoff = cutoff_for(now, keep_days)
    window = (minute_of(now - compact_days * 86400.0), minute_of(now) - 60.0)
    with engine.connect() as conn:
        gpus = conn.execute(select(Gpu.id).order_by(Gpu.id)).scalars().all()
        nodes = conn.execute(select(Node.id, Node.gpu_count).order_by(Node.id)).all()
    totals = [0, 0, 0, 0]
    gaps = 0
    for gpu_id in gpus:
        totals[2] += _retry(functools.partial(_compact, engine, PowerMinute, PowerMinute.gpu_id,
                                              gpu_id, None, window, _merge_power))
        totals[0] += _delete_raw(engine, "power_samples", "gpu_id", gpu_id, cutoff)
        gaps += _delete_raw(engine, "gpu_gaps", "gpu_id", gpu_id, cutoff)
    for node_id, gpu_count in nodes:
        totals[3] += _retry(functools.partial(_compact, engine, HostMinute, HostMinute.node_id,
                                              node_id, range(gpu_count + 1), window,
                                              _merge_host))
        totals[1] += _delete_raw(engine, "host_samples", "node_id", node_id, cutoff)
    energy, energy_cutoff = 0, None
    if job_energy_days is not None:
        energy_cutoff = cutoff_for(now, job_energy_days)
        energy = _delete_raw(engine, "job_energy", None, None, energy_cutoff)  # ix_job_energy_t
    return RetentionResult(cutoff_s=cutoff, power_samples=totals[0], host_samples=totals[1],
                           power_rows_merged=totals[2], host_rows_merged=totals[3],
                           gpu_gaps=gaps, job_energy=energy, job_energy_cutoff_s=energy_cutoff)


def _retry(step: Callable[[], T], tries: int = 5) -> T:
    for attempt in range(tries):
        try:
            return step()
        except DBAPIError as e:
            if error_code(e) not in _RETRY_CODES or attempt == tries - 1:
                raise
            time.sleep(_RETRY.delay_s(attempt))
    raise AssertionError("unreachable")


def _compact(engine: Engine, table, key_col, key: int, busy_values: Iterable[int] | None,
             window: tuple[float, float], merge: Callable[[list], tuple]) -> int:
    """Merge the partial rows of each (minute, busy count) in the window; returns rows removed."""
    start, end = window
    if end <= start:
        return 0
    columns = [getattr(table, c) for c in _columns(table)]
    cond = [key_col == key, table.minute_s >= start, table.minute_s < end]
    if busy_values is not None:      # lets the index (node_id, busy_gpus, minute_s) serve it
        cond.append(table.busy_gpus.in_(list(busy_values)))
    with engine.connect() as conn:       # which minutes have partial rows (no locks)
        split = conn.execute(select(table.minute_s).where(*cond)
                             .group_by(table.minute_s, table.busy_gpus)
                             .having(func.count() > 1)).scalars().all()
    if not split:
        return 0
    cond[1:3] = [table.minute_s >= min(split), table.minute_s <= max(split)]
    removed = 0
    with engine.begin() as conn:
        rows = conn.execute(select(table.id, *columns).where(*cond).with_for_update()).all()
        groups: dict[tuple, list] = {}
        for row in rows:
            groups.setdefault((row.minute_s, row.busy_gpus), []).append(row)
        ids: list[Any] = []
        merged: list[Any] = []
        for parts in groups.values():
            if len(parts) > 1:
                ids.extend(p.id for p in parts)
                merged.append(merge(parts))
                removed += len(parts) - 1
        for k in range(0, len(ids), 1000):
            conn.execute(delete(table).where(table.id.in_(ids[k:k + 1000])))
        if merged:
            conn.execute(insert(table), [dict(zip(_columns(table), m, strict=True))
                                         for m in merged])
    return removed


def _columns(table) -> tuple[str, ...]:
    return POWER_MINUTE_COLUMNS if table is PowerMinute else HOST_MINUTE_COLUMNS


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _merge_power(parts: list) -> tuple:
    p0 = parts[0]
    return (p0.gpu_id, p0.minute_s, p0.busy_gpus, p0.node_id,
            sum(p.samples for p in parts), sum(p.power_sum_w for p in parts),
            max(p.power_max_w for p in parts), sum(p.energy_mj for p in parts),
            sum(p.energy_samples for p in parts), sum(p.utilization_sum for p in parts),
            sum(p.utilization_samples for p in parts), _max(p.memory_used_max_mib for p in parts))


def _merge_host(parts: list) -> tuple:
    p0 = parts[0]
    return (p0.node_id, p0.minute_s, p0.busy_gpus, sum(p.samples for p in parts),
            sum(p.cpu_utilization_sum for p in parts), max(p.memory_used_max_mib for p in parts),
            sum(p.host_power_sum_w for p in parts), sum(p.host_power_samples for p in parts),
            sum(p.energy_mj for p in parts), sum(p.energy_samples for p in parts))


def _delete_raw(engine: Engine, table: str, key_col: str | None, key: int | None,
                cutoff: float) -> int:
    """Rows of ``table`` with ``t`` before the cut-off (of one key, unless ``key_col`` is
    None); on MariaDB in chunks."""
    params = {"key": key, "cutoff": cutoff}
    where = f"{key_col} = :key AND t < :cutoff" if key_col else "t < :cutoff"
    if engine.dialect.name == "sqlite":
        sql = text(f"DELETE FROM {table} WHERE {where}")
        with engine.begin() as conn:
            return conn.execute(sql, params).rowcount
    sql = text(f"DELETE FROM {table} WHERE {where} ORDER BY t LIMIT {DELETE_CHUNK}")
    deleted = 0
    while True:
        def chunk() -> int:
            with engine.begin() as conn:
                return conn.execute(sql, params).rowcount
        n = _retry(chunk)
        deleted += n
        if n < DELETE_CHUNK:
            return deleted


_POWER_REBUILD = """
INSERT INTO power_minutes ({columns})
SELECT gpu_id, floor(t / 60) * 60, busy_gpus, MIN(node_id), COUNT(*), SUM(power_w),
       MAX(power_w), COALESCE(SUM(energy_mj), 0), COUNT(energy_mj),
       COALESCE(SUM(utilization), 0), COUNT(utilization), MAX(memory_used_mib)
FROM power_samples WHERE gpu_id = :key AND t >= :start AND t < :end
GROUP BY gpu_id, floor(t / 60) * 60, busy_gpus"""
_HOST_REBUILD = """
INSERT INTO host_minutes ({columns})
SELECT node_id, floor(t / 60) * 60, busy_gpus, COUNT(*), SUM(cpu_utilization),
       MAX(memory_used_mib), COALESCE(SUM(host_power_w), 0), COUNT(host_power_w),
       COALESCE(SUM(energy_mj), 0), COUNT(energy_mj)
FROM host_samples WHERE node_id = :key AND t >= :start AND t < :end
GROUP BY node_id, floor(t / 60) * 60, busy_gpus"""


def rebuild_minutes(db: Store | Engine, start_s: float, end_s: float) -> int:
    """Recompute the aggregates of the minutes in [start, end) from the raw samples.

    For raw samples written around ``insert_power_samples`` (a bulk load). Every raw sample
    of those minutes must still be there (younger than the retention time), or the
    rebuilt minutes lose the deleted ones. Returns the aggregate rows written.
    """
    engine = db.engine if isinstance(db, Store) else db
    start, end = minute_of(start_s), math.ceil(end_s / 60.0) * 60.0
    written = 0
    with engine.connect() as conn:
        gpus = conn.execute(select(Gpu.id).order_by(Gpu.id)).scalars().all()
        nodes = conn.execute(select(Node.id).order_by(Node.id)).scalars().all()
    for table, sql, col, keys in ((PowerMinute, _POWER_REBUILD, PowerMinute.gpu_id, gpus),
                                  (HostMinute, _HOST_REBUILD, HostMinute.node_id, nodes)):
        statement = text(sql.format(columns=", ".join(_columns(table))))
        for key in keys:
            with engine.begin() as conn:
                conn.execute(delete(table).where(col == key, table.minute_s >= start,
                                                 table.minute_s < end))
                written += conn.execute(statement, {"key": key, "start": start,
                                                    "end": end}).rowcount
    return written
