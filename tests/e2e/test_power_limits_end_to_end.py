"""End to end, GPU power limits (issue 30): real MariaDB, a real Docker engine, an agent
with two fake V100s, ``andreas-powerd`` (the privileged helper, here on the same fake
GPUs through their limit files) and the manager with ``rg``.

A job of an application whose profile has power levels (ResNet-50 of the Zeus workloads)
and a far due date is planned below the default limit: the decision names the limit,
the attempt carries it, the agent has the daemon set it while the job runs (samples
record it, the fake GPU draws at most it, the example job's epochs run at it), and when
the job ends the GPU is back at its default 250 W. The node's agent reported what its
GPUs accept (``nodes.power_caps``).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import BIN, IMAGE, ROOT, Cluster, running_cluster
from tests.e2e.test_end_to_end import EPOCH_S, Store, wait_until

APP = "resnet50-imagenet"
NODE = "cap-node"
NODES = [(NODE, "2xV100", 2)]
MANAGER_TOML = """[manager]
policy = "rg"
period_s = 60
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 1000000
"""
PROFILES = [{"application": APP, "gpu_type": "V100", "gpus": g, "epoch_time_s": EPOCH_S}
            for g in (1, 2)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("e2e-caps")
    fake = tmp / "fake-gpu"
    fake.mkdir()
    fake.chmod(0o1777)
    sock = tmp / "powerd.sock"
    log = (tmp / "powerd.log").open("w")
    powerd = subprocess.Popen(
        [str(BIN / "andreas-powerd"), "--fake-gpus", "2xV100", "--node", NODE,
         "--fake-gpu-dir", str(fake), "--socket", str(sock), "--group", "",
         "--state", str(tmp / "leases.json"), "--lease-s", "30"],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert powerd.poll() is None and time.monotonic() < deadline, \
                (tmp / "powerd.log").read_text()
            time.sleep(0.1)
        agent = f'powerd_socket = "{sock}"\nfake_gpu_dir = "{fake}"\n'
        with running_cluster(tmp, NODES, manager_toml=MANAGER_TOML, app_profiles=PROFILES,
                             executor_toml=f'fake_gpu_dir = "{fake}"\n',
                             agent_toml=agent) as c:
            c.start_manager()
            c.powerd_log = tmp / "powerd.log"      # type: ignore[attr-defined]
            c.fake_dir = fake                      # type: ignore[attr-defined]
            yield c
    finally:
        powerd.terminate()
        powerd.wait(timeout=30)


def test_a_job_runs_at_its_planned_limit_and_the_default_comes_back(cluster: Cluster):
    db = Store(cluster)
    wait_until(cluster, "the agent's power caps", lambda: db.rows(
        "SELECT power_caps FROM nodes WHERE name = :n", n=NODE)[0].power_caps is not None, 60)
    caps = db.rows("SELECT power_caps FROM nodes WHERE name = :n", n=NODE)[0].power_caps
    caps = json.loads(caps) if isinstance(caps, str) else caps
    assert caps == {"settable": True, "min_w": 100.0, "max_w": 250.0, "default_w": 250.0}

    epochs = 6
    job = cluster.andreas("submit", IMAGE, "--name", "capped", "--epochs", str(epochs),
                          "--due", "+2h", "--weight", "0.001", "--app", APP,
                          "--grace-s", "20", "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}",
                          "--env", "EXAMPLE_POWER_FACTORS=225:1.02,200:1.053,175:1.096,"
                          "150:1.18", "--quiet").strip()
    wait_until(cluster, "the job completed", lambda: db.states()[job] == "completed", 180)

    (a,) = db.rows("SELECT id, decision_id, power_limit_w, start_s, end_s, gpu_ids "
                   "FROM job_attempts WHERE job_id = :j", j=job)
    plan = db.rows("SELECT plan FROM decisions WHERE id = :d", d=a.decision_id)[0].plan
    plan = json.loads(plan) if isinstance(plan, str) else plan
    (entry,) = [x for x in plan["assignments"] if x["job"] == job]
    limit = entry["power_limit_w"]
    assert 150.0 <= limit < 250.0 and a.power_limit_w == limit, (entry, a)

    # while it ran, the samples of its GPUs carry the limit and draw at most it
    gpus = json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str) else list(a.gpu_ids)
    rows = db.rows("SELECT p.t AS ts, p.power_w, p.power_limit_w FROM power_samples p "
                   "JOIN gpus g ON g.id = p.gpu_id JOIN nodes n ON n.id = g.node_id "
                   f"WHERE n.name = :n AND g.gpu_index IN ({', '.join(map(str, gpus))}) "
                   "ORDER BY p.t", n=NODE)
    during = [r for r in rows if a.start_s + 6.0 < r.ts <= a.end_s]
    assert during and all(r.power_limit_w == limit for r in during), during[:5]
    assert max(r.power_w for r in during) <= limit + 1.0
    # the job's own epochs ran at that limit (the example records it in its history)
    from tests.examples.conftest import load_train
    history = load_train().read_history(cluster.checkpoint_root / job)
    assert [h["epoch"] for h in history] == list(range(1, epochs + 1))
    assert any(h.get("power_limit_w") == limit for h in history), history

    # after it ended: back to the default, in the samples and on the GPU
    wait_until(cluster, "the default limit in the samples", lambda: any(
        r.power_limit_w == 250.0 for r in db.rows(
            "SELECT p.power_limit_w FROM power_samples p JOIN gpus g ON g.id = p.gpu_id "
            f"WHERE g.gpu_index IN ({', '.join(map(str, gpus))}) AND p.t > :t",
            t=a.end_s + 1.0)), 60)
    fake_dir = cluster.fake_dir                    # type: ignore[attr-defined]
    for f in fake_dir.glob("power-limit-*"):
        assert f.read_text().strip() == "250000", f
    log = cluster.powerd_log.read_text()           # type: ignore[attr-defined]
    assert "listening on" in log, log
