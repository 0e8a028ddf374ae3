"""End to end: real MariaDB, two real Docker engines, agents with fake GPUs, the manager.

Node ``v100-node`` has 2 fake V100s, ``t4-node`` 1 fake T4, each its own dockerd and
agent. Five example jobs with staggered due dates are submitted, then an urgent one that
forces a preemption. Mid-run the manager is SIGKILLed and started again; then the V100
node's Docker engine is stopped, so its jobs finish on the T4 node from their
checkpoints. Asserted: every job completes with exactly its epochs in its checkpoint
history (each once, none skipped); no node ever ran more GPUs than it has and no job ever
ran in two containers at once (a monitor polls both engines); every attempt and every
stop is explained by a decision's actions; a preemption and a migration happened; the
agents recorded the epochs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.e2e.cluster import IMAGE, ROOT, Cluster, Monitor, running_cluster

NODES = [("v100-node", "2xV100", 2), ("t4-node", "1xT4", 1)]
APP = "example-train"
EPOCH_S = 2.0
# enough work that a job still has epochs left on the V100 node after the manager's
# restart when the machine is loaded: with 10 every job had completed 3 s after a
# 10-s restart on two cores shared with three other processes
JOB_EPOCHS = 16
MANAGER_TOML = """[manager]
policy = "rg"
period_s = 60
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 20
fence_after_s = 10
"""
AGENT_TOML = "fence_check_s = 1.0\nfence_after_s = 8.0\n"   # at most the manager's
# What a profiling run of the example would have stored (the fake GPUs make every
# configuration as fast as the program's own epoch length).
PROFILES = [{"application": APP, "gpu_type": t, "gpus": 1, "epoch_time_s": EPOCH_S}
            for t in ("V100", "T4")]


def _history(checkpoint_dir: Path) -> list[int]:
    """Epochs recorded in the job's newest checkpoint (the example keeps its history)."""
    from tests.examples.conftest import load_train

    return [h["epoch"] for h in load_train().read_history(checkpoint_dir)]


def wait_until(cluster: Cluster, what: str, predicate: Callable[[], bool],
               timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if cluster.manager is not None and cluster.manager.poll() is not None:
            raise AssertionError(f"manager exited ({cluster.manager.returncode}) while "
                                 f"waiting for {what}:\n{cluster.manager_log()[-4000:]}")
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n"
                         f"{cluster.manager_log()[-4000:]}")


class Store:
    """Read-only queries of the test (administrator account)."""

    def __init__(self, cluster: Cluster) -> None:
        self.engine = cluster.engine_db()

    def rows(self, sql: str, **params) -> list[sa.Row]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params))

    def states(self) -> dict[str, str]:
        return {r.id: r.state for r in self.rows("SELECT id, state FROM jobs")}

    def running_on(self, node: str) -> list[str]:
        return [r.job_id for r in self.rows(
            "SELECT a.job_id FROM job_attempts a JOIN nodes n ON n.id = a.node_id "
            "JOIN jobs j ON j.id = a.job_id WHERE n.name = :node AND a.end_s IS NULL "
            "AND a.start_s IS NOT NULL AND j.state = 'running'", node=node)]

    def epochs_done(self, job: str) -> int:
        r = self.rows("SELECT MAX(epoch) AS e FROM epoch_events WHERE job_id = :j", j=job)
        return int(r[0].e or 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e"), NODES,
                         manager_toml=MANAGER_TOML, app_profiles=PROFILES,
                         agent_toml=AGENT_TOML) as c:
        yield c


def submit(cluster: Cluster, name: str, epochs: int, due: str, weight: float) -> str:
    return cluster.andreas("submit", IMAGE, "--name", name, "--epochs", str(epochs),
                           "--due", due, "--weight", str(weight), "--app", APP,
                           "--max-gpus", "1", "--grace-s", "20",
                           "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}", "--quiet").strip()


def test_cluster_runs_preempts_migrates_survives_manager_and_node_loss(cluster: Cluster):
    db = Store(cluster)
    monitor = Monitor(cluster)
    cluster.monitor = monitor
    monitor.start()
    started = time.time()
    cluster.start_manager()
    epochs = {}
    for i, due in enumerate(("+6m", "+7m", "+8m", "+9m", "+10m"), start=1):
        job = submit(cluster, f"job{i}", JOB_EPOCHS, due, 0.001)
        epochs[job] = JOB_EPOCHS
    wait_until(cluster, "three jobs running with an epoch done",
               lambda: sum(db.epochs_done(j) >= 1 for j in epochs) >= 3, 90)

    # An urgent job: due in 20 s, 4 epochs of 2 s; all 3 GPUs are busy until then.
    epochs[submit(cluster, "urgent", 4, "+20s", 1.0)] = 4
    wait_until(cluster, "the urgent job running",
               lambda: db.states()["urgent"] == "running", 30)
    stops = db.rows("SELECT job_id, stop_decision_id FROM job_attempts "
                    "WHERE stop_decision_id IS NOT NULL")
    assert stops, "the urgent job started without preempting anything"

    # SIGKILL the manager mid-run, then start it again.
    time.sleep(1.0)
    cluster.kill_manager()
    time.sleep(1.5)
    cluster.start_manager()
    log2 = cluster.tmp / f"manager-{cluster.manager_runs}.log"
    wait_until(cluster, "the restarted manager's first decision",
               lambda: "decision " in log2.read_text(), 30)

    # Take the V100 node's engine away while jobs run there.
    # Victims: jobs there with epochs left (one finishing its last epoch as the engine
    # stops may still complete there).
    def victims_now() -> set[str]:
        return {j for j in db.running_on("v100-node") if db.epochs_done(j) < epochs[j] - 1}
    wait_until(cluster, "a job with epochs left running on v100-node",
               lambda: bool(victims_now()), 60)
    victims = victims_now()
    cluster.nodes["v100-node"].engine.stop()
    wait_until(cluster, "every job completed",
               lambda: all(s == "completed" for s in db.states().values()), 300)
    assert cluster.stop_manager() == 0
    monitor.stop()

    # --- every job: exactly its epochs, each once ----------------------------------
    for job, n in epochs.items():
        assert _history(cluster.checkpoint_root / job) == list(range(1, n + 1)), job

    # --- capacity and duplicates, as the engines reported them ---------------------
    assert monitor.polls > 50
    assert not monitor.over, monitor.over[:5]
    assert not monitor.duplicates, monitor.duplicates[:5]
    assert monitor.max_gpus["v100-node"] <= 2 and monitor.max_gpus["t4-node"] <= 1

    # --- the store agrees: attempts never overlap beyond capacity ------------------
    attempts = db.rows(
        "SELECT a.job_id, a.attempt, n.name AS node, a.gpu_ids, a.start_s, a.end_s, "
        "a.exit_code, a.reason, a.decision_id, a.stop_decision_id FROM job_attempts a "
        "JOIN nodes n ON n.id = a.node_id ORDER BY a.start_s")
    for node, _, gpus in NODES:
        events = []
        for a in attempts:
            if a.node == node and a.start_s is not None:
                k = len(json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str) else a.gpu_ids)
                events += [(a.start_s, k), (a.end_s, -k)]
        busy = 0
        for _, k in sorted(events, key=lambda e: (e[0], e[1])):
            busy += k
            assert busy <= gpus, (node, attempts)

    # --- decisions explain every start and every stop ------------------------------
    plans = {r.id: (json.loads(r.plan) if isinstance(r.plan, str) else r.plan)
             for r in db.rows("SELECT id, plan FROM decisions")}
    for a in attempts:
        actions = {x["job"]: x for x in plans[a.decision_id]["actions"]}
        act = actions.get(a.job_id)
        assert act is not None and act["reason"], (a, plans[a.decision_id]["actions"])
        assert act["kind"] in ("start", "move", "resize", "continue"), act
        if a.stop_decision_id is not None:
            stop = {x["job"]: x for x in plans[a.stop_decision_id]["actions"]}[a.job_id]
            assert stop["kind"] in ("preempt", "move", "resize") and stop["reason"], stop

    # --- a preemption (requested stop) and migrations happened ---------------------
    requested = [a for a in attempts if a.stop_decision_id is not None]
    assert any(a.exit_code == 143 for a in requested), requested
    nodes_of = {}
    for a in attempts:
        nodes_of.setdefault(a.job_id, set()).add(a.node)
    for job in victims:
        assert nodes_of[job] == {"v100-node", "t4-node"}, (job, nodes_of[job])
        last = [a for a in attempts if a.job_id == job][-1]
        assert last.node == "t4-node" and last.exit_code == 0

    # --- reports (reporter account): the run's cost, predicted vs actual -------------
    time.sleep(3.0)                  # the agents deliver every second; windows close at exit
    # Whole minutes around the run, so the minute aggregates count in full.
    since = str(int(started // 60 * 60 - 60))
    until = str(int(time.time() // 60 * 60 + 120))
    report = json.loads(cluster.andreas("report", "--since", since, "--until", until,
                                        "--format", "json", role="reporter"))
    validate = json.loads(cluster.andreas("report", "--since", since, "--until", until,
                                          "--validate", "--format", "json", role="reporter"))
    out = ROOT / "out" / "e2e"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    (out / "validate.json").write_text(json.dumps(validate, indent=1))
    (out / "attempts.json").write_text(json.dumps(
        [dict(a._mapping) for a in attempts], indent=1, default=str))
    (out / "manager.log").write_text(cluster.manager_log())
    totals = report["totals"]
    # Energy attribution: every job has energy; jobs' energy never exceeds the nodes'.
    per_job = {r["job"]: r for r in report["rows"]}
    assert set(epochs) <= set(per_job) and all(per_job[j]["energy_kwh"] > 0 for j in epochs)
    assert 0 < totals["jobs_energy_kwh"] <= totals["energy_kwh"] * 1.001, totals
    # Predicted vs measured energy cost per rescheduling slot (ANDREAS Table III). The
    # issue's target is 5 % overall; this compressed run (a slot every few seconds, each
    # start costing a second of idle GPUs the plan counted as busy) is asserted more
    # loosely, and the figure is in out/e2e/validate.json.
    summary = validate["summary"]
    assert summary["compared"] >= 5 and abs(summary["deviation_pct"]) < 15.0, summary

    # --- the agents saw every epoch of every job -----------------------------------
    for job, n in epochs.items():
        got = sorted({r.epoch for r in db.rows(
            "SELECT epoch FROM epoch_events WHERE job_id = :j", j=job)})
        assert got == list(range(1, n + 1)), (job, got)
