"""End to end, automatic profiling: real MariaDB, two real Docker engines, one of them a
profiling node (``[profiler] nodes``), the manager with ``rg``.

A job of an application nobody profiled (no epochs, no profile rows, no ``profiles/``
entry) is submitted. It runs on the profiling node, state ``profiling``, once per GPU
count (checkpointed between counts), the fit is stored, and it is then planned on the
worker node from its checkpoint: every epoch runs exactly once, its epoch history is one.
The first decision after profiling predicts the job's energy cost on the worker within
15 % of what the agent measured for that run (fake NVML); the guess it would have had
without profiling is printed beside it (out/e2e/profiling.json).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import IMAGE, ROOT, Cluster, running_cluster
from tests.e2e.test_end_to_end import EPOCH_S, Store, _history, wait_until

NODES = [("prof-node", "2xV100", 2), ("work-node", "1xV100", 1)]
NEW_APP = "never-profiled"
EPOCHS = 30
PROFILE_EPOCHS = 3
MANAGER_TOML = f"""[manager]
policy = "rg"
period_s = 60
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 20

[profiler]
nodes = ["prof-node"]
epochs = {PROFILE_EPOCHS}
timeout_s = 120
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-profiling"), NODES,
                         manager_toml=MANAGER_TOML, app_profiles=[]) as c:
        yield c


def test_a_new_application_is_profiled_then_planned_from_its_checkpoint(cluster: Cluster):
    db = Store(cluster)
    cluster.start_manager()
    job = cluster.andreas("submit", IMAGE, "--name", "newapp1", "--epochs", str(EPOCHS),
                          "--due", "+1h", "--weight", "0.00001", "--app", NEW_APP,
                          "--grace-s", "20", "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}",
                          "--quiet").strip()
    wait_until(cluster, "the job profiling on prof-node",
               lambda: db.states()[job] == "profiling", 60)
    queue = json.loads(cluster.andreas("queue", "--json"))
    assert [(r["state"], r["node"]) for r in queue if r["id"] == job] == [
        ("profiling", "prof-node")]
    wait_until(cluster, "the job running on work-node",
               lambda: job in db.running_on("work-node"), 180)
    wait_until(cluster, "the job completed", lambda: db.states()[job] == "completed", 240)
    assert cluster.stop_manager() == 0
    time.sleep(3.0)                       # the agents deliver every second

    # --- profiled once per GPU count, on the profiling node, then production ---------
    attempts = db.rows(
        "SELECT a.attempt, n.name AS node, a.gpu_ids, a.profiling, a.exit_code, a.start_s, "
        "a.end_s, a.decision_id FROM job_attempts a JOIN nodes n ON n.id = a.node_id "
        "WHERE a.job_id = :j ORDER BY a.attempt", j=job)
    runs = [(a.node, len(json.loads(a.gpu_ids) if isinstance(a.gpu_ids, str)
                         else a.gpu_ids), bool(a.profiling)) for a in attempts]
    assert runs[:2] == [("prof-node", 1, True), ("prof-node", 2, True)], runs
    assert all(node == "work-node" and not prof for node, _, prof in runs[2:]), runs
    assert [a.exit_code for a in attempts[:2]] == [143, 143]
    assert attempts[-1].exit_code == 0
    rows = {(r.gpus, r.source) for r in db.rows(
        "SELECT gpus, source FROM app_profiles WHERE application = :a", a=NEW_APP)}
    # the profiler's rows for g = 1 and 2; the production epochs on work-node (g = 1)
    # may since have replaced the first by a measured one
    assert {g for g, _ in rows} >= {1, 2} and (2, "profiler") in rows, rows
    assert {src for _, src in rows} <= {"profiler", "measured"}, rows
    assert db.rows("SELECT 1 FROM app_models WHERE application = :a", a=NEW_APP)

    # --- no epoch lost or repeated across the hand-over -----------------------------
    assert _history(cluster.checkpoint_root / job) == list(range(1, EPOCHS + 1))
    got = sorted(r.epoch for r in db.rows(
        "SELECT epoch FROM epoch_events WHERE job_id = :j", j=job))
    assert got == list(range(1, EPOCHS + 1)), got

    # --- the first decision after profiling predicts the worker run's energy cost ----
    first = attempts[2]
    plan = db.rows("SELECT plan FROM decisions WHERE id = :d", d=first.decision_id)[0].plan
    plan = json.loads(plan) if isinstance(plan, str) else plan
    [entry] = [a for a in plan["assignments"] if a["job"] == job]
    assert entry["estimate_source"] in ("profiler", "measured") or \
        entry["estimate_source"].startswith("model"), entry
    energy = plan["energy"]
    per_kwh = energy["pue"] * energy["price_per_kwh"]
    worker = [a.attempt for a in attempts[2:]]
    measured_mj = sum(int(r.e or 0) for n in worker for r in db.rows(
        "SELECT SUM(COALESCE(gpu_energy_mj, 0) + COALESCE(host_energy_mj, 0)) AS e "
        "FROM job_energy WHERE job_id = :j AND attempt = :a", j=job, a=n))
    measured = measured_mj / 3.6e9 * per_kwh
    predicted = entry["predicted_cost"]
    node = plan["nodes"]["work-node"]
    left = EPOCHS - 2 * PROFILE_EPOCHS
    guess = left * 3600.0 / 3600.0 * node["cost_per_hour"]       # unprofiled_epoch_s
    figures = {"predicted_after_profiling": predicted, "measured": measured,
               "error_after": predicted / measured - 1, "guess_before": guess,
               "error_before": guess / measured - 1, "epoch_time_s": entry["epoch_time_s"],
               "estimate_source": entry["estimate_source"]}
    out = ROOT / "out" / "e2e"
    out.mkdir(parents=True, exist_ok=True)
    (out / "profiling.json").write_text(json.dumps(figures, indent=1))
    print("profiling prediction:", figures)
    assert measured > 0
    assert abs(predicted / measured - 1) < 0.15, figures
