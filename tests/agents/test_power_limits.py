"""GPU power limits on a node: the fake NVML's limits, the privileged daemon, the agent's
controller (issue 30)."""

from __future__ import annotations

import logging
import threading
import time

import pynvml
import pytest

from agents.nvml_fake import make_fake_nvml
from agents.powerd import PowerDaemon, serve
from agents.powerlimits import LimitController, PowerdClient


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def fake(spec: str = "2xV100", **kw):
    nv = make_fake_nvml(spec, node="n1", **kw)
    nv.nvmlInit()
    return nv


def test_fake_v100_accepts_100_to_250_w_and_refuses_others_with_nvmls_error():
    nv = fake()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetPowerManagementLimitConstraints(h) == [100000, 250000]
    assert nv.nvmlDeviceGetPowerManagementDefaultLimit(h) == 250000
    nv.nvmlDeviceSetPowerManagementLimit(h, 175000)
    assert nv.nvmlDeviceGetPowerManagementLimit(h) == 175000
    for bad in (99000, 251000):
        with pytest.raises(pynvml.NVMLError) as err:
            nv.nvmlDeviceSetPowerManagementLimit(h, bad)
        assert err.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT
    nv.deny_limits()
    with pytest.raises(pynvml.NVMLError) as err:
        nv.nvmlDeviceSetPowerManagementLimit(h, 200000)
    assert err.value.value == pynvml.NVML_ERROR_NO_PERMISSION
    t4 = fake("1xT4")
    with pytest.raises(pynvml.NVMLError) as err:
        t4.nvmlDeviceGetPowerManagementLimitConstraints(t4.nvmlDeviceGetHandleByIndex(0))
    assert err.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_fake_caps_a_busy_gpu_at_its_limit_and_integrates_exactly():
    clock = Clock()
    nv = fake(clock=clock)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    uuid = nv.uuid_at_index(0)
    nv.set_busy(uuid, 100.0, (42,))
    clock.t += 10
    assert nv.power_w(uuid) == 250.0
    nv.nvmlDeviceSetPowerManagementLimit(h, 150000)
    clock.t += 10
    assert nv.power_w(uuid) == 150.0
    assert nv.energy_j(uuid, 1000.0, 1020.0) == pytest.approx(10 * 250 + 10 * 150)


def test_limit_dir_shares_limits_between_processes(tmp_path):
    a, b = fake(limit_dir=str(tmp_path)), fake(limit_dir=str(tmp_path))
    ha, hb = a.nvmlDeviceGetHandleByIndex(1), b.nvmlDeviceGetHandleByIndex(1)
    a.nvmlDeviceSetPowerManagementLimit(ha, 125000)
    assert b.nvmlDeviceGetPowerManagementLimit(hb) == 125000
    assert b.nvmlDeviceGetPowerManagementLimit(b.nvmlDeviceGetHandleByIndex(0)) == 250000


def test_daemon_sets_within_range_refuses_outside_and_resets():
    d = PowerDaemon(fake())
    u = next(iter(d.handles))
    caps = d.handle({"op": "caps"})["gpus"][u]
    assert caps == {"min_w": 100.0, "max_w": 250.0, "default_w": 250.0, "limit_w": 250.0}
    assert d.handle({"op": "set", "gpu": u, "watts": 175, "holder": "j/1"}) == \
        {"ok": True, "limit_w": 175.0}
    bad = d.handle({"op": "set", "gpu": u, "watts": 300})
    assert not bad["ok"] and "300 W is outside the GPU's range [100, 250] W" in bad["error"]
    assert not d.handle({"op": "set", "gpu": "GPU-nope", "watts": 200})["ok"]
    assert not d.handle({"op": "format-disk"})["ok"]
    assert d.handle({"op": "reset", "gpu": u})["limit_w"] == 250.0


def test_lease_expiry_and_restart_reset_unheld_limits(tmp_path):
    wall = Clock()
    state = str(tmp_path / "leases.json")
    nv = fake(limit_dir=str(tmp_path))
    d = PowerDaemon(nv, state_path=state, lease_s=60.0, wall=wall)
    u0, u1 = list(d.handles)
    d.handle({"op": "set", "gpu": u0, "watts": 150, "holder": "j/1"})
    d.handle({"op": "set", "gpu": u1, "watts": 200, "holder": "k/1"})
    wall.t += 30
    d.handle({"op": "set", "gpu": u1, "watts": 200, "holder": "k/1"})   # k's agent renews
    wall.t += 40                                  # j's lease (t+60) ended, k's (t+90) not
    assert d.expire() == [u0]
    limits = d.handle({"op": "caps"})["gpus"]
    assert (limits[u0]["limit_w"], limits[u1]["limit_w"]) == (250.0, 200.0)
    # a crash: a limit set with no lease on file, and k's lease still live at restart
    nv.nvmlDeviceSetPowerManagementLimit(nv.nvmlDeviceGetHandleByIndex(0), 120000)
    again = PowerDaemon(fake(limit_dir=str(tmp_path)), state_path=state, lease_s=60.0,
                        wall=wall)
    limits = again.handle({"op": "caps"})["gpus"]
    assert (limits[u0]["limit_w"], limits[u1]["limit_w"]) == (250.0, 200.0)
    wall.t += 60
    assert again.expire() == [u1]


@pytest.fixture
def running_daemon(tmp_path):
    path = str(tmp_path / "powerd.sock")
    d = PowerDaemon(fake(limit_dir=str(tmp_path)), state_path=str(tmp_path / "l.json"))
    stop = threading.Event()
    t = threading.Thread(target=serve, args=(d, path, None, stop, 0.05), daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not (tmp_path / "powerd.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield d, path
    stop.set()
    t.join(5)


def test_controller_applies_the_plans_limits_through_the_socket(running_daemon, caplog):
    d, path = running_daemon
    u0, u1 = list(d.handles)
    c = LimitController(PowerdClient(path), "n1", [u0, u1])
    caps = c.capabilities()
    assert caps[u0].settable and c.node_caps() == {"settable": True, "min_w": 100.0,
                                                   "max_w": 250.0, "default_w": 250.0}
    c.apply({u0: (175.0, "j/1")})
    assert c.in_force == {u0: 175.0, u1: 250.0}
    with caplog.at_level(logging.WARNING):
        c.apply({u0: (175.0, "j/1"), u1: (400.0, "k/2")})      # the driver's range: refused
        c.apply({u0: (175.0, "j/1"), u1: (400.0, "k/2")})
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "node n1: GPU " + u1 in lines[0] and "400 W" in lines[0]
    assert c.in_force[u1] == 250.0
    c.apply({})                                                # the jobs ended
    assert c.in_force == {u0: 250.0, u1: 250.0}


def test_no_daemon_is_one_line_and_nothing_fails(tmp_path, caplog):
    c = LimitController(PowerdClient(str(tmp_path / "absent.sock")), "n7", ["GPU-a"])
    with caplog.at_level(logging.WARNING):
        caps = c.capabilities()
        c.apply({"GPU-a": (150.0, "j/1")})
        c.apply({"GPU-a": (150.0, "j/1")})
    assert not caps["GPU-a"].settable
    assert c.node_caps()["settable"] is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "node n7: GPU power limits cannot be set" in lines[0]
    assert "not reachable" in lines[0] and "GPU GPU-a" in lines[1]


def test_the_applier_takes_the_store_plan_else_the_containers_label(running_daemon):
    """A manager's attempt: the store's planned limit (it may change while the job runs);
    a run no attempt plans (``andreas profile``'s level runs): its label's limit."""
    from agents.attribution import ContainerJob
    from agents.powerlimits import LimitApplier

    d, path = running_daemon
    u0, u1 = list(d.handles)
    c = LimitController(PowerdClient(path), "n1", [u0, u1])
    c.capabilities()
    jobs = [ContainerJob(container_id="c1", job_id="j", attempt=1, gpu_uuids=(u0,)),
            ContainerJob(container_id="c2", job_id="profile-x", attempt=1, gpu_uuids=(u1,),
                         power_limit_w=150.0)]
    planned = {("j", 1): 175.0, ("profile-x", 1): None}     # no attempt row: None
    applier = LimitApplier(c, planned=lambda keys: {k: planned[k] for k in keys},
                           current=lambda: jobs, report=lambda caps: None, every_s=60.0)
    applier.step()
    assert c.in_force == {u0: 175.0, u1: 150.0}
    planned[("j", 1)] = 200.0                                # the plan changed its level
    applier.step()
    assert c.in_force == {u0: 200.0, u1: 150.0}
