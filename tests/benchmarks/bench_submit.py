"""Submission-to-running benchmark: from invoking ``andreas submit`` to the job's container
running, against ``docker run -d`` of the same image in the same run.

An idle cluster of one node (2 fake V100s) whose Docker engine is ``$DOCKER_HOST``; the
store is the embedded SQLite default (``--mariadb``: a fresh database on
``ANDREAS_TEST_MARIADB_URL``); the manager is the real daemon (``andreas manager run``, a
subprocess, default ``poll_s``). Each trial runs the ``andreas submit`` command as a user
would (a subprocess, timed from before its start to its exit), then waits for the engine's
``start`` event of the job's container (a stream opened before the submission); then cancels it and waits until the
manager has stopped it, so every trial starts on an idle cluster. Trials start at a
random phase (0-1 s) against the manager's polling.

Baseline, measured in the same run: ``docker run -d`` of the same image with the docker
CLI (it returns once the container runs); beside it ``docker run -d`` with the options
the manager gives a job's container (user, capabilities, limits, labels, environment,
checkpoint mount), to show what those options cost the engine. Printed: medians and p90 of the CLI's wall time,
of the time from its exit to the container running, and of the whole, with the ratio to
the baseline; the manager's resident memory (VmRSS) with its optimizer helper while
busy, and alone once the helper has ended (``--optimizer-idle-s`` after the last trial),
and the latency of one submission after that (the helper starts again).
Targets (issue 34): submit CLI <= 0.3 s, CLI exit -> running <= 0.3 s, invoke -> running
<= 2 x docker run -d, manager idle RSS <= 120 MB. Times are printed, never asserted.
Run: ``bash scripts/bench.sh submit`` (starts Docker like test.sh; ``--mariadb`` also
starts a private MariaDB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
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

from andreas.store import migrate  # noqa: E402
from andreas.store.engine import make_engine  # noqa: E402

BIN = Path(sys.executable).parent
TARGETS = {"cli": 0.3, "after": 0.3, "ratio": 2.0, "rss_mb": 120.0}
# The job's command: ends at once on SIGTERM, so a cancel does not wait for the grace.
STOPS_ON_SIGTERM = "sh -c 'trap \"exit 143\" TERM; while :; do sleep 1; done'"


def start_events(api: docker.APIClient, job: str, timeout_s: float = 60.0):
    """The engine's ``start`` events of the job's containers, opened before the submission
    (an event stream costs the engine nothing while it waits; polling every 5 ms did)."""
    now = int(time.time())
    return api.events(since=now - 1, until=now + int(timeout_s), decode=True,
                      filters={"label": f"andreas.job={job}", "event": "start"})


def wait_running(events, job: str) -> float:
    """When the first ``start`` event arrives (the container runs)."""
    for _ in events:
        return time.perf_counter()
    raise RuntimeError(f"job {job}: no container started")


def wait_gone(api: docker.APIClient, job: str, timeout_s: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if not api.containers(filters={"label": f"andreas.job={job}", "status": "running"}):
            return
        time.sleep(0.05)
    raise RuntimeError(f"job {job}: container still running {timeout_s:.0f} s after cancel")


def docker_run(cli: str, image: str) -> float:
    """Wall time of ``docker run -d`` (it returns when the container is started)."""
    t0 = time.perf_counter()
    out = subprocess.run([cli, "run", "-d", "--network", "none", "--label", "andreas.bench=1",
                          image, "sleep", "30"], check=True, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    subprocess.run([cli, "rm", "-f", out.stdout.strip()], check=True, capture_output=True)
    return dt


def manager_flags(image: str, tmp: Path, node_memory_mib: int) -> list[str]:
    """``docker run -d`` flags for the container the manager would start for a job (the
    options of ``andreas.executor.run_options.run_options``, this benchmark's settings): the
    second baseline, so that what the job's options cost the engine shows apart."""
    from andreas.config import ExecutorSettings
    from andreas.executor.base import StartRequest
    from andreas.executor.run_options import run_options

    job = f"base-{uuid.uuid4().hex[:8]}"
    (tmp / "ckpt" / job).mkdir(parents=True)
    (tmp / "ckpt" / job).chmod(0o777)
    o = run_options(StartRequest(job_id=job, attempt=1, image=image, epochs=1,
                                 command=("sleep", "30"), gpu_uuids=("GPU-bench-0",),
                                 fake_gpus=True, grace_s=2.0, restart_count=0),
                    ExecutorSettings(checkpoint_root=str(tmp / "ckpt"), network="none",
                                     stop_grace_s=5.0), node_memory_mib=node_memory_mib)
    flags = ["--name", o["name"], "--network", o["network_mode"], "--user", o["user"],
             "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
             "--pids-limit", str(o["pids_limit"]), "--oom-score-adj", str(o["oom_score_adj"])]
    if "mem_limit" in o:
        flags += ["--memory", o["mem_limit"], "--memory-swap", o["memswap_limit"]]
    for volume in o["volumes"]:
        flags += ["-v", volume]
    for key, value in {**o["labels"], "andreas.bench": "1"}.items():
        flags += ["--label", f"{key}={value}"]
    for key, value in o["environment"].items():
        flags += ["-e", f"{key}={value}"]
    return [*flags, image, *o["command"]]


def docker_run_as_manager(cli: str, image: str, tmp: Path, node_memory_mib: int) -> float:
    """Wall time of ``docker run -d`` with the manager's options for a job."""
    argv = [cli, "run", "-d", *manager_flags(image, tmp, node_memory_mib)]
    t0 = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    subprocess.run([cli, "rm", "-f", out.stdout.strip()], check=True, capture_output=True)
    return dt


def remove_job_containers(client: docker.DockerClient) -> None:
    """Remove every andreas job container the run left, then close the client."""
    for c in client.containers.list(all=True, filters={"label": "andreas.job"}):
        c.remove(force=True)
    client.close()


def rss_mb(pid: int) -> tuple[float, float]:
    """(the process's VmRSS, the same summed with its children's) in MB."""
    import psutil

    me = psutil.Process(pid)
    own = me.memory_info().rss
    kids = sum(c.memory_info().rss for c in me.children(recursive=True))
    return own / 2**20, (own + kids) / 2**20


def wait_started(log: Path, manager: subprocess.Popen, timeout_s: float = 600.0) -> None:
    """Until the manager logged its first decision (imports, compile cache, first tick)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if manager.poll() is not None:
            raise RuntimeError(f"the manager exited: {log.read_text()[-2000:]}")
        if " decision " in log.read_text():
            return
        time.sleep(0.1)
    raise RuntimeError(f"the manager made no decision in {timeout_s:.0f} s")


def stats(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), sorted(values)[int(0.9 * (len(values) - 1))]


def store_url(tmp: Path, mariadb: bool) -> str:
    if not mariadb:
        return f"sqlite:///{tmp / 'andreas.db'}"
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    admin = os.environ["ANDREAS_TEST_MARIADB_URL"]
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with sa.create_engine(admin).begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
    return make_url(admin).set(database=name).render_as_string(hide_password=False)


def configure(tmp: Path, url: str, host: str, poll_s: float | None,
              idle_s: float) -> dict[str, str]:
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine)
    engine.dispose()
    manager_cfg = f"poll_s = {poll_s}\n" if poll_s else ""
    if idle_s >= 0:                  # < 0: the key left out (an andreas that predates it)
        manager_cfg += f"optimizer_idle_s = {idle_s}\n"
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
    return env


def trial(env: dict[str, str], api: docker.APIClient, image: str) -> tuple[float, float]:
    """(CLI wall, CLI exit -> running) of one submission."""
    job = f"bench-{uuid.uuid4().hex[:8]}"
    argv = [str(BIN / "andreas"), "submit", image, "--epochs", "1", "--due", "+1h",
            "--weight", "0.01", "--app", "bench", "--cmd", STOPS_ON_SIGTERM, "--max-gpus", "1",
            "--grace-s", "2", "--name", job, "--quiet"]
    events = start_events(api, job)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    t1 = time.perf_counter()
    t2 = wait_running(events, job)
    events.close()
    subprocess.run([str(BIN / "andreas"), "cancel", job], env=env, check=True,
                   capture_output=True)
    wait_gone(api, job)
    return t1 - t0, t2 - t1


def report(results: dict, args: argparse.Namespace, url: str) -> None:
    base_med = statistics.median(results["docker_run_s"])
    opts_med = statistics.median(results["docker_run_options_s"])
    cli_med, cli_p90 = stats(results["cli_s"])
    after_med, after_p90 = stats(results["after_s"])
    total = [a + b for a, b in zip(results["cli_s"], results["after_s"])]
    tot_med, tot_p90 = stats(total)
    rss = results["manager_rss_mb"]
    ok = {"cli": cli_med <= TARGETS["cli"], "after": after_med <= TARGETS["after"],
          "ratio": tot_med / base_med <= TARGETS["ratio"], "rss": rss <= TARGETS["rss_mb"]}
    print(f"submission -> running, {args.trials} trials, store {url.split(':')[0]}, "
          f"manager poll_s {args.poll_s or 'default'}")
    print(f"  docker run -d (baseline)      median {base_med * 1000:6.0f} ms   1.00 x")
    print(f"  docker run -d, job's options  median {opts_med * 1000:6.0f} ms   "
          f"{opts_med / base_med:.2f} x   (the manager's user, limits, labels, mount)")
    print(f"  andreas submit (CLI wall)     median {cli_med * 1000:6.0f} ms   "
          f"{cli_med / base_med:.2f} x   p90 {cli_p90 * 1000:.0f} ms   target <= 300 ms: "
          f"{'met' if ok['cli'] else 'NOT met'}")
    print(f"  CLI exit -> running           median {after_med * 1000:6.0f} ms   "
          f"{after_med / base_med:.2f} x   p90 {after_p90 * 1000:.0f} ms   target <= 300 ms: "
          f"{'met' if ok['after'] else 'NOT met'}")
    print(f"  invoke -> running             median {tot_med * 1000:6.0f} ms   "
          f"{tot_med / base_med:.2f} x   p90 {tot_p90 * 1000:.0f} ms   target <= 2 x: "
          f"{'met' if ok['ratio'] else 'NOT met'}   ({tot_med / opts_med:.2f} x the "
          "job's options)")
    print(f"  manager idle RSS              {rss:6.1f} MB   target <= 120 MB: "
          f"{'met' if ok['rss'] else 'NOT met'}   (with children "
          f"{results['idle_total_rss_mb']:.1f} MB; with the optimizer helper, busy: "
          f"{results['busy_rss_mb']:.1f} MB)")
    print(f"  first submission after idling CLI {results['cold_cli_s'] * 1000:.0f} ms + "
          f"{results['cold_after_s'] * 1000:.0f} ms to running (the helper starts again)")
    results.update(docker_run_median_s=base_med, docker_run_options_median_s=opts_med,
                   cli_median_s=cli_med,
                   after_median_s=after_med, total_median_s=tot_med,
                   total_ratio=tot_med / base_med, targets_met=ok)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--poll-s", type=float, default=None,
                   help="the manager's poll_s (default: its default)")
    p.add_argument("--mariadb", action="store_true")
    p.add_argument("--optimizer-idle-s", type=float, default=30.0,
                   help="the manager's optimizer_idle_s (default 30 s here, 300 s in "
                        "production): the idle RSS is read that long after the last trial; "
                        "< 0: leave the key out (to measure an andreas that predates it)")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    host, image = os.environ.get("DOCKER_HOST"), os.environ.get("ANDREAS_TEST_DOCKER_IMAGE")
    cli = shutil.which("docker")
    if not host or not image or not cli:
        print("bench_submit: needs DOCKER_HOST, ANDREAS_TEST_DOCKER_IMAGE and the docker CLI "
              "(bash scripts/bench.sh submit provides them)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="andreas-bench-submit."))
    url = store_url(tmp, args.mariadb)
    env = configure(tmp, url, host, args.poll_s, args.optimizer_idle_s)
    client = docker.DockerClient(base_url=host, version="auto")
    api = client.api
    docker_run(cli, image)                       # the image's layers into the page cache
    results: dict = {"docker_run_s": [], "docker_run_options_s": [], "cli_s": [],
                     "after_s": []}
    memory_mib = int(api.info()["MemTotal"]) >> 20
    log = tmp / "manager.log"
    manager = subprocess.Popen([str(BIN / "andreas"), "--log-level", "info", "manager", "run"],
                               env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_started(log, manager)
        rng = random.Random(0)
        for i in range(args.trials):
            results["docker_run_s"].append(docker_run(cli, image))
            results["docker_run_options_s"].append(
                docker_run_as_manager(cli, image, tmp, memory_mib))
            time.sleep(rng.uniform(0.0, 1.0))     # a random phase against the manager's poll
            cli_s, after_s = trial(env, api, image)
            results["cli_s"].append(cli_s)
            results["after_s"].append(after_s)
            print(f"  trial {i + 1}: docker run {results['docker_run_s'][-1] * 1000:.0f} ms "
                  f"({results['docker_run_options_s'][-1] * 1000:.0f} ms with the job's "
                  "options), "
                  f"submit {cli_s * 1000:.0f} ms + {after_s * 1000:.0f} ms to running",
                  flush=True)
        time.sleep(1.0)
        results["busy_rss_mb"] = rss_mb(manager.pid)[1]      # with the optimizer helper
        time.sleep(max(0.0, args.optimizer_idle_s) + 3.0)   # idle: the helper has ended
        results["manager_rss_mb"], results["idle_total_rss_mb"] = rss_mb(manager.pid)
        cli_s, after_s = trial(env, api, image)    # the first submission after idling
        results["cold_cli_s"], results["cold_after_s"] = cli_s, after_s
    finally:
        manager.terminate()
        manager.wait(timeout=60)
        remove_job_containers(client)
    report(results, args, url)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
