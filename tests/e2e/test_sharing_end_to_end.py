"""End to end, GPU sharing: real MariaDB, a real Docker engine, an agent with two fake
GPUs, the manager with ``ojpap`` (ojpp-heuristic plus the online adjustment).

1. Three example jobs submitted with ``--gpu-share 0.3`` run at the same time, at least
   two of them on one GPU, never beyond its whole, each with the CUDA MPS cap of its
   share, and each completes with exactly its epochs; together they are attributed what
   their GPUs used.
2. Two jobs with ``--gpu-share 0.5`` that slow each other down on their shared fake GPU
   (the example job's co-location slowdown, ``EXAMPLE_CONTENTION``): each measures its
   slowdown from its epochs, the EWMA crosses the bound and the adjustment moves one to
   the other GPU, from its checkpoint: every epoch runs exactly once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import docker
import pytest

from tests.e2e.cluster import IMAGE, Cluster, Monitor, running_cluster
from tests.e2e.test_end_to_end import APP, EPOCH_S, PROFILES, Store, _history, wait_until

NODES = [("share-node", "2xV100", 2)]
MANAGER_TOML = """[manager]
policy = "ojpap"
period_s = 4
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 20
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("e2e-share")
    fake = tmp / "fake-gpu"
    fake.mkdir()
    fake.chmod(0o1777)
    with running_cluster(tmp, NODES, manager_toml=MANAGER_TOML, app_profiles=PROFILES,
                         executor_toml=f'fake_gpu_dir = "{fake}"\n') as c:
        c.start_manager()
        yield c


def submit(cluster: Cluster, name: str, epochs: int, share: str, *env: str) -> str:
    extra = [x for e in env for x in ("--env", e)]
    return cluster.andreas("submit", IMAGE, "--name", name, "--epochs", str(epochs),
                           "--due", "+10m", "--weight", "0.001", "--app", APP,
                           "--gpu-share", share, "--grace-s", "20",
                           "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}", *extra, "--quiet").strip()


def _ids(a) -> list[int]:
    return json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str) else list(a.gpu_ids)


def test_shares_run_together_on_one_gpu_and_split_its_energy(cluster: Cluster):
    db = Store(cluster)
    monitor = Monitor(cluster)
    monitor.start()
    epochs = 15                     # 30 s: submissions take seconds each on a busy machine
    jobs = [submit(cluster, f"share{i}", epochs, "0.3") for i in (1, 2, 3)]
    wait_until(cluster, "the three shares running together",
               lambda: len(db.running_on("share-node")) == 3, 90)
    api = docker.APIClient(base_url=cluster.nodes["share-node"].engine.url, version="auto")
    try:
        for c in api.containers(filters={"label": "andreas.job"}):
            env = dict(e.split("=", 1) for e in api.inspect_container(c["Id"])["Config"]["Env"])
            assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30", env
            assert env["ANDREAS_GPU_SHARE"] == "0.3"
            assert c["Labels"]["andreas.gpu_milli"] == "300"
    finally:
        api.close()
    wait_until(cluster, "the three completed",
               lambda: all(db.states()[j] == "completed" for j in jobs), 180)
    monitor.stop()

    for job in jobs:
        assert _history(cluster.checkpoint_root / job) == list(range(1, epochs + 1)), job
    assert monitor.polls > 20 and not monitor.over, monitor.over[:5]
    assert monitor.max_containers["share-node"] == 3
    assert monitor.max_milli["share-node"] == 900
    attempts = db.rows("SELECT job_id, gpu_ids, gpu_milli, exit_code FROM job_attempts "
                       "WHERE job_id IN ('share1', 'share2', 'share3')")
    held = [_ids(a)[0] for a in attempts]
    assert len(attempts) == 3, attempts                        # no restarts
    assert max(held.count(g) for g in held) >= 2, attempts     # at least two on one GPU
    for a in attempts:
        assert a.gpu_milli == 300 and a.exit_code == 0 and len(_ids(a)) == 1, a

    # The agent split a shared GPU's energy among its jobs: together they got what their
    # GPUs used while they ran (not that times the sharers, as whole-GPU attribution gives).
    time.sleep(3.0)
    gpu_mj = {r.job_id: int(r.e) for r in db.rows(
        "SELECT job_id, SUM(gpu_energy_mj) AS e FROM job_energy GROUP BY job_id")}
    assert set(jobs) <= set(gpu_mj) and all(gpu_mj[j] > 0 for j in jobs), gpu_mj
    span = db.rows("SELECT MIN(start_s) AS a, MAX(end_s) AS b FROM job_attempts")[0]
    (gpu,) = db.rows(
        "SELECT SUM(p.energy_mj) AS e FROM power_samples p JOIN gpus g ON g.id = p.gpu_id "
        f"WHERE g.gpu_index IN ({', '.join(str(g) for g in set(held))}) "
        "AND p.t > :a AND p.t <= :b", a=span.a, b=span.b + 1.0)
    total = sum(gpu_mj[j] for j in jobs)
    assert 0.5 * int(gpu.e) <= total <= 1.05 * int(gpu.e), (gpu_mj, int(gpu.e))


def test_interference_moves_a_share_to_another_gpu_from_its_checkpoint(cluster: Cluster):
    db = Store(cluster)
    epochs = 8
    jobs = [submit(cluster, f"noisy{i}", epochs, "0.5", "EXAMPLE_CONTENTION=1.0")
            for i in (1, 2)]
    wait_until(cluster, "both noisy jobs completed",
               lambda: all(db.states()[j] == "completed" for j in jobs), 240)
    attempts = db.rows("SELECT job_id, attempt, gpu_ids, stop_decision_id, exit_code "
                       "FROM job_attempts WHERE job_id IN ('noisy1', 'noisy2') "
                       "ORDER BY job_id, attempt")
    first = {a.job_id: a for a in attempts if a.attempt == 1}
    assert _ids(first["noisy1"]) == _ids(first["noisy2"]), attempts   # packed together
    moved = [a.job_id for a in attempts if a.attempt == 2]
    assert len(moved) == 1, attempts                                   # one moved, once
    (job,) = moved
    old, new = [a for a in attempts if a.job_id == job]
    assert old.stop_decision_id is not None and old.exit_code == 143
    assert _ids(new) != _ids(old) and new.exit_code == 0
    plan = db.rows("SELECT plan FROM decisions WHERE id = :d", d=old.stop_decision_id)[0].plan
    plan = json.loads(plan) if isinstance(plan, str) else plan
    (action,) = [x for x in plan["actions"] if x["job"] == job]
    assert action["kind"] == "move" and "interference" in action["reason"], action
    assert plan["stats"]["moves"] >= 1 and plan["stats"]["max_ewma_theta"] > 0.1
    for j in jobs:                       # from its checkpoint: each epoch exactly once
        assert _history(cluster.checkpoint_root / j) == list(range(1, epochs + 1)), j
