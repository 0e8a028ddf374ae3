"""End to end, GPU sharing: real MariaDB, a real Docker engine, an agent with one fake GPU,
the manager with ``ojpp-heuristic``.

Three example jobs are submitted with ``--gpu-share 0.3``: they run at the same time on
the node's one GPU (a whole-GPU job could not start beside them), never beyond its whole,
each with the CUDA MPS cap of its share, and each completes with exactly its epochs. The
agent splits the GPU's energy between them by their shares.
"""

from __future__ import annotations

import json
import subprocess
import time

import docker
import pytest

from tests.e2e.cluster import IMAGE, ROOT, Cluster, Monitor, start_cluster
from tests.e2e.test_end_to_end import APP, EPOCH_S, PROFILES, Store, _history, wait_until
from tests.store.conftest import mariadb_admin_url


NODES = [("share-node", "1xV100", 1)]
MANAGER_TOML = """[manager]
policy = "ojpp-heuristic"
period_s = 60
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 20
"""
EPOCHS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    admin = mariadb_admin_url().render_as_string(hide_password=False)
    tmp = tmp_path_factory.mktemp("e2e-share")
    volumes = subprocess.run(["bash", "scripts/build-example-image.sh", "--print-volumes"],
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout
    c = start_cluster(tmp, admin, NODES, manager_toml=MANAGER_TOML,
                      extra_volumes=tuple(volumes.split()), app_profiles=PROFILES)
    try:
        yield c
    finally:
        c.close()


def test_shares_run_together_on_one_gpu_and_split_its_energy(cluster: Cluster):
    db = Store(cluster)
    monitor = Monitor(cluster)
    cluster.monitor = monitor
    monitor.start()
    cluster.start_manager()
    jobs = [cluster.andreas("submit", IMAGE, "--name", f"share{i}", "--epochs", str(EPOCHS),
                            "--due", "+10m", "--weight", "0.001", "--app", APP,
                            "--gpu-share", "0.3", "--grace-s", "20",
                            "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}", "--quiet").strip()
            for i in (1, 2, 3)]
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
    wait_until(cluster, "every job completed",
               lambda: all(s == "completed" for s in db.states().values()), 180)
    assert cluster.stop_manager() == 0
    monitor.stop()

    for job in jobs:
        assert _history(cluster.checkpoint_root / job) == list(range(1, EPOCHS + 1)), job
    assert monitor.polls > 20 and not monitor.over, monitor.over[:5]
    assert monitor.max_containers["share-node"] == 3
    assert monitor.max_milli["share-node"] == 900
    attempts = db.rows("SELECT job_id, gpu_ids, gpu_milli, exit_code FROM job_attempts")
    for a in attempts:
        ids = json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str) else a.gpu_ids
        assert ids == [0] and a.gpu_milli == 300 and a.exit_code == 0, a

    # The agent split the one GPU's energy among the three: together they got what the GPU
    # used while they ran (not three times it, as whole-GPU attribution would give).
    time.sleep(3.0)
    gpu_mj = {r.job_id: int(r.e) for r in db.rows(
        "SELECT job_id, SUM(gpu_energy_mj) AS e FROM job_energy GROUP BY job_id")}
    assert set(gpu_mj) == set(jobs) and all(e > 0 for e in gpu_mj.values()), gpu_mj
    span = db.rows("SELECT MIN(start_s) AS a, MAX(end_s) AS b FROM job_attempts")[0]
    (gpu,) = db.rows("SELECT SUM(energy_mj) AS e FROM power_samples WHERE t > :a AND t <= :b",
                     a=span.a, b=span.b + 1.0)
    total = sum(gpu_mj.values())
    assert 0.5 * int(gpu.e) <= total <= 1.05 * int(gpu.e), (gpu_mj, int(gpu.e))
