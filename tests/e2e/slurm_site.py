"""An andreas site on the real Slurm test cluster, for the Slurm end-to-end tests.

Real parts: the Slurm cluster of the session (tests/slurm_cluster.py: slurmctld and three
slurmd, two fake V100 GRES each), a fresh MariaDB database with the least-privilege
accounts (as tests/e2e/cluster.py), one ``andreas-agent`` per Slurm node (``engine =
"slurm"``, fake GPUs, registered under the Slurm node name), the ``andreas manager run``
daemon with ``[executor] kind = "slurm"``, and the example job (examples/train/) run by
Slurm as a plain command (``andreas submit --cmd``). Only the GPUs are simulated.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from tests.e2e.cluster import BIN, ROOT, ManagerRuns, _base_env, _fresh_database, _run
from tests.e2e.poller import Poller
from tests.slurm_cluster import SlurmCluster

APP = "example"
TRAIN = f"{sys.executable} {ROOT / 'examples' / 'train' / 'train.py'}"


@dataclass
class Site(ManagerRuns):
    tmp: Path
    slurm: SlurmCluster
    db_admin: str
    manager_env: dict[str, str]
    agent_env: dict[str, str]
    output_dir: Path
    checkpoint_root: Path
    agents: dict[str, subprocess.Popen] = field(default_factory=dict)
    manager: subprocess.Popen | None = None
    manager_runs: int = 0
    monitor: SlurmMonitor | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    tag: str = field(default_factory=lambda: secrets.token_hex(3))

    # ------------------------------------------------------------------ processes

    def andreas(self, *args: str, timeout: float = 120, check: bool = True
                ) -> subprocess.CompletedProcess:
        p = subprocess.run([str(BIN / "andreas"), *args], env=self.manager_env,
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        if check and p.returncode != 0:
            raise AssertionError(f"andreas {' '.join(args[:2])} exited {p.returncode}: "
                                 f"{p.stderr[-2000:]}")
        return p

    def submit(self, name: str, epochs: int, due: str, weight: float, *extra: str,
               epoch_s: float = 1.0) -> str:
        """The example as a command job ``<name>-<site tag>`` (Slurm keeps the names of
        ended jobs for MinJobAge: an earlier run's ``andreas-<name>-1`` would be taken for
        this one's); returns its id."""
        return self.andreas("submit", "--cmd", TRAIN, "--app", APP,
                            "--name", f"{name}-{self.tag}",
                            "--epochs", str(epochs), "--due", due, "--weight", str(weight),
                            "--env", f"EXAMPLE_EPOCH_S={epoch_s}", *extra,
                            "--quiet").stdout.strip()

    def start_manager(self, *args: str) -> None:
        self.manager_runs += 1
        log = (self.tmp / f"manager-{self.manager_runs}.log").open("w")
        self.manager = subprocess.Popen([str(BIN / "andreas"), "--log-level", "info",
                                         "manager", "run", *args], env=self.manager_env,
                                        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    def start_agent(self, node: str) -> None:
        log = (self.tmp / f"agent-{node}.log").open("a")
        self.agents[node] = subprocess.Popen(
            [str(BIN / "andreas-agent"), "--config", str(self.tmp / f"agent-{node}.toml")],
            env=self.agent_env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    def db(self) -> sa.Engine:
        return sa.create_engine(self.db_admin, pool_pre_ping=True)

    def rows(self, sql: str, **params) -> list[sa.Row]:
        e = self.db()
        try:
            with e.connect() as conn:
                return list(conn.execute(sa.text(sql), params))
        finally:
            e.dispose()

    def states(self) -> dict[str, str]:
        return {r.id: r.state for r in self.rows("SELECT id, state FROM jobs")}

    def epochs_done(self, job: str) -> int:
        r = self.rows("SELECT MAX(epoch) AS e FROM epoch_events WHERE job_id = :j", j=job)
        return int(r[0].e or 0)

    def attempts(self) -> list[sa.Row]:
        return self.rows(
            "SELECT a.job_id, a.attempt, n.name AS node, a.gpu_ids, a.container_id, "
            "a.start_s, a.end_s, a.exit_code, a.reason, a.decision_id, a.stop_decision_id "
            "FROM job_attempts a JOIN nodes n ON n.id = a.node_id ORDER BY a.id")

    def plans(self) -> dict[int, dict]:
        return {r.id: (json.loads(r.plan) if isinstance(r.plan, str) else r.plan)
                for r in self.rows("SELECT id, plan FROM decisions")}

    def wait(self, what: str, predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.manager is not None and self.manager.poll() is not None:
                raise AssertionError(f"manager exited ({self.manager.returncode}) while "
                                     f"waiting for {what}:\n{self.manager_log()[-4000:]}")
            time.sleep(0.25)
        raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n"
                             f"{self.manager_log()[-5000:]}")

    def reset(self) -> None:
        """Between two tests of one site, whatever the first left: its manager stopped
        (SIGTERM, else SIGKILL; a manager left running holds the lease, so the next test's
        own would only wait), its monitor thread ended, its unfinished jobs cancelled in
        the store and in Slurm, and every node idle again."""
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        if self.manager is not None and self.manager.poll() is None:
            try:
                self.stop_manager()
            except subprocess.TimeoutExpired:
                self.manager.kill()
                self.manager.wait(timeout=30)
        for job, state in self.states().items():
            if state not in ("completed", "failed", "cancelled"):
                self.andreas("cancel", job, check=False)
        _cancel_jobs_under(self.slurm, self.output_dir)
        for node in self.slurm.nodes:
            self.slurm.wait_idle(node)

    def close(self) -> None:
        """Every process this site started is gone after this, whatever the load."""
        if self.monitor is not None:
            self.monitor.stop()
        procs = [p for p in (self.manager, *self.agents.values()) if p is not None]
        if self.manager is not None and self.manager.poll() is None:
            self.manager.kill()
        for agent in self.agents.values():
            if agent.poll() is None:
                agent.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
        for fn in reversed(self.cleanup):
            fn()


# ---------------------------------------------------------------------- monitor

@dataclass
class SlurmMonitor(Poller):
    """Polls squeue every ``interval_s``: which andreas jobs run on which node with how
    many GPUs, so a test can assert that no job ever ran in two Slurm jobs at once and no
    node ever ran more GPUs than it has, as Slurm itself reported them."""

    slurm: SlurmCluster
    interval_s: float = 0.3
    duplicates: list[tuple[float, str, list[str]]] = field(default_factory=list)
    max_gpus: dict[str, int] = field(default_factory=dict)
    seen: dict[str, set[str]] = field(default_factory=dict)       # job -> nodes
    names: set[str] = field(default_factory=set)
    polls: int = 0
    thread_name = "slurm-monitor"

    def poll(self) -> None:
        try:
            out = self.slurm.squeue("--noheader", "--states=running,completing",
                                    "--format=%j|%N|%b")
        except subprocess.SubprocessError:
            return
        where: dict[str, list[str]] = {}
        used: dict[str, int] = {}
        for line in out.splitlines():
            name, node, gres = (line.split("|") + ["", ""])[:3]
            if not name.startswith("andreas-"):
                continue
            self.names.add(name)
            job = name[len("andreas-"):].rsplit("-", 1)[0]
            where.setdefault(job, []).append(node)
            self.seen.setdefault(job, set()).add(node)
            used[node] = used.get(node, 0) + int(gres.rsplit(":", 1)[-1] or 0
                                                 if gres.rsplit(":", 1)[-1].isdigit() else 0)
        for node, n in used.items():
            self.max_gpus[node] = max(self.max_gpus.get(node, 0), n)
        for job, nodes in where.items():
            if len(nodes) > 1:
                self.duplicates.append((time.time(), job, nodes))
        self.polls += 1


# ---------------------------------------------------------------------- set-up

def profiles(epoch_s: float) -> list[dict]:
    """The example's epoch times on a V100 (a profiling run's rows)."""
    return [{"application": APP, "gpu_type": "V100", "gpus": g, "epoch_time_s": epoch_s / g}
            for g in (1, 2)]


@contextmanager
def running_site(tmp: Path, slurm: SlurmCluster, *, manager_toml: str,
                 executor_toml: str = "", extra_toml: str = "",
                 app_profiles: list[dict] | None = None) -> Iterator[Site]:
    """A fresh database, the agents of every Slurm node (registered and started), the
    application's profile rows; the manager is started by the test. Every andreas job the
    site leaves in Slurm is cancelled at the end."""
    from tests.store.conftest import mariadb_admin_url

    admin_url = mariadb_admin_url().render_as_string(hide_password=False)
    db_admin, drop = _fresh_database(admin_url)
    prefix = f"s{secrets.token_hex(3)}_"
    passwords = {r: secrets.token_urlsafe(16) for r in ("agent", "manager", "reporter",
                                                        "migrator")}
    output_dir, checkpoints = tmp / "output", tmp / "checkpoints"
    output_dir.mkdir()
    checkpoints.mkdir()
    (tmp / "andreas.toml").write_text(
        f"{manager_toml}\n[executor]\nkind = \"slurm\"\ncheckpoint_root = \"{checkpoints}\"\n"
        f"stop_grace_s = 20\n{executor_toml}\n[executor.slurm]\n"
        f"partition = \"{slurm.partition}\"\noutput_dir = \"{output_dir}\"\n"
        f"command_timeout_s = 20\n{extra_toml}")
    env = {**_base_env(tmp), "SLURM_CONF": slurm.slurm_conf}
    admin_env = {**env, "ANDREAS_DB_URL": db_admin,
                 **{f"ANDREAS_DB_{r.upper()}_PASSWORD": p for r, p in passwords.items()}}
    site: Site | None = None
    try:
        _run([str(BIN / "andreas"), "db", "upgrade"], admin_env)
        _run([str(BIN / "andreas"), "db", "create-users", "--apply", "--prefix", prefix],
             admin_env)

        def role_url(role: str) -> str:
            return (make_url(db_admin).set(username=f"{prefix}{role}",
                                           password=passwords[role])
                    .render_as_string(hide_password=False))

        site = Site(tmp=tmp, slurm=slurm, db_admin=db_admin,
                    manager_env={**env, "ANDREAS_DB_URL": role_url("manager")},
                    agent_env={**env, "ANDREAS_DB_URL": role_url("agent")},
                    output_dir=output_dir, checkpoint_root=checkpoints)
        site.cleanup.append(drop)

        def accounts_drop() -> None:
            from andreas.store import accounts
            e = sa.create_engine(admin_url)
            try:
                accounts.drop(e, prefix)
            finally:
                e.dispose()
        site.cleanup.insert(0, accounts_drop)
        registering = []
        for node in slurm.nodes:
            (tmp / f"agent-{node}.toml").write_text(
                f"[agent]\nnode_name = \"{node}\"\ninterval_s = 0.5\ndocker_url = \"\"\n"
                f"heartbeat_s = 2.0\njob_energy_window_s = 5.0\nfake_gpus = \"2xV100\"\n"
                f"engine = \"slurm\"\nslurm_output_dir = \"{output_dir}\"\n"
                f"[spool]\npath = \"{tmp / ('spool-' + node)}\"\n")
            registering.append(subprocess.Popen(        # the nodes register in parallel
                [str(BIN / "andreas-agent"), "--config", str(tmp / f"agent-{node}.toml"),
                 "--fake-gpus", "2xV100", "--register"], env=site.manager_env, cwd=ROOT,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for node, p in zip(slurm.nodes, registering):
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0, f"andreas-agent --register ({node}): {out[-2000:]}"
            site.start_agent(node)
        if app_profiles:
            e = site.db()
            try:
                with e.begin() as conn:
                    conn.execute(sa.text(
                        "INSERT INTO app_profiles (application, gpu_type, gpus, epoch_time_s, "
                        "source, samples, updated_s) VALUES (:application, :gpu_type, :gpus, "
                        ":epoch_time_s, 'profiler', 3, :t)"),
                        [{**row, "t": time.time()} for row in app_profiles])
            finally:
                e.dispose()
        yield site
    finally:
        if site is not None:
            site.close()
        else:
            drop()
        _cancel_jobs_under(slurm, output_dir)


def _cancel_jobs_under(slurm: SlurmCluster, output_dir: Path) -> None:
    """Cancel the site's Slurm jobs (those writing under its output directory)."""
    out = slurm.squeue("--noheader", "--states=pending,running,completing,configuring",
                       "--format=%i|%j")
    ids = [line.split("|")[0] for line in out.splitlines()
           if "|andreas-" in line]
    mine = []
    for job_id in ids:
        try:
            detail = slurm.scontrol("-o", "show", "job", job_id)
        except subprocess.CalledProcessError:
            continue
        if f"StdOut={output_dir}/" in detail:
            mine.append(job_id)
    if mine:
        subprocess.run(["scancel", *mine], env=slurm.env, capture_output=True, timeout=30)
