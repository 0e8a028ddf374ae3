"""Store benchmark on a real MariaDB: sample ingest and the mean-power query.

1. Loads ``--rows`` power samples (default 10 million) into a fresh database: 100 nodes
   x 8 GPUs over the last 24 h (LOAD DATA LOCAL INFILE, then ``rebuild_minutes`` for
   their 1-minute aggregates). Node 0 is the worst case for the query: sampled at 1 Hz
   all day with all 8 GPUs busy (691 200 samples in its window); the other nodes share
   the rest, their busy-GPU count changing every 30 minutes.
2. Naive ingest: one single-row INSERT of a raw sample per statement, committed per
   sample (what an agent that writes each reading as it comes would do), one writer. It
   writes no aggregates, so the ratio below understates the batched path's advantage.
3. Batched ingest: ``--writers`` processes, each the agents of 100/W nodes, insert 1 Hz
   samples of all their GPUs through ``andreas.store.insert_power_samples`` (raw rows and
   their 1-minute aggregates) with the agent account (least privilege), one transaction
   per ``--batch`` rows.
4. The query "mean power of node n with g GPUs busy over the last 24 h"
   (``mean_node_power``), for the worst-case node and for a typical node.

Prints samples/s, the ratio batched / naive measured in the same run, and query times;
targets (issue 4): >= 20 000 samples/s, query < 50 ms. Times are printed, never asserted.
Run: ``bash scripts/bench-store.sh`` (starts MariaDB), or with ANDREAS_TEST_MARIADB_URL
set to an administrator's URL of a throw-away server: ``python tests/benchmarks/bench_store.py``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from andreas.store import (Gpu, Node, PowerRow, accounts, insert_power_samples, mean_node_power,
                           migrate, open_store, rebuild_minutes)
from andreas.store.engine import make_engine

NODES, GPUS, DAY = 100, 8, 86400.0
TARGET_INGEST, TARGET_QUERY_MS = 20_000, 50.0
DB = "andreas_bench"
COLUMNS = "gpu_id, t, node_id, busy_gpus, power_w, energy_mj, utilization, memory_used_mib"


def log(msg: str) -> None:
    print(msg, flush=True)


def setup(admin_url: sa.URL) -> tuple[str, dict[str, str]]:
    admin = sa.create_engine(admin_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {DB}")
        conn.exec_driver_sql(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4 "
                             "COLLATE utf8mb4_unicode_ci")
    admin.dispose()
    url = admin_url.set(database=DB).render_as_string(hide_password=False)
    engine = make_engine(url)
    migrate.upgrade(engine)
    passwords = {"agent": secrets.token_hex(12)}
    accounts.apply(engine, DB, passwords, prefix="bench_")
    engine.dispose()
    agent = admin_url.set(database=DB, username="bench_agent", password=passwords["agent"])
    store = open_store(url)
    with store.session() as s:
        for n in range(NODES):
            node = Node(name=f"node{n:03d}", docker_endpoint=f"ssh://node{n:03d}",
                        gpu_type="V100" if n % 2 == 0 else "T4", gpu_count=GPUS)
            node.gpus = [Gpu(index=i, uuid=f"GPU-{n:03d}-{i}", model=node.gpu_type,
                             memory_mib=16384, power_limit_w=300.0, has_energy_counter=True)
                         for i in range(GPUS)]
            s.add(node)
    store.dispose()
    return url, {"agent": agent.render_as_string(hide_password=False)}


def ids(url: str) -> tuple[dict[int, int], dict[int, list[int]]]:
    """node index -> node id, node index -> GPU ids by index."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        nodes = dict(conn.execute(sa.select(Node.name, Node.id)).all())
        gpus: dict[int, list[int]] = {}
        for node_id, gid in conn.execute(sa.select(Gpu.node_id, Gpu.id).order_by(Gpu.node_id,
                                                                                  Gpu.index)):
            gpus.setdefault(node_id, []).append(gid)
    engine.dispose()
    node_ids = {int(name[4:]): nid for name, nid in nodes.items()}
    return node_ids, {n: gpus[nid] for n, nid in node_ids.items()}


def bulk_load(url: str, rows: int, t_end: float, node_ids, gpu_ids, seed: int) -> float:
    """LOAD DATA LOCAL INFILE of ``rows`` samples over [t_end - 24 h, t_end) and their
    aggregates; returns seconds."""
    rng = np.random.default_rng(seed)
    hot = min(rows, int(DAY) * GPUS)                   # node 0: 1 Hz all day, all GPUs busy
    per_gpu_other = -(-max(0, rows - hot) // ((NODES - 1) * GPUS))   # ceil
    engine = sa.create_engine(url, connect_args={"local_infile": True})
    start = time.perf_counter()
    loaded = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chunk.csv"
        for n in range(NODES):
            if n == 0:
                count = hot // GPUS
                times = t_end - DAY + np.arange(count) * (DAY / count)
                busy = np.full(count, GPUS)
            else:
                count = per_gpu_other
                if count == 0:
                    continue
                times = np.sort(t_end - DAY + rng.uniform(0, DAY, count).round(3))
                times = np.unique(times)
                count = len(times)
                phases = rng.integers(0, GPUS + 1, 49)
                busy = phases[((times - (t_end - DAY)) // 1800).astype(int)]
            lines = []
            for i, gid in enumerate(gpu_ids[n]):
                power = np.where(i < busy, rng.uniform(180, 300, count), rng.uniform(25, 45, count))
                energy = (power * (DAY / max(count, 1)) * 1000).astype(np.int64)
                util = np.where(i < busy, 95.0, 0.0)
                for k in range(count):
                    lines.append(f"{gid},{times[k]:.3f},{node_ids[n]},{busy[k]},{power[k]:.1f},"
                                 f"{energy[k]},{util[k]:.0f},8000\n")
            path.write_text("".join(lines))
            with engine.begin() as conn:
                conn.exec_driver_sql(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE power_samples "
                                     f"FIELDS TERMINATED BY ',' ({COLUMNS})")
            loaded += len(lines)
            if n % 10 == 0:
                log(f"   loaded {loaded:,} rows ({time.perf_counter() - start:.0f} s)")
    load_s = time.perf_counter() - start
    log(f"   raw rows loaded in {load_s:.1f} s; rebuilding their 1-minute aggregates")
    rebuild_minutes(engine, t_end - DAY, t_end)
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE TABLE power_samples, power_minutes")
    engine.dispose()
    return time.perf_counter() - start


def naive(url: str, count: int, t0: float, node_ids, gpu_ids) -> float:
    """One INSERT per sample, committed per sample; returns samples/s."""
    engine = sa.create_engine(url)
    sql = (f"INSERT INTO power_samples ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
    with engine.connect() as conn:
        start = time.perf_counter()
        for k in range(count):
            n = 1 + k % (NODES - 1)
            conn.exec_driver_sql(sql, (gpu_ids[n][k % GPUS], t0 + k, node_ids[n], 4, 200.0,
                                       200_000, 90.0, 8000))
            conn.commit()
        seconds = time.perf_counter() - start
    engine.dispose()
    return count / seconds


def writer(url: str, nodes: list[tuple[int, list[int]]], seconds: int, t0: float, batch: int,
           barrier, results) -> None:
    """The agents of some nodes: 1 Hz samples of every GPU, a transaction per batch."""
    store = open_store(url)
    rows = [PowerRow(gid, t0 + s, node_id, 4, 200.0 + i, 200_000, 90.0, 8000)
            for s in range(seconds) for node_id, gids in nodes for i, gid in enumerate(gids)]
    barrier.wait(timeout=300)
    start = time.perf_counter()
    for k in range(0, len(rows), batch):
        with store.session() as s:
            insert_power_samples(s, rows[k:k + batch], batch_size=batch)
    results.put((len(rows), start, time.perf_counter()))
    store.dispose()


def batched(url: str, writers: int, total: int, t0: float, batch: int, node_ids,
            gpu_ids) -> tuple[float, int]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    groups = [[(node_ids[n], gpu_ids[n]) for n in range(NODES) if n % writers == w]
              for w in range(writers)]
    seconds = max(1, total // (NODES * GPUS))
    procs = [ctx.Process(target=writer, args=(url, g, seconds, t0, batch, barrier, results))
             for g in groups]
    for p in procs:
        p.start()
    done = [results.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer process failed (exit {p.exitcode})")
    rows = sum(d[0] for d in done)
    wall = max(d[2] for d in done) - min(d[1] for d in done)
    return rows / wall, rows


def query_times(url: str, t_end: float, repeats: int) -> list[dict]:
    store = open_store(url)
    out = []
    cases = [("node000", GPUS, "worst case: 1 Hz all day, one busy count")]
    with store.session() as s:
        busy = s.execute(sa.text("SELECT busy_gpus FROM power_minutes WHERE node_id = "
                                 "(SELECT id FROM nodes WHERE name = 'node042') GROUP BY "
                                 "busy_gpus ORDER BY SUM(samples) DESC LIMIT 1")).scalar()
    cases.append(("node042", int(busy), "typical node, its most frequent busy count"))
    for name, g, what in cases:
        times = []
        result = None
        for _ in range(repeats):
            with store.session() as s:
                start = time.perf_counter()
                result = mean_node_power(s, name, g, t_end - DAY, t_end)
                times.append((time.perf_counter() - start) * 1000)
        out.append({"node": name, "busy_gpus": g, "what": what, "rows": result.samples,
                    "first_ms": times[0], "median_ms": statistics.median(times),
                    "max_ms": max(times), "mean_w": result.total_w})
    store.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000,
                    help="power samples present for the query (default 10 000 000)")
    ap.add_argument("--writers", type=int, default=4, help="concurrent writer processes")
    ap.add_argument("--batch", type=int, default=2000, help="rows per batch / transaction")
    ap.add_argument("--ingest-rows", type=int, default=1_600_000,
                    help="samples the batched writers insert together")
    ap.add_argument("--naive-rows", type=int, default=3000,
                    help="samples of the naive one-row-per-statement baseline")
    ap.add_argument("--repeats", type=int, default=20, help="query repetitions")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    raw = os.environ.get("ANDREAS_TEST_MARIADB_URL")
    if not raw:
        sys.exit("bench_store: set ANDREAS_TEST_MARIADB_URL (an administrator's URL of a "
                 "throw-away MariaDB) or run `bash scripts/bench-store.sh`")
    admin_url = make_url(raw)
    url, roles = setup(admin_url)
    node_ids, gpu_ids = ids(url)
    t_end = 1.75e9
    log(f"== bulk load: {args.rows:,} rows (LOAD DATA LOCAL INFILE + rebuild_minutes)")
    load_s = bulk_load(url, args.rows, t_end, node_ids, gpu_ids, seed=1)
    log(f"   {args.rows / load_s:,.0f} rows/s including the aggregates, {load_s:.1f} s")
    log(f"== naive: {args.naive_rows:,} samples, one INSERT + COMMIT each, 1 writer")
    naive_rate = naive(url, args.naive_rows, t_end + 10 * DAY, node_ids, gpu_ids)
    log(f"   {naive_rate:,.0f} samples/s")
    log(f"== batched: {args.ingest_rows:,} samples, {args.writers} writer processes, "
        f"batches of {args.batch} through insert_power_samples as the agent account")
    rate, written = batched(roles["agent"], args.writers, args.ingest_rows, t_end, args.batch,
                            node_ids, gpu_ids)
    log(f"   {rate:,.0f} samples/s ({written:,} samples); {rate / naive_rate:.1f}x naive; "
        f"target >= {TARGET_INGEST:,}: {'met' if rate >= TARGET_INGEST else 'MISSED'}")
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        total = conn.exec_driver_sql("SELECT COUNT(*) FROM power_samples").scalar()
        minutes = conn.exec_driver_sql("SELECT COUNT(*) FROM power_minutes").scalar()
    engine.dispose()
    log(f"== query: mean power of node n with g GPUs busy over the last 24 h "
        f"({total:,} raw samples and {minutes:,} aggregate rows present), {args.repeats} runs")
    queries = query_times(url, t_end + 1000, args.repeats)
    for q in queries:
        ok = "met" if q["median_ms"] < TARGET_QUERY_MS else "MISSED"
        log(f"   {q['node']} g={q['busy_gpus']} ({q['what']}): {q['rows']:,} samples, "
            f"median {q['median_ms']:.1f} ms, first {q['first_ms']:.1f} ms, max "
            f"{q['max_ms']:.1f} ms, mean {q['mean_w']:.0f} W; target < {TARGET_QUERY_MS:.0f} "
            f"ms: {ok}")
    summary = {"rows_present": total, "aggregate_rows": minutes,
               "bulk_load_rows_per_s": args.rows / load_s,
               "naive_samples_per_s": naive_rate, "batched_samples_per_s": rate,
               "ratio_batched_to_naive": rate / naive_rate, "writers": args.writers,
               "batch": args.batch, "queries": queries}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
