"""The policies in a helper process (``[manager] optimizer_idle_s``): the same plans as in
the manager's own process, the helper ends when idle and comes back, a dead helper costs
one decision, and the manager's process never loads the compiled kernels."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from andreas.errors import AndreasError
from andreas.formats.snapshot import load_snapshot
from andreas.manager.decider import Helper, InProcess

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "example-snapshot-n10.json"


@pytest.fixture(scope="module")
def helper():
    h = Helper(idle_s=600.0)
    try:
        yield h
    finally:
        h.close()


def twice(decider, policy, state):
    snap = load_snapshot(SNAPSHOT)
    rng = np.random.default_rng(7)
    first, rng = decider.decide(snap, rng, policy, state)
    second, rng = decider.decide(snap, rng, policy, state)
    return first, second, rng.integers(1 << 30)


@pytest.mark.parametrize("policy, state", [("rg", None), ("round-robin", {})])
def test_the_helper_decides_what_the_manager_would(helper, policy, state):
    here_state = None if state is None else {}
    assert twice(helper, policy, state) == twice(InProcess(), policy, here_state)
    assert state == here_state                  # a stateful policy's state comes back


def test_a_policy_refusal_is_the_same_error(helper):
    snap = load_snapshot(SNAPSHOT)
    with pytest.raises(AndreasError, match="unknown policy"):
        helper.decide(snap, np.random.default_rng(0), "no-such-policy", None)


def test_the_helper_ends_when_idle_and_a_dead_one_costs_one_decision():
    snap = load_snapshot(SNAPSHOT)
    h = Helper(idle_s=1.0)
    try:
        h.start()
        assert h.running
        deadline = time.monotonic() + 30
        while h.running and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not h.running                         # ended after 1 s without a decision
        plan, _ = h.decide(snap, np.random.default_rng(0), "rg", None)   # started again
        assert plan.assignments and h.running
        for pid in [p.pid for p in h._pool._processes.values()]:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(AndreasError, match="helper process died"):
            h.decide(snap, np.random.default_rng(0), "rg", None)
        again, _ = h.decide(snap, np.random.default_rng(0), "rg", None)
        assert again == plan
    finally:
        h.close()


def test_the_managers_process_does_not_load_the_kernels():
    code = ("import sys\n"
            "import numpy as np\n"
            "from andreas.formats.snapshot import load_snapshot\n"
            "from andreas.manager.decider import Helper\n"
            "import andreas.manager.daemon\n"
            "if __name__ == '__main__':\n"
            "    h = Helper(600.0)\n"
            f"    plan, _ = h.decide(load_snapshot({str(SNAPSHOT)!r}), "
            "np.random.default_rng(0), 'rg', None)\n"
            "    h.close()\n"
            "    print(len(plan.assignments), sorted(m for m in ('numba', 'llvmlite') "
            "if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "[]" and int(out.stdout.split()[0]) > 0


def test_a_helper_ends_with_a_killed_manager():
    """A manager killed by SIGKILL (the end-to-end test does it) left its helper running,
    orphaned, with the kernels' memory; the helper now follows its parent."""
    import psutil

    code = ("import numpy as np\n"
            "from andreas.formats.snapshot import load_snapshot\n"
            "from andreas.manager.decider import Helper\n"
            "if __name__ == '__main__':\n"
            "    h = Helper(600.0)\n"
            f"    h.decide(load_snapshot({str(SNAPSHOT)!r}), np.random.default_rng(0), "
            "'greedy', None)\n"
            "    import os, time\n"
            "    print(' '.join(str(p.pid) for p in h._pool._processes.values()), flush=True)\n"
            "    time.sleep(600)\n")
    manager = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               text=True, cwd=ROOT)
    try:
        helpers = [int(p) for p in manager.stdout.readline().split()]
        assert helpers
        os.kill(manager.pid, signal.SIGKILL)
        manager.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                  for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                       for p in helpers)
    finally:
        if manager.poll() is None:
            manager.kill()
