"""End to end on Slurm: the real test cluster (three slurmd, two fake V100 each), MariaDB,
an agent per Slurm node, the manager with ``[executor] kind = "slurm"``, the example job
run by Slurm as a plain command.

- The acceptance path of issue 29: ``andreas submit --cmd ... --epochs 5``; ``andreas
  manager run --once`` submits ``andreas-<job>-1`` to the planned node (squeue shows it
  there); ``andreas manager run`` runs it to completion; ``andreas show`` says completed,
  5/5 epochs.
- The Docker end-to-end scenarios on Slurm: jobs placed on the planned node with the
  planned number of GPUs (Slurm's allocation, as squeue and the attempts say); every
  epoch recorded once; a more urgent job preempts one (SIGTERM, checkpoint, exit 143,
  restarted from its checkpoint); the manager SIGKILLed and restarted submits no
  duplicate; a node lost (its slurmd and its jobs killed) -> its job finishes elsewhere.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.slurm_site import TRAIN, Site, SlurmMonitor, profiles, running_site
from tests.slurm_cluster import SlurmCluster

EPOCH_S = 1.0            # the example's epochs; the profile says 2 s on one V100, 1 s on two
MANAGER_TOML = """[manager]
policy = "rg"
period_s = 60
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 20
fence_after_s = 2
"""


def _history(checkpoint_dir: Path) -> list[int]:
    from tests.examples.conftest import load_train

    return [h["epoch"] for h in load_train().read_history(checkpoint_dir)]


def epochs_of(site: Site, job: str) -> list[int]:
    """The epochs the agents recorded for the job (every attempt), sorted."""
    return sorted(r.epoch for r in site.rows(
        "SELECT epoch FROM epoch_events WHERE job_id = :j", j=job))


@pytest.fixture(scope="module")
def site(tmp_path_factory, slurm_cluster: SlurmCluster) -> Iterator[Site]:
    for node in slurm_cluster.nodes:
        slurm_cluster.wait_idle(node)
    with running_site(tmp_path_factory.mktemp("slurm-e2e"), slurm_cluster,
                      manager_toml=MANAGER_TOML, app_profiles=profiles(2 * EPOCH_S)) as s:
        yield s


@pytest.fixture(autouse=True)
def clean_site(site: Site) -> Iterator[None]:
    """Each test starts on an idle cluster: whatever one leaves (a failure mid-way leaves
    its manager holding the lease, its jobs and its monitor running) is cleared after it."""
    yield
    site.reset()


def test_acceptance_submit_once_run_show(site: Site):
    job = site.andreas("submit", "--cmd", TRAIN, "--app", "example", "--epochs", "5",
                       "--due", "+2h", "--weight", "0.01", "--env", "EXAMPLE_EPOCH_S=0.5",
                       "--quiet").stdout.strip()
    once = site.andreas("--log-level", "info", "manager", "run", "--once")
    assert once.returncode == 0
    plan = site.plans()[max(site.plans())]
    planned = {a["job"]: a for a in plan["assignments"]}[job]
    queue = site.slurm.squeue("--noheader", "--states=all", "--format=%j|%n|%T")
    rows = [line.split("|") for line in queue.splitlines()
            if line.startswith(f"andreas-{job}-")]
    assert [r[0] for r in rows] == [f"andreas-{job}-1"], queue
    assert rows[0][1] == planned["node"], (rows, planned)
    site.start_manager()
    site.wait("the job completed", lambda: site.states()[job] == "completed", 90)
    assert site.stop_manager() == 0
    shown = site.andreas("show", job).stdout
    assert "completed" in shown and "5/5" in shown, shown
    logs = site.andreas("logs", job).stdout                      # the output file
    assert logs.count("ANDREAS-PROGRESS v1") == 10 and f"job={job} epoch=5 of=5" in logs
    detail = json.loads(site.andreas("show", job, "--json").stdout)
    assert detail["state"] == "completed" and detail["epochs_done"] == 5
    site.wait("the agent's epochs delivered", lambda: epochs_of(site, job) == [1, 2, 3, 4, 5], 20)
    assert _history(site.checkpoint_root / job) == [1, 2, 3, 4, 5]
    a = site.attempts()[-1]
    assert (a.job_id, a.attempt, a.exit_code, a.node) == (job, 1, 0, planned["node"])
    assert len(json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str) else a.gpu_ids) \
        == planned["gpus"]


def _ids(a) -> list[int]:
    return json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str) else list(a.gpu_ids)


def test_preemption_manager_kill_and_node_loss_on_slurm(site: Site):
    # Three jobs due too soon for one GPU: each gets two (every GPU of the cluster busy).
    epochs = {}
    for name in ("jobA", "jobB", "jobC"):
        epochs[site.submit(name, 24, "+20s", 0.001, "--max-gpus", "2", "--grace-s", "3")] = 24
    monitor = site.monitor = SlurmMonitor(site.slurm).start()
    site.start_manager()
    site.wait("three jobs running with an epoch done",
              lambda: sum(site.epochs_done(j) >= 1 for j in epochs) >= 3, 90)

    # An urgent job, weight 1: 4 epochs (4 s on two GPUs) due in 2 s, so it is late from
    # the start. The three running jobs are late too (24 s of work due in 20 s), and the
    # plan rg returns on premise with restarts priced is the greedy's (ARCHITECTURE.md,
    # "Fallback to the greedy plan"), which places late jobs by weight per second of
    # work left: the urgent one first, so a job of the three is preempted. (Due in 25 s
    # it would not be late yet, would come after the three, and wait for them.)
    urgent = site.submit("urgent", 4, "+2s", 1.0, "--max-gpus", "2", "--grace-s", "3")
    epochs[urgent] = 4
    site.wait("the urgent job running", lambda: site.states()[urgent] == "running", 40)
    site.wait("a stop requested", lambda: bool(site.rows(
        "SELECT 1 FROM job_attempts WHERE stop_decision_id IS NOT NULL")), 20)

    # SIGKILL the manager mid-run, then start it again: nothing is submitted twice.
    site.kill_manager()
    time.sleep(1.0)
    site.start_manager()
    log2 = site.tmp / f"manager-{site.manager_runs}.log"
    site.wait("the restarted manager's first decision",
              lambda: "decision " in log2.read_text(), 60)

    # A node lost (its slurmd and its jobs killed) while a job with epochs left runs there.
    def victim() -> tuple[str, str] | None:
        for r in site.rows("SELECT a.job_id, n.name FROM job_attempts a JOIN nodes n ON "
                           "n.id = a.node_id WHERE a.end_s IS NULL AND a.start_s IS NOT NULL"):
            if r.job_id in epochs and site.epochs_done(r.job_id) < epochs[r.job_id] - 3:
                return r.job_id, r.name
        return None
    site.wait("a job with epochs left running", lambda: victim() is not None, 60)
    lost_job, lost_node = victim()

    def lost_attempt() -> int:
        return max(a.attempt for a in site.attempts()
                   if a.job_id == lost_job and a.node == lost_node)
    site.slurm.node("kill", lost_node)
    try:
        site.wait("every job completed",
                  lambda: all(s == "completed" for s in site.states().values()), 240)
    finally:
        site.slurm.node("start", lost_node)
    assert site.stop_manager() == 0
    monitor.stop()
    site.slurm.wait_idle(lost_node)

    site.wait("the agents' epochs delivered", lambda: all(
        len(epochs_of(site, j)) >= n - 1 for j, n in epochs.items()), 20)
    time.sleep(2.0)                   # the agents deliver every second

    # --- every job: exactly its epochs, each once (checkpoint history, agents) --------
    # The agents read an epoch when its end line is written, which the example does after
    # the epoch's checkpoint: a machine lost between the two (SIGKILL) leaves that one
    # epoch checkpointed but never reported; it is the only one that may be missing.
    for job, n in epochs.items():
        assert _history(site.checkpoint_root / job) == list(range(1, n + 1)), job
        rows = site.rows("SELECT epoch, attempt FROM epoch_events WHERE job_id = :j", j=job)
        got = sorted(r.epoch for r in rows)
        assert len(got) == len(set(got)), (job, got)            # no epoch in two attempts
        missing = set(range(1, n + 1)) - set(got)
        if job == lost_job and missing:
            lost = max((r.epoch for r in rows if r.attempt == lost_attempt()), default=0)
            assert missing == {lost + 1}, (job, got, lost)
        else:
            assert not missing, (job, got)

    # --- Slurm's view: never two jobs of one andreas job, never more than 2 GPUs a node
    assert monitor.polls > 50
    assert not monitor.duplicates, monitor.duplicates[:5]
    assert max(monitor.max_gpus.values()) <= 2, monitor.max_gpus
    attempts = site.attempts()
    names = [line.split("|")[0] for line in site.slurm.squeue(
        "--noheader", "--states=all", "--format=%j|%i").splitlines()]
    for a in attempts:           # one Slurm job per attempt: no duplicate sbatch
        assert names.count(f"andreas-{a.job_id}-{a.attempt}") == 1, (a, names)

    # --- placement: the planned node and GPU count, the GPUs Slurm gave --------------
    plans = site.plans()
    for a in attempts:
        planned = {x["job"]: x for x in plans[a.decision_id]["assignments"]}[a.job_id]
        assert a.node == planned["node"], (a, planned)
        if a.start_s is not None:
            assert len(_ids(a)) == planned["gpus"], (a, planned)
    assert any(len(_ids(a)) == 2 for a in attempts)

    # --- a preemption: SIGTERM, checkpoint, exit 143, restarted from its checkpoint --
    stopped = [a for a in attempts if a.stop_decision_id is not None and a.exit_code == 143]
    assert stopped, attempts
    for a in stopped:
        later = [b for b in attempts if b.job_id == a.job_id and b.attempt > a.attempt]
        assert later and later[-1].exit_code == 0, (a, later)

    # --- the lost node: its job ended "node unreachable" there, finished elsewhere --
    mine = [a for a in attempts if a.job_id == lost_job]
    assert any(a.node == lost_node and a.reason == "node unreachable" for a in mine), mine
    assert mine[-1].node != lost_node and mine[-1].exit_code == 0, mine
    assert "marked down" in site.manager_log()


POWER_TOML = """
[power]
enabled = true
idle_s = 4
wake_lead_s = 20
command_timeout_s = 20
nodes = ["{node}"]
"""


def test_power_down_and_wake_through_slurm(site: Site):
    """[power] on Slurm: an idle node is powered down through Slurm's power saving
    (POWER_DOWN_ASAP: its SuspendProgram stops the slurmd), a job that only it can take
    wakes it (POWER_UP: ResumeProgram starts the slurmd), runs there, and the node goes
    down again once idle. The other nodes are drained in Slurm meanwhile, which also
    shows that the manager plans nothing on a node Slurm drains."""
    slurm = site.slurm
    node, others = slurm.nodes[-1], slurm.nodes[:-1]
    config = site.tmp / "andreas.toml"
    before = config.read_text()
    config.write_text(before + POWER_TOML.format(node=node))
    slurm.scontrol("update", f"nodename={','.join(others)}", "state=DRAIN",
                   "reason=andreas e2e")

    def slurm_state() -> str:
        return next((w for w in slurm.scontrol("-o", "show", "node", node).split()
                     if w.startswith("State=")), "")

    def store_state() -> str:
        return site.rows("SELECT state FROM nodes WHERE name = :n", n=node)[0].state

    try:
        site.start_manager()
        site.wait("the idle node off", lambda: store_state() == "off", 60)
        site.wait("Slurm powered it down", lambda: "POWERED_DOWN" in slurm_state(), 60)
        job = site.submit("woken", 5, "+1h", 0.01, "--max-gpus", "2")
        site.wait("the job completed", lambda: site.states()[job] == "completed", 120)
        attempts = [a for a in site.attempts() if a.job_id == job]
        assert [a.node for a in attempts] == [node] and attempts[-1].exit_code == 0
        site.wait("the agent's epochs delivered", lambda: epochs_of(site, job) == [1, 2, 3, 4, 5],
                  20)
        site.wait("the node off again", lambda: store_state() == "off", 60)
        site.wait("Slurm powering it down again",
                  lambda: "POWER" in slurm_state() and "DOWN" in slurm_state(), 30)
        assert site.stop_manager() == 0
        log = site.manager_log()
        assert log.count(f"node {node}: switched off (the engine") >= 2, log[-3000:]
        assert f"node {node}: switched on (the engine" in log
        assert f"node {node}: woke up" in log
        assert "drained in the engine" in log
        for other in others:                 # nothing was planned on a drained node
            assert not [a for a in site.attempts() if a.job_id == job and a.node == other]
    finally:
        config.write_text(before)
        slurm.scontrol("update", f"nodename={','.join(others)}", "state=RESUME")
        site.stop_manager()
        deadline = time.monotonic() + 60
        while "POWERING_DOWN" in slurm_state() and time.monotonic() < deadline:
            time.sleep(0.25)
        slurm.wait_idle(node)                  # powered up again for the next test
