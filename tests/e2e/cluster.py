"""A whole andreas cluster on one machine for the end-to-end test.

Real parts: a fresh MariaDB database (on the server scripts/test.sh started) with the
least-privilege accounts, one private ``dockerd`` per node (``engines.py``), one
``andreas-agent`` process per node with fake GPUs, the ``andreas manager run`` daemon,
and the example training image (scripts/build-example-image.sh) in every engine. Only
the GPUs are simulated. Every process is a real subprocess of the installed commands,
configured the way an operator would (config files; passwords in environment variables
or files, never on a command line).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from tests.e2e.engines import Engine

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
IMAGE = "andreas-example/train:e2e"


def _run(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(args[:3])} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


@dataclass
class NodeSetup:
    name: str
    fake_gpus: str
    gpus: int
    engine: Engine
    agent: subprocess.Popen | None = None


class ManagerRuns:
    """The ``andreas manager run`` processes of an end-to-end site (its ``manager``, the
    ``manager_runs`` started so far, their logs ``tmp/manager-N.log``): Docker's
    :class:`Cluster` and the Slurm site (tests/e2e/slurm_site.py) alike."""

    tmp: Path
    manager: subprocess.Popen | None
    manager_runs: int

    def kill_manager(self) -> None:
        """SIGKILL: no clean-up of any kind (the lease expires on its own)."""
        assert self.manager is not None and self.manager.poll() is None, self.manager_log()
        self.manager.send_signal(signal.SIGKILL)
        self.manager.wait(timeout=10)

    def stop_manager(self) -> int:
        if self.manager is None or self.manager.poll() is not None:
            return self.manager.returncode if self.manager is not None else 0
        self.manager.send_signal(signal.SIGTERM)
        return self.manager.wait(timeout=60)

    def manager_log(self) -> str:
        return "\n".join((self.tmp / f"manager-{i}.log").read_text()
                         for i in range(1, self.manager_runs + 1))


@dataclass
class Cluster(ManagerRuns):
    """Build with :func:`start_cluster`; :meth:`close` stops and removes everything."""

    tmp: Path
    admin_url: str
    db_url_admin: str                      # the test database, administrator
    manager_env: dict[str, str]
    agent_env: dict[str, str]
    reporter_env: dict[str, str]
    nodes: dict[str, NodeSetup]
    checkpoint_root: Path
    extra_volumes: tuple[str, ...]
    manager: subprocess.Popen | None = None
    manager_runs: int = 0
    monitor: Monitor | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    # ------------------------------------------------------------------ processes

    def andreas(self, *args: str, timeout: float = 60, role: str = "manager") -> str:
        env = self.reporter_env if role == "reporter" else self.manager_env
        return _run([str(BIN / "andreas"), *args], env, timeout)

    def start_manager(self) -> None:
        self.manager_runs += 1
        log = (self.tmp / f"manager-{self.manager_runs}.log").open("w")
        self.manager = subprocess.Popen([str(BIN / "andreas"), "--log-level", "info",
                                         "manager", "run"],
                                        env=self.manager_env, stdout=log,
                                        stderr=subprocess.STDOUT, cwd=ROOT)

    def start_agent(self, name: str, env: dict[str, str] | None = None) -> None:
        """The node's ``andreas-agent`` (its log appended to agent-NAME.log); ``env``:
        other than ``agent_env`` (e.g. its own database account)."""
        log = (self.tmp / f"agent-{name}.log").open("a")
        self.nodes[name].agent = subprocess.Popen(
            [str(BIN / "andreas-agent"), "--config", str(self.tmp / f"agent-{name}.toml")],
            env=self.agent_env if env is None else env, stdout=log,
            stderr=subprocess.STDOUT, cwd=ROOT)

    def stop_agent(self, name: str, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (a clean shutdown: delivery flushed, ``up -> down``); its exit code."""
        agent = self.nodes[name].agent
        if agent is None or agent.poll() is not None:
            return agent.returncode if agent is not None else None
        agent.terminate()
        try:
            return agent.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            agent.kill()
            return agent.wait(timeout=10)

    def engine_db(self) -> sa.Engine:
        return sa.create_engine(self.db_url_admin, pool_pre_ping=True)

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        if self.manager is not None and self.manager.poll() is None:
            self.manager.kill()
            self.manager.wait(timeout=10)
        for name in self.nodes:
            self.stop_agent(name)
        for node in self.nodes.values():
            node.engine.destroy()
        for fn in reversed(self.cleanup):
            fn()


# ---------------------------------------------------------------------- monitor

@dataclass
class Monitor:
    """Polls every engine's running andreas containers every ``interval_s``: the GPUs in
    use per node (the ``andreas.gpus`` label; shares by ``andreas.gpu_milli``) and which
    jobs run where, so a test can assert that no node ever ran more GPUs than it has and
    no job ever ran twice."""

    cluster: Cluster
    interval_s: float = 0.2
    max_gpus: dict[str, int] = field(default_factory=dict)
    max_milli: dict[str, int] = field(default_factory=dict)     # GPU shares counted in milli
    max_containers: dict[str, int] = field(default_factory=dict)
    duplicates: list[tuple[float, str, list[str]]] = field(default_factory=list)
    over: list[tuple[float, str, int]] = field(default_factory=list)
    seen_on: dict[str, set[str]] = field(default_factory=dict)
    polls: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="e2e-monitor")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        clients = {n: docker.APIClient(base_url=s.engine.url, version="auto", timeout=5)
                   for n, s in self.cluster.nodes.items()}
        while not self._stop.wait(self.interval_s):
            where: dict[str, list[str]] = {}
            for name, api in clients.items():
                try:
                    running = api.containers(filters={"label": "andreas.job",
                                                      "status": "running"})
                except Exception:  # noqa: BLE001 - an engine that was stopped
                    continue
                used = milli = 0
                for c in running:
                    labels = c.get("Labels") or {}
                    held = len([u for u in labels.get("andreas.gpus", "").split(",") if u])
                    share = labels.get("andreas.gpu_milli")
                    used += held if share is None else 0
                    milli += held * (1000 if share is None else int(share))
                    where.setdefault(labels["andreas.job"], []).append(name)
                    self.seen_on.setdefault(labels["andreas.job"], set()).add(name)
                self.max_gpus[name] = max(self.max_gpus.get(name, 0), used)
                self.max_milli[name] = max(self.max_milli.get(name, 0), milli)
                self.max_containers[name] = max(self.max_containers.get(name, 0), len(running))
                if used > self.cluster.nodes[name].gpus or \
                        milli > 1000 * self.cluster.nodes[name].gpus:
                    self.over.append((time.time(), name, milli))
            self.polls += 1
            for job, nodes in where.items():
                if len(nodes) > 1:
                    self.duplicates.append((time.time(), job, nodes))
        for api in clients.values():
            api.close()


# ---------------------------------------------------------------------- set-up

def _fresh_database(admin_url: str) -> tuple[str, Callable[[], None]]:
    name = f"e2e_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, pool_pre_ping=True)   # a test may restart MariaDB
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 "
                             "COLLATE utf8mb4_unicode_ci")

    def drop() -> None:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False), drop


def _base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANDREAS_", "DOCKER_"))}
    env["ANDREAS_CONFIG"] = str(tmp / "andreas.toml")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_cluster(tmp: Path, admin_url: str, node_specs: list[tuple[str, str, int]], *,
                  manager_toml: str, extra_volumes: tuple[str, ...],
                  app_profiles: list[dict[str, Any]], executor_toml: str = "",
                  agent_toml: str = "") -> Cluster:
    """Database + accounts, engines with the example image, registered agents (started),
    the application's profile rows. The manager is started by the test."""
    cleanup: list[Callable[[], None]] = []
    db_admin, drop = _fresh_database(admin_url)
    cleanup.append(drop)
    prefix = f"e{secrets.token_hex(3)}_"
    passwords = {r: secrets.token_urlsafe(16) for r in ("agent", "manager", "reporter",
                                                        "migrator")}
    checkpoint_root = tmp / "checkpoints"
    checkpoint_root.mkdir()
    volumes = ", ".join(json.dumps(v) for v in extra_volumes)
    (tmp / "andreas.toml").write_text(
        f"{manager_toml}\n[executor]\ncheckpoint_root = \"{checkpoint_root}\"\n"
        f"network = \"none\"\nextra_volumes = [{volumes}]\nstop_grace_s = 30\n"
        f"{executor_toml}")
    env = _base_env(tmp)
    admin_env = {**env, "ANDREAS_DB_URL": db_admin,
                 **{f"ANDREAS_DB_{r.upper()}_PASSWORD": p for r, p in passwords.items()}}
    _run([str(BIN / "andreas"), "db", "upgrade"], admin_env)
    _run([str(BIN / "andreas"), "db", "create-users", "--apply", "--prefix", prefix],
         admin_env)

    def account_drop() -> None:
        from andreas.store import accounts
        e = sa.create_engine(admin_url, pool_pre_ping=True)
        try:
            accounts.drop(e, prefix)
        finally:
            e.dispose()
    cleanup.append(account_drop)

    def role_url(role: str) -> str:
        return (make_url(db_admin).set(username=f"{prefix}{role}", password=passwords[role])
                .render_as_string(hide_password=False))

    manager_env = {**env, "ANDREAS_DB_URL": role_url("manager")}
    agent_env = {**env, "ANDREAS_DB_URL": role_url("agent")}
    nodes: dict[str, NodeSetup] = {}
    cluster = Cluster(tmp=tmp, admin_url=admin_url, db_url_admin=db_admin,
                      manager_env=manager_env, agent_env=agent_env,
                      reporter_env={**env, "ANDREAS_DB_URL": role_url("reporter")}, nodes=nodes,
                      checkpoint_root=checkpoint_root, extra_volumes=extra_volumes,
                      cleanup=cleanup)
    try:
        for name, fake, gpus in node_specs:
            engine = Engine(name, tmp / "engines" / name)
            nodes[name] = NodeSetup(name=name, fake_gpus=fake, gpus=gpus, engine=engine)
            engine.start()
            _run(["bash", "scripts/build-example-image.sh", "--tag", IMAGE],
                 {**env, "DOCKER_HOST": engine.url}, timeout=300)
            (tmp / f"agent-{name}.toml").write_text(
                f"[agent]\nnode_name = \"{name}\"\ninterval_s = 0.5\n"
                f"docker_url = \"{engine.url}\"\ndocker_endpoint = \"{engine.url}\"\n"
                f"heartbeat_s = 2.0\njob_energy_window_s = 5.0\nfake_gpus = \"{fake}\"\n"
                f"{agent_toml}[spool]\npath = \"{tmp / ('spool-' + name)}\"\n")
            _run([str(BIN / "andreas-agent"), "--config", str(tmp / f"agent-{name}.toml"),
                  "--register"], manager_env)
            cluster.start_agent(name)
        e = cluster.engine_db()
        try:
            with e.begin() as conn:
                if app_profiles:       # none: every application is new (profiling tests)
                    conn.execute(sa.text(
                        "INSERT INTO app_profiles (application, gpu_type, gpus, epoch_time_s, "
                        "source, samples, updated_s) VALUES (:application, :gpu_type, :gpus, "
                        ":epoch_time_s, 'profiler', 3, :t)"),
                        [{**row, "t": time.time()} for row in app_profiles])
        finally:
            e.dispose()
    except BaseException:
        cluster.close()
        raise
    return cluster


def example_volumes() -> tuple[str, ...]:
    """The bind mounts the example image needs on this host (its runtime comes from it)."""
    out = subprocess.run(["bash", "scripts/build-example-image.sh", "--print-volumes"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return tuple(out.split())


@contextlib.contextmanager
def running_cluster(tmp: Path, node_specs: list[tuple[str, str, int]], *,
                    admin_url: str | None = None, **options: Any) -> Iterator[Cluster]:
    """:func:`start_cluster` on the test MariaDB (or the server at ``admin_url``) with the
    example image's mounts, closed at the end: the body of every end-to-end module's
    ``cluster`` fixture."""
    from tests.store.conftest import mariadb_admin_url

    admin = admin_url or mariadb_admin_url().render_as_string(hide_password=False)
    c = start_cluster(tmp, admin, node_specs, extra_volumes=example_volumes(), **options)
    try:
        yield c
    finally:
        c.close()
