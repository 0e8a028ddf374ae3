"""Job Manager benchmark: 100 nodes x 450 jobs in the store.

The store holds 100 nodes (60 x 8 V100, 40 x 4 T4), 450 jobs (200 of them running with a
container on a fake engine), 90 000 epoch events and 2 h of 1-minute power aggregates for
every GPU. Measured, median of ``--repeat`` runs:

- snapshot: store -> optimizer snapshot (nodes, jobs, epochs done, epoch times, power),
  as the manager does it (epoch events read incrementally, 24-h power means reused for
  5 minutes) and cold (a fresh estimator: every table read in full);
- reschedule: snapshot + policy + plan document + decision row;
- tick: a reconciliation pass that finds nothing to do (the steady state, every poll_s);
- baseline: the policy alone on the same snapshot, measured in the same run.

Prints times and ratios to the baseline; target (issue 6): snapshot + decision + diff
(reschedule + tick) under 2 s. Times are printed, never asserted. SQLite by default;
``--mariadb`` uses a fresh database on
ANDREAS_TEST_MARIADB_URL (an administrator's URL of a throw-away server).
Run: ``python tests/benchmarks/bench_manager.py [--policy rg] [--mariadb]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from andreas import optimizer  # noqa: E402
from andreas.manager import Manager  # noqa: E402
from andreas.manager.estimates import Estimator  # noqa: E402
from andreas.manager.snapshot import build_snapshot  # noqa: E402
from andreas.manager.state import load_state  # noqa: E402
from andreas.store import (Gpu, Job, JobAttempt, JobState, Node, NodeState, migrate,  # noqa: E402
                           open_store)
from andreas.store.engine import make_engine  # noqa: E402
from tests.manager.fakes import FakeExecutor  # noqa: E402
from tests.manager.helpers import settings  # noqa: E402

NOW = 1_700_000_000.0


def timed(fn, repeat):
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def populate(store, ex):
    rng = np.random.default_rng(0)
    with store.session() as s:
        nodes = []
        for i in range(100):
            gtype, g = ("V100", 8) if i < 60 else ("T4", 4)
            n = Node(name=f"n{i:03d}", docker_endpoint=f"ssh://n{i}", gpu_type=gtype,
                     gpu_count=g, state=NodeState.UP)
            n.gpus = [Gpu(index=k, uuid=f"GPU-fake-n{i}-{k}", model=gtype, memory_mib=16384)
                      for k in range(g)]
            nodes.append(n)
        s.add_all(nodes)
        s.flush()
        free = {n.name: list(range(n.gpu_count)) for n in nodes}
        for j in range(450):
            s.add(Job(id=f"j{j:04d}", image="img:1", command=[], env={}, epochs=100,
                      submit_s=NOW - 3600, due_s=NOW + float(rng.uniform(3600, 200_000)),
                      weight=float(rng.choice([1.0, 2.0])),
                      application=["resnet50", "vgg19", "alexnet"][j % 3]))
        s.flush()
        running = 0
        for n in nodes:
            while len(free[n.name]) >= 2 and running < 200:
                jid = f"j{running:04d}"
                gpus = [free[n.name].pop(0), free[n.name].pop(0)]
                c = ex.add(n.name, jid, 1, gpu_uuids=tuple(n.gpus[k].uuid for k in gpus))
                s.add(JobAttempt(job_id=jid, attempt=1, node_id=n.id, gpu_ids=gpus,
                                 container_id=c.id, start_s=NOW - 600))
                s.execute(sa.update(Job).where(Job.id == jid).values(state=JobState.RUNNING))
                running += 1
        conn = s.connection()
        events = [(f"j{k % 450:04d}", 1, k // 450 + 1, NOW - 90_000 + k, NOW - 90_000 + k + 500,
                   nodes[k % 100].id, nodes[k % 100].gpu_type, 1 + k % 2)
                  for k in range(90_000)]
        conn.exec_driver_sql(
            "INSERT INTO epoch_events (job_id, attempt, epoch, start_s, end_s, node_id, "
            "gpu_type, gpus) VALUES (" + ", ".join(["?" if conn.dialect.paramstyle == "qmark"
                                                    else "%s"] * 8) + ")", events)
        minutes = []
        for n in nodes:
            for g in n.gpus:
                for m in range(120):
                    minutes.append((g.id, NOW - 7200 + 60 * m, m % (n.gpu_count + 1), n.id, 60,
                                    60 * 150.0, 200.0, 0, 0, 0.0, 0, None))
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        conn.exec_driver_sql(
            "INSERT INTO power_minutes (gpu_id, minute_s, busy_gpus, node_id, samples, "
            "power_sum_w, power_max_w, energy_mj, energy_samples, utilization_sum, "
            f"utilization_samples, memory_used_max_mib) VALUES ({', '.join([mark] * 12)})",
            minutes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="rg")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mariadb", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one pass")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    if args.mariadb:
        admin = sa.create_engine(os.environ["ANDREAS_TEST_MARIADB_URL"])
        name = f"bench_{uuid.uuid4().hex[:8]}"
        with admin.begin() as c:
            c.exec_driver_sql(f"CREATE DATABASE {name}")
        url = admin.url.set(database=name).render_as_string(hide_password=False)
    else:
        url = f"sqlite:///{tmp}/bench.db"
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine)
    engine.dispose()
    store = open_store(url)
    clock = lambda: NOW  # noqa: E731
    ex = FakeExecutor(clock)
    t0 = time.perf_counter()
    populate(store, ex)
    print(f"populated in {time.perf_counter() - t0:.1f} s ({store.url})", flush=True)
    cfg = settings(policy=args.policy, min_power_samples=60)
    m = Manager(store, ex, cfg, clock=clock, rng=np.random.default_rng(0))
    m.start()                                  # first decision, containers adopted

    def snapshot(estimator=None):
        with store.session() as s:
            return build_snapshot(s, load_state(s), estimator or m.estimator, cfg.manager,
                                  NOW).snapshot

    snap = snapshot()
    if args.profile:
        import cProfile
        import pstats
        cProfile.runctx("snapshot(); m.reschedule('period')", globals(), locals(), "/tmp/mgr.prof")
        pstats.Stats("/tmp/mgr.prof").sort_stats("cumulative").print_stats(25)
    results = {
        "baseline_decide_s": timed(lambda: optimizer.decide(snap, np.random.default_rng(0),
                                                            args.policy), args.repeat),
        "snapshot_cold_s": timed(lambda: snapshot(Estimator(cfg.manager)), args.repeat),
        "snapshot_s": timed(snapshot, args.repeat),
        "reschedule_s": timed(lambda: m.reschedule("period"), args.repeat),
        "tick_s": timed(m.tick, args.repeat),
    }
    base = results["baseline_decide_s"]
    print(f"{len(snap.nodes)} nodes, {len(snap.jobs)} jobs, policy {args.policy}")
    for key, value in results.items():
        print(f"  {key:18} {value * 1000:8.1f} ms   {value / base:6.2f} x policy alone")
    total = results["reschedule_s"] + results["tick_s"]
    print(f"target: reschedule + tick = {total * 1000:.0f} ms < 2000 ms -> "
          f"{'met' if total < 2 else 'MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    m.close()
    store.dispose()
    if args.mariadb:
        with admin.begin() as c:
            c.exec_driver_sql(f"DROP DATABASE {name}")


if __name__ == "__main__":
    main()
