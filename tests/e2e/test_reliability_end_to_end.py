"""End to end, the faults of issue 32: a database restart with two managers, and a
container engine SIGKILLed under a running job.

Real MariaDB (the module's own server, restarted on the same data by
``mariadb_control``), two real dockerd engines, agents with fake GPUs, ``andreas manager
run`` processes. One module cluster:

1. *Database restart* (``test_database_restarts``): the manager alone loses MariaDB
   for ~20 s (long enough that the old exponential back-off would have slept ~10 s past
   its return) and must make its next decision within 5 s of the database's return.
   Then a second manager waits as a standby; the database goes away again while the
   first manager is frozen (SIGSTOP: a long pause, the classic split brain) past its
   lease. The standby must survive the outage (one line, no traceback), take the lease
   when the database is back and act; the first manager, thawed, must act on nothing
   (no start, stop, signal or decision after the thaw) and exit 1 saying why.
2. *Engine SIGKILL* (``test_a_crashed_engine_never_runs_a_job_twice``): dockerd of the
   node running a job is SIGKILLed; the job's process runs on under its shim. Its agent
   must stop it through ``/proc`` (the manager ended its attempt) before the job starts
   on the other node; when the engine is back, the epochs the old copy logged meanwhile
   must reach the store: every epoch whose progress line the engine kept, read by the
   agent once the engine is back (the manager keeps the old container, whose attempt it
   ended blind, for it), none twice; missing only those whose lines the job wrote after
   dockerd died (its log copier died with it), at most the epochs in flight until the
   fence's SIGTERM.

3. *Agent SIGKILL* (``test_an_agent_killed_for_a_while_leaves_a_recorded_gap``): the
   time it was down is recorded in ``agent_gaps`` and the report names it.

The agents never self-fence for want of the store here (``fence_after_s = 0``): the
database outages of test 1 would otherwise stop every job (docs/design/manager.md, "Fencing").
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from andreas.infra import procs
from andreas.service.submit import parse_submission
from andreas.service.submit import submit as submit_spec
from andreas.store import open_store
from tests.agents_daemon.mariadb_control import PrivateMariaDB
from tests.e2e.cluster import IMAGE, Cluster, Monitor, running_cluster
from tests.e2e.test_end_to_end import Store, wait_until
from tests.e2e.test_fence_end_to_end import _containers, _docker_time

NODES = [("node-a", "1xV100", 1), ("node-b", "1xV100", 1)]
APP = "example-train"
EPOCH_S = 1.0
GRACE_S = 5
LEASE_S = 3
OUTAGE_S = 20.0
RESUME_S = 5.0                 # the bound: decide again within 5 s of the return
MANAGER_TOML = f"""[manager]
policy = "greedy"
period_s = 600
poll_s = 0.5
restart_overhead_s = 1
fence_after_s = 3
lease_s = {LEASE_S}
"""
AGENT_TOML = "fence_check_s = 1.0\nfence_after_s = 0\n"
PROFILES = [{"application": APP, "gpu_type": "V100", "gpus": 1, "epoch_time_s": EPOCH_S}]
ACTIONS = ("start job=", "stop job=", "SIGTERM", "SIGKILL", "decision ", "adopted",
           "removed container", "preempted", "marked down", "marked up", "completed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, outage_mariadb: PrivateMariaDB) -> Iterator[Cluster]:
    """On a MariaDB of this module's own: test 1 stops it twice."""
    with running_cluster(tmp_path_factory.mktemp("e2e-reliability"), NODES,
                         admin_url=outage_mariadb.admin_url, manager_toml=MANAGER_TOML,
                         app_profiles=PROFILES, agent_toml=AGENT_TOML) as c:
        yield c


def submit(cluster: Cluster, name: str, epochs: int, epoch_s: float = EPOCH_S) -> str:
    return cluster.andreas("submit", IMAGE, "--name", name, "--epochs", str(epochs),
                           "--due", "+2h", "--weight", "0.01", "--app", APP,
                           "--max-gpus", "1", "--grace-s", str(GRACE_S),
                           "--env", f"EXAMPLE_EPOCH_S={epoch_s}", "--quiet").strip()


def log_of(cluster: Cluster, run: int) -> Path:
    return cluster.tmp / f"manager-{run}.log"


def wait_log(cluster: Cluster, run: int, text: str, timeout_s: float = 60.0) -> None:
    path = log_of(cluster, run)
    wait_until(cluster, f"{text!r} in manager-{run}.log",
               lambda: path.exists() and text in path.read_text(), timeout_s)


def test_database_restarts(cluster: Cluster, outage_mariadb: PrivateMariaDB):
    server = outage_mariadb.server()
    db = Store(cluster)
    monitor = Monitor(cluster)
    cluster.monitor = monitor
    monitor.start()
    cluster.start_manager()
    first_run = cluster.manager_runs
    wait_log(cluster, first_run, "manager started")
    long = submit(cluster, "long", 600)
    wait_until(cluster, "the long job running",
               lambda: any(db.running_on(n) == [long] for n in cluster.nodes), 90)

    # --- 1. the manager alone: an outage, then a decision soon after the return ---------
    spec = parse_submission(image=IMAGE, epochs=3, due="+2h", weight="0.01", app=APP,
                            max_gpus=1, grace_s=GRACE_S, env=[f"EXAMPLE_EPOCH_S={EPOCH_S}"],
                            name="short", now_s=time.time())
    server.stop()
    time.sleep(OUTAGE_S)
    server.start()
    back = time.time()
    users = open_store(cluster.manager_env["ANDREAS_DB_URL"])
    try:                 # in-process: the CLI's start-up would add seconds to the figure
        short = submit_spec(users, spec, time.time())
    finally:
        users.dispose()
    wait_until(cluster, "a decision after the database's return",
               lambda: db.rows("SELECT id FROM decisions WHERE t >= :t", t=back), 60)
    first = min(r.at for r in db.rows("SELECT t AS at FROM decisions WHERE t >= :t", t=back))
    assert first - back < RESUME_S, (first - back, cluster.manager_log()[-3000:])
    text = log_of(cluster, first_run).read_text()
    assert text.count("database unreachable") == 1 and "Traceback" not in text, text[-3000:]
    wait_until(cluster, "the short job done", lambda: db.states()[short] == "completed", 90)

    # --- 2. a standby; the database away while the holder is frozen past its lease ------
    holder = cluster.manager
    cluster.cleanup.append(lambda: thaw_and_kill(holder))
    cluster.start_manager()                       # the standby: manager-2.log
    standby = cluster.manager
    second_run = cluster.manager_runs
    wait_log(cluster, second_run, "waiting for the manager lease held by")
    server.stop()
    holder.send_signal(signal.SIGSTOP)
    time.sleep(LEASE_S + 4)
    server.start()
    wait_log(cluster, second_run, "manager started", 60)
    later = submit(cluster, "later", 100)         # the standby, now in charge, starts it
    wait_until(cluster, "the new manager running the later job",
               lambda: db.states()[later] == "running" and any(
                   db.running_on(n) == [later] for n in cluster.nodes), 60)
    old_log = log_of(cluster, first_run)
    mark = len(old_log.read_text())
    holder.send_signal(signal.SIGCONT)
    assert holder.wait(60) == 1
    after = old_log.read_text()[mark:]
    assert "stops acting" in after, after
    acted = [line for line in after.splitlines() if any(a in line for a in ACTIONS)]
    assert acted == [], after
    new_log = log_of(cluster, second_run).read_text()
    assert standby.poll() is None, new_log[-3000:]
    assert new_log.count("standby: the database does not answer") == 1, new_log
    assert "Traceback" not in new_log
    assert db.states()[later] == "running" and db.states()[long] == "running"
    assert monitor.duplicates == [], monitor.duplicates


def thaw_and_kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGCONT)
        p.kill()
        p.wait(10)


class Watch:
    """Polls one process through /proc; ``ended_s``: when it was first seen gone."""

    def __init__(self, process: procs.ProcessRef) -> None:
        self.process = process
        self.ended_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            if not procs.alive(self.process):
                self.ended_s = time.time()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _logged_epochs(cluster: Cluster, node: str, container_id: str) -> list[int]:
    """The epochs whose end line the engine kept in the container's log."""
    from andreas.job import parse_progress

    client = cluster.nodes[node].engine.client()
    try:
        text = client.api.logs(container_id).decode()
    finally:
        client.close()
    events = [parse_progress(line) for line in text.splitlines()]
    return sorted(e.epoch for e in events if e is not None and e.event == "end")


def test_a_crashed_engine_never_runs_a_job_twice(cluster: Cluster):
    db = Store(cluster)
    if cluster.manager is None or cluster.manager.poll() is not None:
        cluster.start_manager()
    for job in ("long", "later"):                 # free both nodes (test 1's jobs)
        if job in db.states():
            cluster.andreas("cancel", job)
    wait_until(cluster, "both nodes free",
               lambda: not any(db.running_on(n) for n in cluster.nodes), 90)
    epochs = 60                     # short epochs: the old copy logs some after the crash
    job = submit(cluster, "survivor", epochs, epoch_s=0.4)
    wait_until(cluster, "the job running with a few epochs",
               lambda: any(db.running_on(n) == [job] for n in cluster.nodes)
               and db.epochs_done(job) >= 3, 90)
    crashed = next(n for n in cluster.nodes if db.running_on(n) == [job])
    other = next(n for n in cluster.nodes if n != crashed)
    (old,) = [c for c in _containers(cluster, crashed, job) if c["State"]["Running"]]
    process = procs.ref(old["State"]["Pid"])
    assert process is not None
    watch = Watch(process)
    engine = cluster.nodes[crashed].engine
    engine.proc.send_signal(signal.SIGKILL)       # dockerd dies; the shim and job run on
    engine.proc.wait(10)
    killed_at = time.time()
    try:
        wait_until(cluster, f"the job restarted on {other}",
                   lambda: db.running_on(other) == [job], 120)
    finally:
        watch.stop()
    (new,) = [c for c in _containers(cluster, other, job) if c["State"]["Running"]]
    started_at = _docker_time(new["State"]["StartedAt"])
    agent_log = (cluster.tmp / f"agent-{crashed}.log").read_text()
    assert watch.ended_s is not None, agent_log[-3000:]
    assert killed_at < watch.ended_s < started_at, (killed_at, watch.ended_s, started_at)
    assert "engine away" in agent_log and "fence: SIGTERM container" in agent_log

    engine.start()                                # the engine back, as systemd would
    wait_until(cluster, "the job completed", lambda: db.states()[job] == "completed", 180)

    def by_attempt() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for r in db.rows("SELECT attempt, epoch FROM epoch_events WHERE job_id = :j", j=job):
            out.setdefault(r.attempt, []).append(r.epoch)
        return out

    # Every epoch the engine kept in the old copy's log reaches the store (the agent reads
    # the rest of it once the engine is back; the manager keeps the container for it).
    # Lines the job wrote after dockerd died are lost with dockerd's log copier: at most
    # the epochs in flight until the fence's SIGTERM.
    logged = _logged_epochs(cluster, crashed, old["Id"])
    wait_until(cluster, "the old copy's logged epochs read", lambda: 1 in by_attempt()
               and max(by_attempt()[1]) >= max(logged), 90)
    # the new copy's last epoch rows may reach the store just after its exit
    wait_until(cluster, "the new copy's epochs stored", lambda: max(
        by_attempt().get(2, [0])) == epochs, 30)
    epochs_of = by_attempt()
    assert sorted(epochs_of[1]) == logged, (epochs_of, logged)
    assert not set(epochs_of[1]) & set(epochs_of[2])           # no epoch ran twice
    missing = set(range(1, epochs + 1)) - set(epochs_of[1]) - set(epochs_of[2])
    in_flight = 1 + int((watch.ended_s - killed_at) / 0.4)
    assert missing == set(range(max(logged) + 1, min(epochs_of[2]))), (missing, epochs_of)
    assert len(missing) <= in_flight, (missing, in_flight)
    kept = db.rows("SELECT exit_code, reason FROM job_attempts WHERE job_id = :j AND "
                   "attempt = 1", j=job)[0]
    assert kept.reason.startswith("node unreachable"), kept
    energy = db.rows("SELECT MAX(t) AS at FROM job_energy WHERE job_id = :j AND "
                     "attempt = 1", j=job)[0].at
    assert watch.ended_s - 1.0 <= energy <= watch.ended_s + 15.0, (energy, watch.ended_s)


def test_an_agent_killed_for_a_while_leaves_a_recorded_gap(cluster: Cluster):
    """SIGKILL a node's agent for 10 s and start it again: the gap is in ``agent_gaps``
    and ``andreas report`` says so. The fake GPUs' counters start afresh with the agent
    (as a driver reload would), so here the gap is recorded as not measured; the charged
    case (a driver that counts on) is tests/agents_daemon/test_agent_gap.py."""
    db = Store(cluster)
    node = "node-a"
    agent = cluster.nodes[node].agent
    assert agent is not None and agent.poll() is None
    time.sleep(3.0)                               # a few samples stored first
    agent.send_signal(signal.SIGKILL)
    agent.wait(10)
    killed_at = time.time()
    time.sleep(10.0)
    cluster.start_agent(node)
    wait_until(cluster, "the gap recorded", lambda: db.rows(
        "SELECT 1 FROM agent_gaps g JOIN nodes n ON n.id = g.node_id WHERE n.name = :n",
        n=node), 60)
    (gap,) = db.rows("SELECT start_s, end_s, charged, reason FROM agent_gaps g JOIN nodes n "
                     "ON n.id = g.node_id WHERE n.name = :n", n=node)
    assert gap.start_s <= killed_at and gap.end_s >= killed_at + 10.0, gap
    assert not gap.charged and "energy counter went down" in gap.reason, gap
    out = cluster.andreas("report", "--since", "-1h", role="reporter")
    assert f"agent of {node} not running" in out and "NOT measured" in out, out
