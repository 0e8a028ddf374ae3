"""Submission-to-running benchmark: from ``andreas submit`` to the job's container running.

An idle cluster of one node (2 fake V100s) whose Docker engine is ``$DOCKER_HOST``; the
store is the embedded SQLite default (``--mariadb``: a fresh database on
``ANDREAS_TEST_MARIADB_URL``); the manager is the real daemon (``andreas manager run``,
a subprocess) with its default ``poll_s`` unless ``--poll-s`` says otherwise. Each trial
submits a job (the library call ``andreas submit`` makes, timed from just before it) and
polls the engine every 5 ms until the job's container is running; then cancels it and
waits until the manager has stopped it, so every trial starts on an idle cluster. Trials
start at a random phase (0-1 s) against the manager's polling.

Baseline, measured in the same run: ``docker run -d`` of the same image through the SDK
(create + start, until the engine reports it running). Prints median / p90 latency and
the ratio to the baseline; target (issue 6): under 2 s. Times are printed, never asserted.
Run: ``bash scripts/bench.sh submit`` (starts Docker like test.sh).
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
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from andreas.store import migrate, open_store  # noqa: E402
from andreas.store.engine import make_engine  # noqa: E402
from andreas.service.submit import parse_submission, submit  # noqa: E402

BIN = Path(sys.executable).parent
TARGET_S = 2.0


def wait_running(api: docker.APIClient, job: str, timeout_s: float = 30.0) -> float:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if api.containers(filters={"label": f"andreas.job={job}", "status": "running"}):
            return time.perf_counter()
        time.sleep(0.005)
    raise RuntimeError(f"job {job}: no running container after {timeout_s:.0f} s")


def wait_gone(api: docker.APIClient, job: str, timeout_s: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if not api.containers(filters={"label": f"andreas.job={job}", "status": "running"}):
            return
        time.sleep(0.05)
    raise RuntimeError(f"job {job}: container still running {timeout_s:.0f} s after cancel")


def baseline(client: docker.DockerClient, api: docker.APIClient, image: str) -> float:
    t0 = time.perf_counter()
    c = client.containers.run(image, ["sleep", "30"], detach=True, network_mode="none",
                              labels={"andreas.bench": "1"})
    while api.inspect_container(c.id)["State"]["Status"] != "running":
        time.sleep(0.005)
    dt = time.perf_counter() - t0
    c.remove(force=True)
    return dt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--poll-s", type=float, default=None,
                   help="the manager's poll_s (default: its default, 1 s)")
    p.add_argument("--mariadb", action="store_true")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    host, image = os.environ.get("DOCKER_HOST"), os.environ.get("ANDREAS_TEST_DOCKER_IMAGE")
    if not host or not image:
        print("bench_submit: needs DOCKER_HOST and ANDREAS_TEST_DOCKER_IMAGE "
              "(bash scripts/bench.sh submit provides them)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="andreas-bench-submit."))
    if args.mariadb:
        import sqlalchemy as sa
        from sqlalchemy.engine import make_url

        admin = os.environ["ANDREAS_TEST_MARIADB_URL"]
        name = f"bench_{uuid.uuid4().hex[:8]}"
        with sa.create_engine(admin).begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
        url = make_url(admin).set(database=name).render_as_string(hide_password=False)
    else:
        url = f"sqlite:///{tmp / 'andreas.db'}"
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine)
    engine.dispose()
    manager_cfg = f"poll_s = {args.poll_s}\n" if args.poll_s else ""
    (tmp / "andreas.toml").write_text(
        f"[manager]\nperiod_s = 3600\n{manager_cfg}"
        f"[executor]\ncheckpoint_root = \"{tmp / 'ckpt'}\"\nnetwork = \"none\"\n"
        "stop_grace_s = 5\n")
    (tmp / "agent.toml").write_text(
        f"[agent]\nnode_name = \"bench-node\"\ndocker_url = \"\"\n"
        f"docker_endpoint = \"{host}\"\nfake_gpus = \"2xV100\"\n"
        f"[spool]\npath = \"{tmp / 'spool'}\"\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANDREAS_")},
           "ANDREAS_DB_URL": url, "ANDREAS_CONFIG": str(tmp / "andreas.toml")}
    subprocess.run([str(BIN / "andreas-agent"), "--config", str(tmp / "agent.toml"),
                    "--register"], env=env, check=True, capture_output=True)
    client = docker.DockerClient(base_url=host, version="auto")
    api = client.api
    base = [baseline(client, api, image) for _ in range(args.trials)]
    log = (tmp / "manager.log").open("w")
    manager = subprocess.Popen([str(BIN / "andreas"), "manager", "run"], env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    store = open_store(url)
    latencies = []
    try:
        time.sleep(3.0)                       # the manager's start-up (imports, first tick)
        rng = random.Random(0)
        for i in range(args.trials):
            time.sleep(rng.uniform(0.0, 1.0))     # a random phase against the manager's poll
            job = f"bench-{uuid.uuid4().hex[:8]}"
            now = time.time()
            spec = parse_submission(image=image, epochs="1", due="+1h", weight="0.01",
                                    app="bench", cmd="sleep 60", env=None, max_gpus="1",
                                    grace_s="2", name=job, now_s=now)
            t0 = time.perf_counter()
            submit(store, spec, now, default_grace_s=2.0)
            latencies.append(wait_running(api, job) - t0)
            subprocess.run([str(BIN / "andreas"), "cancel", job], env=env, check=True,
                           capture_output=True)
            wait_gone(api, job)
            print(f"  trial {i + 1}: {latencies[-1] * 1000:.0f} ms", flush=True)
    finally:
        manager.terminate()
        manager.wait(timeout=60)
        store.dispose()
        for c in client.containers.list(all=True, filters={"label": "andreas.job"}):
            c.remove(force=True)
        client.close()
    med, p90 = statistics.median(latencies), sorted(latencies)[int(0.9 * (len(latencies) - 1))]
    bmed = statistics.median(base)
    print(f"submission -> running, {args.trials} trials, store {url.split(':')[0]}, "
          f"manager poll_s {args.poll_s or 'default (1 s)'}")
    print(f"  docker run (baseline) {bmed * 1000:8.0f} ms   1.00 x")
    print(f"  median                {med * 1000:8.0f} ms   {med / bmed:.2f} x baseline")
    print(f"  p90                   {p90 * 1000:8.0f} ms   {p90 / bmed:.2f} x baseline")
    print(f"target: < {TARGET_S:.0f} s -> {'met' if p90 < TARGET_S else 'NOT met'} (p90)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"latency_s": latencies, "baseline_s": base,
                                         "median_s": med, "p90_s": p90,
                                         "baseline_median_s": bmed}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
