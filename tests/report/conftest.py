"""The report's test world: two nodes sampled every 10 s for 4 hours, four jobs with
attempts and job-energy windows, and four decisions, on SQLite and MariaDB (the store
suite's ``backend`` / ``store`` fixtures: the MariaDB half fails without a server).

Everything is chosen so the figures can be computed by hand (see ``Expected``):

- window [T0, T0 + 4 h), T0 = 2027-01-15 22:00Z, so it spans two UTC days (2 h each);
- node A (2 GPUs): GPU 0 draws 200 W for 2 h, then 100 W; GPU 1 idles at 50 W; host
  100 W -> 350 W then 250 W: 1.2 kWh. Node B (1 GPU): 80 W + host 60 W all along: 0.56 kWh;
- job ``j1`` on A GPU 0 for the first 2 h (200 W + the host's 100 W: 0.6 kWh), due after
  1 h, weight 0.001/s: 3600 s late = 3.6; predicted 4.0 at submission (submitted at T0);
- job ``j2`` on A GPU 0 for the last 2 h, still running at now = T0 + 4 h (0.4 kWh);
- job ``j3`` on B from 1 h to 3 h (140 W: 0.28 kWh), 1800 s late at weight 0.002 = 3.6;
- job ``j4`` cancelled before it ran; ``j5`` queued, due 15 min before now, weight 0.01:
  900 s late = 9.0 so far;
- decisions at 0, 1, 2, 3 h whose plans predict A at 400 W (1 busy GPU) and B at 140 W
  idle / 160 W busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner, Result

from andreas.cli import main
from andreas.store.models import Decision, JobAttempt, JobState
from andreas.store.samples import (HostRow, JobEnergyRow, PowerRow, insert_host_samples,
                                   insert_job_energy, insert_power_samples)
from tests.store.conftest import backend, db_url, store  # noqa: F401
from tests.store.helpers import add_job, add_node

T0 = 1_799_971_200.0 + 22 * 3600      # 2027-01-15 22:00Z
HOUR = 3600.0
NOW = T0 + 4 * HOUR
PUE, PRICE = 1.33, 0.172               # the [manager] defaults
KWH_COST = PUE * PRICE


@dataclass(frozen=True)
class World:
    a: str
    b: str
    a_id: int
    b_id: int
    jobs: dict[str, str]               # j1..j5 -> job id


def _plan(a: str, b: str, a_busy: int, b_busy: int) -> dict[str, Any]:
    curve_a, curve_b = [150.0, 400.0, 600.0], [140.0, 160.0]

    def node(curve: list[float], g: int) -> dict[str, Any]:
        return {"busy_gpus": g, "power_w": curve, "power_source": "test", "samples": 0,
                "cost_per_hour": curve[g] / 1000 * KWH_COST}
    return {"format": "andreas-decision/1", "assignments": [], "postponed": [],
            "nodes": {a: node(curve_a, a_busy), b: node(curve_b, b_busy)},
            "energy": {"pue": PUE, "price_per_kwh": PRICE}}


def seed(store) -> World:
    a, a_id, a_gpus = add_node(store, gpus=2, gpu_type="V100")
    b, b_id, b_gpus = add_node(store, gpus=1, gpu_type="T4")
    jobs = {
        "j1": add_job(store, submit_s=T0, due_s=T0 + HOUR, weight=0.001,
                      state=JobState.COMPLETED, state_changed_s=T0 + 2 * HOUR,
                      predicted_cost=4.0),
        "j2": add_job(store, submit_s=T0 + 1.5 * HOUR, due_s=T0 + 10 * HOUR,
                      state=JobState.RUNNING, predicted_cost=1.0),
        "j3": add_job(store, submit_s=T0 + 0.5 * HOUR, due_s=T0 + 2.5 * HOUR, weight=0.002,
                      state=JobState.COMPLETED, state_changed_s=T0 + 3 * HOUR),
        "j4": add_job(store, submit_s=T0 + 3 * HOUR, due_s=T0 + 3.1 * HOUR,
                      state=JobState.CANCELLED, state_changed_s=T0 + 3.2 * HOUR),
        "j5": add_job(store, submit_s=T0 + 3.5 * HOUR, due_s=T0 + 3.75 * HOUR, weight=0.01),
    }
    power, host = [], []
    for k in range(1440):                  # every 10 s; a sample's energy covers 10 s
        t = T0 + 10 * k
        early = t < T0 + 2 * HOUR
        b_busy = 1 if T0 + HOUR <= t < T0 + 3 * HOUR else 0
        for gpu, node, watts, busy in ((a_gpus[0], a_id, 200 if early else 100, 1),
                                       (a_gpus[1], a_id, 50, 1), (b_gpus[0], b_id, 80, b_busy)):
            power.append(PowerRow(gpu, t, node, busy, float(watts), watts * 10_000,
                                  energy_source="counter", power_source="average"))
        host.append(HostRow(a_id, t, 1, 10.0, 1000, 100.0, 1_000_000, "rapl", "rapl"))
        host.append(HostRow(b_id, t, b_busy, 5.0, 500, 60.0, 600_000, "rapl", "rapl"))
    energy = []
    for k in range(1, 121):                # 60-s attribution windows
        energy.append(JobEnergyRow(jobs["j1"], 1, T0 + 60 * k, a_id, 60.0, 1,
                                   12_000_000, 6_000_000))
        energy.append(JobEnergyRow(jobs["j2"], 1, T0 + 2 * HOUR + 60 * k, a_id, 60.0, 1,
                                   6_000_000, 6_000_000))
        energy.append(JobEnergyRow(jobs["j3"], 1, T0 + HOUR + 60 * k, b_id, 60.0, 1,
                                   4_800_000, 3_600_000))
    with store.session() as s:
        insert_power_samples(s, power)
        insert_host_samples(s, host)
        insert_job_energy(s, energy)
        for key, node, start, end in (("j1", a_id, T0, T0 + 2 * HOUR),
                                      ("j2", a_id, T0 + 2 * HOUR, None),
                                      ("j3", b_id, T0 + HOUR, T0 + 3 * HOUR)):
            s.add(JobAttempt(job_id=jobs[key], attempt=1, node_id=node, gpu_ids=[0],
                             start_s=start, end_s=end, exit_code=None if end is None else 0))
        for i, (a_busy, b_busy) in enumerate(((1, 0), (1, 1), (1, 1), (1, 0))):
            s.add(Decision(t=T0 + i * HOUR, trigger="period", policy="rg", objective=0.0,
                           objective_name="f_obj", seconds=0.1, plan=_plan(a, b, a_busy, b_busy)))
    return World(a=a, b=b, a_id=a_id, b_id=b_id, jobs=jobs)


@pytest.fixture(scope="module")
def world(store):
    return seed(store)


def run_cli(db_url: str, *args: str, now: float = NOW,
            env: dict[str, str] | None = None) -> Result:
    environ = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": "", "ANDREAS_POLICY": "",
               "ANDREAS_PERIOD_S": ""}
    environ.update(env or {})
    return CliRunner().invoke(main, list(args), obj={"clock": lambda: now}, env=environ,
                              catch_exceptions=False)
