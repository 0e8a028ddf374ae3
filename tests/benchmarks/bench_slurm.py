"""Slurm benchmark: submission -> running through andreas beside a plain sbatch, and the
manager's tick with 3 Slurm nodes and 100 queued jobs.

The Slurm test cluster of scripts/slurm-test-cluster.sh (``SLURM_CONF`` and
``ANDREAS_TEST_SLURM_*`` from test.sh's environment; without them a private cluster is
started and stopped here), the store the embedded SQLite default (a temporary file).

- **Latency**: the real daemon (``andreas manager run``, a subprocess, ``[executor] kind =
  "slurm"``, ``poll_s`` as given). A trial submits a command job (the library call
  ``andreas submit`` makes, timed from just before it) and polls ``squeue`` every 20 ms
  until Slurm reports its job RUNNING; then cancels it and waits until Slurm has ended it.
  Baseline, alternating with it in the same run: ``sbatch`` of the same command (same
  partition, node, one GPU) until RUNNING. Median and p90 of ``--trials`` each, and the
  ratio andreas / sbatch (target: at most 1.5). Trials start at a random phase (0-1 s).
- **Tick**: an in-process Manager, the Slurm executor, 3 nodes x 2 GPUs, 100 queued jobs:
  the first tick (decision, 6 attempts submitted) and the median of later ticks (the
  steady state: one squeue and one sinfo shared by the nodes); baseline: the same with
  the dry-run executor (andreas alone). Target: under 1 s.

Times and ratios are printed (and written with ``--json``), never asserted.
Run: ``bash scripts/bench.sh slurm``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from andreas.config import ExecutorSettings, SlurmSettings  # noqa: E402
from andreas.executor.dryrun import DryRunExecutor  # noqa: E402
from andreas.executor.slurm import LISTING_TTL_S, SlurmExecutor  # noqa: E402
from andreas.manager import Manager  # noqa: E402
from andreas.service.submit import cancel, parse_submission, submit  # noqa: E402
from andreas.store import migrate, open_store  # noqa: E402
from tests.manager.helpers import add_job, add_node, settings  # noqa: E402
from tests.slurm_cluster import SlurmCluster, session_cluster  # noqa: E402

BIN = Path(sys.executable).parent
TARGET_RATIO = 1.5
TARGET_TICK_S = 1.0


def squeue_state(cluster: SlurmCluster, name: str) -> str:
    out = subprocess.run(["squeue", "--noheader", f"--name={name}", "--format=%T"],
                         env=cluster.env, capture_output=True, text=True).stdout.split()
    return out[0] if out else ""


def wait_state(cluster: SlurmCluster, name: str, done, timeout_s: float = 60.0) -> float:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if done(squeue_state(cluster, name)):
            return time.perf_counter()
        time.sleep(0.02)
    raise RuntimeError(f"{name}: not there after {timeout_s:.0f} s")


def ended(state: str) -> bool:
    return state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")


def plain_sbatch(cluster: SlurmCluster, node: str, out: Path) -> float:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    job = subprocess.run(["sbatch", "--parsable", f"--job-name={name}", f"--nodelist={node}",
                          f"--partition={cluster.partition}", "--gres=gpu:1",
                          f"--output={out}/{name}.out", "--no-requeue", "--wrap=sleep 30"],
                         env=cluster.env, check=True, capture_output=True,
                         text=True).stdout.strip()
    t1 = wait_state(cluster, name, lambda s: s == "RUNNING")
    subprocess.run(["scancel", job], env=cluster.env, check=True)
    wait_state(cluster, name, ended)
    return t1 - t0


def latency(cluster: SlurmCluster, tmp: Path, trials: int, poll_s: float) -> dict:
    node = cluster.nodes[0]
    db = tmp / "andreas.db"
    url = migrate.upgrade_url(f"sqlite:///{db}")
    store = open_store(url)
    add_node(store, node, gpus=2)
    (tmp / "out").mkdir()
    (tmp / "ckpt").mkdir()
    (tmp / "andreas.toml").write_text(
        f"[manager]\npoll_s = {poll_s}\nperiod_s = 3600\n[executor]\nkind = \"slurm\"\n"
        f"checkpoint_root = \"{tmp / 'ckpt'}\"\nstop_grace_s = 5\n[executor.slurm]\n"
        f"partition = \"{cluster.partition}\"\noutput_dir = \"{tmp / 'out'}\"\n")
    env = {**cluster.env, "ANDREAS_CONFIG": str(tmp / "andreas.toml"), "ANDREAS_DB_URL": url}
    log = (tmp / "manager.log").open("w")
    manager = subprocess.Popen([str(BIN / "andreas"), "manager", "run"], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    ours: list[float] = []
    plain: list[float] = []
    try:
        time.sleep(8.0)                      # the daemon's start (imports, kernels)
        for i in range(trials):
            time.sleep(random.random())
            spec = parse_submission(cmd="sleep 30", app="bench", epochs=1, due="+1h",
                                    weight="0.01", max_gpus="1",
                                    name=f"b{uuid.uuid4().hex[:8]}", now_s=time.time())
            t0 = time.perf_counter()
            submit(store, spec, time.time())
            t1 = wait_state(cluster, f"andreas-{spec.id}-1", lambda s: s == "RUNNING")
            ours.append(t1 - t0)
            cancel(store, spec.id, reason="benchmark", now_s=time.time())
            wait_state(cluster, f"andreas-{spec.id}-1", ended)
            time.sleep(random.random())
            plain.append(plain_sbatch(cluster, node, tmp / "out"))
            print(f"  trial {i + 1:2d}: andreas {ours[-1]:.3f} s, sbatch {plain[-1]:.3f} s",
                  flush=True)
    finally:
        manager.terminate()
        manager.wait(timeout=60)
        store.dispose()

    def stats(xs: list[float]) -> dict:
        return {"median_s": statistics.median(xs),
                "p90_s": statistics.quantiles(xs, n=10)[-1] if len(xs) > 1 else xs[0]}

    a, b = stats(ours), stats(plain)
    return {"trials": trials, "poll_s": poll_s, "andreas": a, "sbatch": b,
            "ratio_median": a["median_s"] / b["median_s"], "ratio_p90": a["p90_s"] / b["p90_s"],
            "andreas_s": ours, "sbatch_s": plain}


def tick(cluster: SlurmCluster, tmp: Path, jobs: int, repeat: int, runs: int) -> dict:
    """Median over ``runs`` fresh stores of the first tick and of the steady ones."""
    from andreas.optimizer.warmup import warm

    warm()                            # compiled or loaded once, outside the timings
    got: dict[str, list[dict]] = {"dryrun": [], "slurm": []}
    for run in range(runs):
        for kind in got:
            got[kind].append(one_tick(cluster, tmp / f"{kind}-{run}", kind, jobs, repeat))
    out: dict = {kind: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
                 for kind, rs in got.items()}
    out["runs"] = runs
    out["jobs"], out["nodes"] = jobs, len(cluster.nodes)
    out["ratio_first"] = out["slurm"]["first_s"] / out["dryrun"]["first_s"]
    out["ratio_steady"] = out["slurm"]["steady_s"] / out["dryrun"]["steady_s"]
    return out


def one_tick(cluster: SlurmCluster, tmp: Path, kind: str, jobs: int, repeat: int) -> dict:
    """The first tick and the median steady tick of a fresh store (``kind``: the Slurm
    executor or the dry run); the Slurm jobs it started are cancelled at the end."""
    from sqlalchemy import update

    from andreas.store import Job

    tmp.mkdir()
    store = open_store(migrate.upgrade_url(f"sqlite:///{tmp / 'tick.db'}"))
    for node in cluster.nodes:
        add_node(store, node, gpus=2)
    ids = [f"t{uuid.uuid4().hex[:8]}" for _ in range(jobs)]
    for job_id in ids:
        add_job(store, job_id, image="", epochs=50, due_s=time.time() + 86400,
                application="bench")
    with store.session() as ses:
        ses.execute(update(Job).values(command=["sleep", "600"]))
    s = replace(settings(policy="rg"), executor=ExecutorSettings(
        checkpoint_root=str(tmp), kind="slurm",
        slurm=SlurmSettings(partition=cluster.partition, output_dir=str(tmp))))
    executor = SlurmExecutor(s.executor) if kind == "slurm" else DryRunExecutor()
    m = Manager(store, executor, s, rng=np.random.default_rng(0))
    try:
        t0 = time.perf_counter()
        m.start()
        first = time.perf_counter() - t0
        steady = []
        for _ in range(repeat):
            time.sleep(LISTING_TTL_S + 0.05)      # past the shared listing
            t0 = time.perf_counter()
            m.tick()
            steady.append(time.perf_counter() - t0)
        return {"first_s": first, "steady_s": statistics.median(steady)}
    finally:
        m.close()
        if kind == "slurm":
            names = {f"andreas-{j}-1" for j in ids}
            listing = subprocess.run(["squeue", "--noheader", "--format=%i|%j"],
                                     env=cluster.env, capture_output=True,
                                     text=True).stdout.splitlines()
            doomed = [x.split("|")[0] for x in listing if x.split("|")[1] in names]
            if doomed:
                subprocess.run(["scancel", *doomed], env=cluster.env)
        store.dispose()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--poll-s", type=float, default=1.0)
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--repeat", type=int, default=5, help="steady ticks per run")
    p.add_argument("--tick-runs", type=int, default=3, help="fresh stores for the tick")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    random.seed(1)
    cluster, private = session_cluster()
    os.environ["SLURM_CONF"] = cluster.slurm_conf
    try:
        with tempfile.TemporaryDirectory(prefix="bench-slurm-") as d:
            tmp = Path(d)
            print(f"Slurm test cluster: nodes {', '.join(cluster.nodes)}, partition "
                  f"{cluster.partition}", flush=True)
            t = tick(cluster, tmp, args.jobs, args.repeat, args.tick_runs)
            print(f"tick, {t['nodes']} Slurm nodes, {t['jobs']} queued jobs (median of "
                  f"{t['runs']} runs): first "
                  f"{t['slurm']['first_s']:.3f} s (dry run {t['dryrun']['first_s']:.3f} s, "
                  f"x{t['ratio_first']:.2f}), steady {t['slurm']['steady_s']:.3f} s (dry run "
                  f"{t['dryrun']['steady_s']:.3f} s, x{t['ratio_steady']:.2f}); target "
                  f"< {TARGET_TICK_S:g} s", flush=True)
            lat_dir = tmp / "latency"
            lat_dir.mkdir()
            lat = latency(cluster, lat_dir, args.trials, args.poll_s)
            a, b = lat["andreas"], lat["sbatch"]
            print(f"submission -> running over {lat['trials']} jobs (poll_s {lat['poll_s']:g}): "
                  f"andreas median {a['median_s']:.3f} s, p90 {a['p90_s']:.3f} s; plain sbatch "
                  f"median {b['median_s']:.3f} s, p90 {b['p90_s']:.3f} s; ratio median "
                  f"{lat['ratio_median']:.2f}, p90 {lat['ratio_p90']:.2f} (target <= "
                  f"{TARGET_RATIO:g})", flush=True)
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps({"tick": t, "latency": lat}, indent=1))
    finally:
        if private is not None:
            private.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
