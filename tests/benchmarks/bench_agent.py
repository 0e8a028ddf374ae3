"""Node agent benchmark: its CPU and memory at 1 Hz with 8 fake GPUs and 4 followed
containers, against idle Python processes measured in the same run.

1. A fresh SQLite store and an agent config (1-s interval, spool in a temporary dir).
2. When a Docker daemon answers (``DOCKER_HOST`` or /var/run/docker.sock) and the test
   image is there (``ANDREAS_TEST_DOCKER_IMAGE``, default andreas-test/busybox:latest,
   which ``scripts/bench.sh agent`` builds): 4 containers labelled as andreas jobs, 2 of
   the 8 fake GPUs each, printing a progress line pair every 5 s, so the agent follows 4
   log streams, drives the fake GPUs from them and attributes energy to 4 jobs. Without
   Docker it says so and measures sampling and delivery only.
3. Three processes side by side for ``--seconds`` (default 60, after a warm-up):
   ``andreas-agent --fake-gpus 8xV100``, an idle ``python -c 'time.sleep()'`` and an idle
   Python that imported what the agent imports (the libraries' own footprint).
4. CPU: (user + system time) / wall time, in % of one core, from /proc through psutil;
   memory: resident set size, sampled every second (max). Then SIGTERM to the agent
   (it must exit 0) and a count of what reached the store.

``--shared``: two containers per fake GPU with half of it each (GPU sharing, issue 13).

Targets: agent CPU < 1 % of one core (issue 5, also with shared GPUs: issue 13), RSS < 60
MB (issue 17). Printed, never
asserted. The agent runs under ``--agent-python``: ``scripts/bench.sh agent`` gives it a
virtual environment with ``andreas[agent]`` only, as on a GPU node (the test environment
also has the manager's libraries, e.g. docker[ssh]'s paramiko, which the docker SDK
imports when it is there).
Run: ``bash scripts/bench.sh agent`` (starts Docker like the tests) or
``python tests/benchmarks/bench_agent.py [--seconds 60] [--agent-python PY] [--json F]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from andreas.store import migrate  # noqa: E402
from andreas.store.engine import make_engine  # noqa: E402

TARGET_CPU, TARGET_RSS_MB = 1.0, 60.0
NODE, GPUS, CONTAINERS = "bench-node", 8, 4
AGENT_IMPORTS = ("from agents.cli import lean_docker_sdk; "
                 "lean_docker_sdk('unix://'); "
                 "import agents.daemon, agents.gpu, agents.host, agents.epochs, agents.tracker, "
                 "agents.nvml_fake, agents.store_writer, agents.delivery, docker, pynvml")
PROGRESS = ('e=1; while true; do '
            'echo "ANDREAS-PROGRESS v1 job=$JOB epoch=$e of=1000 event=start t=$(date +%s)"; '
            'sleep 5; '
            'echo "ANDREAS-PROGRESS v1 job=$JOB epoch=$e of=1000 event=end t=$(date +%s)"; '
            'e=$((e+1)); done')


def log(msg: str) -> None:
    print(msg, flush=True)


def docker_client():
    """A client of an answering daemon, or (None, reason)."""
    try:
        import docker

        host = os.environ.get("DOCKER_HOST")
        if not host and Path("/var/run/docker.sock").exists():
            host = "unix:///var/run/docker.sock"
        if not host:
            return None, "no DOCKER_HOST and no /var/run/docker.sock"
        client = docker.DockerClient(base_url=host, version="auto")
        client.ping()
        image = os.environ.get("ANDREAS_TEST_DOCKER_IMAGE", "andreas-test/busybox:latest")
        client.images.get(image)
        return (client, host, image), None
    except Exception as e:  # noqa: BLE001 - the reason is printed
        return None, f"{type(e).__name__}: {e}"


def store(tmp: Path, jobs: list[str], mariadb: bool = False) -> str:
    """A fresh SQLite file, or (``mariadb``) a fresh database on the private server of
    ``ANDREAS_TEST_MARIADB_URL`` (bench.sh agent --mariadb starts one)."""
    url = f"sqlite:///{tmp / 'bench.db'}"
    if mariadb:
        from sqlalchemy.engine import make_url

        admin = os.environ["ANDREAS_TEST_MARIADB_URL"]
        name = f"bench_agent_{os.getpid()}"
        with sa.create_engine(admin).begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
        url = make_url(admin).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        for job in jobs:
            conn.execute(sa.text(
                "INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, "
                "due_s, weight, application, grace_s, state) VALUES (:j, 'img', '[]', '{}', "
                "1000, 0, 0, 1e12, 1, 'bench', 120, 'running')"), {"j": job})
    engine.dispose()
    return url


class Meter:
    """CPU time and RSS of one process over the measured window."""

    def __init__(self, name: str, pid: int) -> None:
        self.name, self.proc = name, psutil.Process(pid)
        self.rss: list[int] = []
        self.cpu0 = self.wall0 = 0.0
        self.cpu_pct = 0.0

    def begin(self) -> None:
        t = self.proc.cpu_times()
        self.cpu0, self.wall0 = t.user + t.system, time.monotonic()

    def sample(self) -> None:
        self.rss.append(self.proc.memory_info().rss)

    def end(self) -> None:
        t = self.proc.cpu_times()
        self.cpu_pct = (t.user + t.system - self.cpu0) / (time.monotonic() - self.wall0) * 100

    @property
    def rss_mb(self) -> float:
        return max(self.rss) / 1e6

    @property
    def rss_mib(self) -> float:
        return max(self.rss) / (1 << 20)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="measured window (>= 60)")
    p.add_argument("--warmup", type=float, default=15.0, help="seconds before measuring")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--shared", action="store_true",
                   help="the containers share GPUs (two per GPU, gpu_milli 500): the "
                        "per-process split of a shared GPU's energy")
    p.add_argument("--agent-python", default=sys.executable,
                   help="interpreter of the agent and of the idle processes (default: this "
                        "one; scripts/bench.sh agent: a venv with andreas[agent] only)")
    p.add_argument("--mariadb", action="store_true",
                   help="the store on ANDREAS_TEST_MARIADB_URL (a fresh database) instead of "
                        "SQLite: the agent then imports PyMySQL")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory "
                   "(database, spool, agent log) and print its path")
    a = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    found, why_not = docker_client()
    jobs = [f"bench-j{k}" for k in range(CONTAINERS)] if found else []
    url = store(tmp, jobs, mariadb=a.mariadb)
    containers = []
    docker_url = ""
    if found:
        client, docker_url, image = found
        uuids = [f"GPU-fake-{NODE}-{i}" for i in range(GPUS)]
        for k, job in enumerate(jobs):
            labels = {"andreas.job": job, "andreas.attempt": "1",
                      "andreas.gpus": ",".join(uuids[2 * k:2 * k + 2]), "andreas.bench": "1"}
            if a.shared:             # two jobs per GPU, half of it each
                labels.update({"andreas.gpus": uuids[k // 2], "andreas.gpu_milli": "500"})
            containers.append(client.containers.run(
                image, ["sh", "-c", PROGRESS], detach=True, network_mode="none",
                labels=labels, environment={"JOB": job}))
        log(f"Docker at {docker_url}: {len(containers)} labelled containers from {image}, "
            + ("two sharing each fake GPU (half each)" if a.shared else "2 fake GPUs each")
            + ", a progress line pair every 5 s")
    else:
        log(f"Docker NOT available ({why_not}): measuring without followed containers "
            "(sampling and delivery only)")
    cfg = tmp / "agent.toml"
    cfg.write_text(f'[agent]\nnode_name = "{NODE}"\ninterval_s = 1.0\n'
                   f'docker_url = "{docker_url}"\nheartbeat_s = 10\n'
                   f'[store]\nurl = "{url}"\n[spool]\npath = "{tmp / "spool"}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREAS_DB")}
    env["PYTHONPATH"] = str(ROOT)
    if a.mariadb:           # MariaDB: the node is registered once by a privileged account
        subprocess.run([a.agent_python, "-c", "from agents.cli import main; main()",
                        "--config", str(cfg), "--fake-gpus", f"{GPUS}xV100", "--register"],
                       env=env, check=True, capture_output=True)
    agent_log = (tmp / "agent.log").open("w")
    agent = subprocess.Popen([a.agent_python, "-c", "from agents.cli import main; main()",
                              "--config", str(cfg), "--fake-gpus", f"{GPUS}xV100"],
                             stdout=agent_log, stderr=subprocess.STDOUT, env=env)
    idle = subprocess.Popen([a.agent_python, "-c", "import time; time.sleep(1e6)"])
    idle_libs = subprocess.Popen([a.agent_python, "-c", f"{AGENT_IMPORTS}; import time; "
                                  "time.sleep(1e6)"], env=env)
    meters = [Meter("andreas-agent (8 fake GPUs, 1 Hz)", agent.pid),
              Meter("idle python", idle.pid),
              Meter("idle python + the agent's imports", idle_libs.pid)]
    try:
        log(f"warm-up {a.warmup:.0f} s, then {a.seconds:.0f} s measured ...")
        time.sleep(a.warmup)
        if agent.poll() is not None:
            raise RuntimeError(f"the agent exited ({agent.returncode}): "
                               f"{(tmp / 'agent.log').read_text()[-2000:]}")
        for m in meters:
            m.begin()
        t0 = time.time()
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            for m in meters:
                m.sample()
            time.sleep(1.0)
        for m in meters:
            m.end()
        t1 = time.time()
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(timeout=60)
    finally:
        for proc in (agent, idle, idle_libs):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for c in containers:
            c.remove(force=True)
        agent_log.close()

    engine = make_engine(url)
    with engine.connect() as conn:
        samples = conn.execute(sa.text("SELECT COUNT(*) FROM power_samples WHERE t >= :a AND "
                                       "t < :b"), {"a": t0, "b": t1}).scalar()
        job_rows = conn.execute(sa.text("SELECT COUNT(*) FROM job_energy")).scalar()
        epochs = conn.execute(sa.text("SELECT COUNT(*) FROM epoch_events")).scalar()
        rss_self = conn.execute(sa.text("SELECT MAX(agent_rss_mib), AVG(agent_cpu_percent) FROM "
                                        "host_samples WHERE t >= :a AND t < :b"),
                                {"a": t0, "b": t1}).one()
    engine.dispose()

    base = meters[1]
    log("")
    log(f"{'process':40} {'CPU % of 1 core':>16} {'RSS MB (max)':>13} {'RSS MiB':>8}")
    for m in meters:
        log(f"{m.name:40} {m.cpu_pct:16.3f} {m.rss_mb:13.1f} {m.rss_mib:8.1f}")
    agent_m = meters[0]
    log("")
    log(f"agent vs idle python: CPU +{agent_m.cpu_pct - base.cpu_pct:.3f} points, "
        f"RSS x{agent_m.rss_mb / base.rss_mb:.1f} ({agent_m.rss_mb - base.rss_mb:+.1f} MB); "
        f"vs idle python with its imports: RSS {agent_m.rss_mb - meters[2].rss_mb:+.1f} MB")
    log(f"targets: CPU < {TARGET_CPU:g} % -> {'met' if agent_m.cpu_pct < TARGET_CPU else 'MISSED'}"
        f"; RSS < {TARGET_RSS_MB:g} MB -> "
        f"{'met' if agent_m.rss_mb < TARGET_RSS_MB else 'MISSED'}")
    log(f"in the window: {samples} GPU samples ({samples / GPUS / a.seconds:.2f} per GPU and "
        f"second), the agent's own report: RSS max {rss_self[0] or 0:.1f} MiB, CPU mean "
        f"{rss_self[1] or 0:.2f} %; whole run: {job_rows} job-energy rows, {epochs} epochs; "
        f"agent exit code after SIGTERM: {code}")
    result = {"seconds": a.seconds, "agent_python": a.agent_python, "docker": bool(found), "docker_reason": why_not,
              "containers": len(containers), "gpus": GPUS, "exit_code": code,
              "samples_in_window": samples, "job_energy_rows": job_rows, "epochs": epochs,
              "processes": {m.name: {"cpu_percent": m.cpu_pct, "rss_mb": m.rss_mb,
                                     "rss_mib": m.rss_mib} for m in meters},
              "targets": {"cpu_percent": TARGET_CPU, "rss_mb": TARGET_RSS_MB}}
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=2))
    if a.keep:
        log(f"kept {tmp} (bench.db, spool/, agent.log)")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
