"""End to end, the power-down: real MariaDB, two real Docker engines, agents with fake
GPUs, the manager with ``[power]`` switching nodes by a command.

The power command is a small script (``switch.sh off|on NODE``) that records each call
in ``calls.log`` and asks the test to "switch the node": a helper thread of the test
stops the node's agent (SIGTERM, a clean shutdown) and its dockerd for ``off`` — the
script waits until that is done, as a soft power-off would — and starts the dockerd and
the agent again for ``on``, in the background (the script returns at once, as
``ipmitool chassis power on`` does; the node boots meanwhile).

Asserted, with the store's ``state_changed_s`` and the call log: with no jobs both nodes
go ``off`` after ``idle_s`` (each off command once, after the state moved, the engines
and agents really gone, no node ever ``down``); a job submitted then makes the manager
wake one node (``off -> waking -> up`` once its engine answers), run the job there from
the first epoch to the last, each once; ``idle_s`` after it ends that node goes off
again, the other never woke. No warning about either node in the manager's log. The
figures go to out/e2e/power.json.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.cluster import IMAGE, ROOT, Cluster, running_cluster
from tests.e2e.poller import Poller
from tests.e2e.test_end_to_end import APP, Store, _history, wait_until

NODES = [("pw-v100", "1xV100", 1), ("pw-t4", "1xT4", 1)]
EPOCH_S = 1.0
EPOCHS = 4
IDLE_S = 4.0
WAKE_LEAD_S = 5.0
BOOT_S = 1.0          # a switched-on node boots this long before its engine starts
PROFILES = [{"application": APP, "gpu_type": t, "gpus": 1, "epoch_time_s": EPOCH_S}
            for t in ("V100", "T4")]
SWITCH = """#!/bin/sh
# switch.sh off|on NODE: what the manager's [power] commands run (no shell of its own).
set -eu
now() { date +%s.%N; }
req="{requests}/$(now)-$1-$2"
echo "$(now) start $1 $2 env=$ANDREAS_NODE" >> "{calls}"
: > "$req.tmp"
mv "$req.tmp" "$req.req"
if [ "$1" = off ]; then          # a soft power-off: returns once the node is down
  i=0
  while [ ! -e "$req.done" ]; do
    i=$((i + 1))
    if [ "$i" -gt 600 ]; then echo "node $2 did not go off" >&2; exit 1; fi
    sleep 0.1
  done
fi
echo "$(now) end $1 $2" >> "{calls}"
"""


@dataclass
class Switchboard(Poller):
    """Acts on the script's requests: ``off`` stops the node's agent and engine, ``on``
    starts them again. Records when each node's engine stopped / answered again."""

    cluster: Cluster
    requests: Path
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (t, node, what)
    errors: list[str] = field(default_factory=list)
    _acting: list[threading.Thread] = field(default_factory=list)
    interval_s = 0.05
    thread_name = "e2e-switchboard"

    def stop(self) -> None:
        super().stop()
        for t in self._acting:
            t.join(timeout=90)

    def poll(self) -> None:
        for req in sorted(self.requests.glob("*.req")):
            taken = req.with_suffix(".taken")
            req.rename(taken)
            t = threading.Thread(target=self._act, args=(taken,), daemon=True)
            t.start()
            self._acting.append(t)

    def _act(self, taken: Path) -> None:
        _, verb, node = taken.stem.split("-", 2)
        try:
            if verb == "off":                 # the machine shuts down: services stop
                self.cluster.stop_agent(node)
                self.cluster.nodes[node].engine.stop()
                self.events.append((time.time(), node, "engine stopped"))
            else:                             # it boots: the engine, then the agent
                time.sleep(BOOT_S)
                self.cluster.nodes[node].engine.start()
                self.events.append((time.time(), node, "engine answers"))
                self.cluster.start_agent(node)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(f"{verb} {node}: {type(e).__name__}: {e}")
        taken.with_suffix(".done").touch()


@dataclass
class NodeWatch(Poller):
    """Polls the nodes' states: every change with the store's ``state_changed_s``."""

    cluster: Cluster
    seen: list[tuple[str, str, float | None]] = field(default_factory=list)
    _last: dict[str, str] = field(default_factory=dict)
    thread_name = "e2e-nodes"

    def opened(self) -> None:
        self._db = Store(self.cluster)

    def poll(self) -> None:
        for r in self._db.rows("SELECT name, state, state_changed_s FROM nodes"):
            if self._last.get(r.name) != r.state:
                self._last[r.name] = r.state
                self.seen.append((r.name, r.state, r.state_changed_s))

    def closed(self) -> None:
        self._db.engine.dispose()

    def states(self, node: str) -> list[str]:
        return [s for n, s, _ in self.seen if n == node]

    def times(self, node: str, state: str) -> list[float]:
        """The store's times of the node's moves to ``state`` (registration: none)."""
        return [float(t) for n, s, t in self.seen
                if n == node and s == state and t is not None]

    def now(self, node: str) -> str | None:
        states = self.states(node)
        return states[-1] if states else None


def calls(tmp: Path, phase: str, verb: str) -> list[tuple[float, str]]:
    """(time, node) of the switch script's ``start`` or ``end`` lines for ``verb``."""
    path = tmp / "calls.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(float(t), node) for t, ph, v, node, *_ in (ln.split() for ln in lines)
            if ph == phase and v == verb]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("e2e-power")
    requests = tmp / "switch-requests"
    requests.mkdir()
    switch = tmp / "switch.sh"
    switch.write_text(SWITCH.replace("{requests}", str(requests))
                      .replace("{calls}", str(tmp / "calls.log")))
    switch.chmod(0o755)
    manager_toml = f"""[manager]
policy = "rg"
period_s = 60
poll_s = 0.5
seed = 7
restart_overhead_s = 2
min_power_samples = 20

[power]
enabled = true
idle_s = {IDLE_S}
wake_lead_s = {WAKE_LEAD_S}
command_timeout_s = 90
off_command = ["{switch}", "off", "{{node}}"]
on_command = "{switch} on {{node}}"
"""
    with running_cluster(tmp, NODES, manager_toml=manager_toml, app_profiles=PROFILES) as c:
        yield c


def test_idle_nodes_go_off_and_one_is_woken_for_a_job(cluster: Cluster):
    tmp = cluster.tmp
    names = [n for n, _, _ in NODES]
    board = Switchboard(cluster, tmp / "switch-requests").start()
    watch = NodeWatch(cluster).start()
    db = Store(cluster)
    try:
        started = time.time()
        cluster.start_manager()

        # --- 1. nothing to do: after idle_s both nodes are switched off ---------------
        wait_until(cluster, "both nodes off and their engines stopped",
                   lambda: len(calls(tmp, "end", "off")) == 2, 90)
        assert sorted(n for _, n in calls(tmp, "start", "off")) == sorted(names)
        assert sorted(n for _, n in calls(tmp, "end", "off")) == sorted(names)
        assert board.errors == []
        for name in names:
            assert watch.now(name) == "off", watch.seen
            [off_s] = watch.times(name, "off")
            [(call_s, _)] = [c for c in calls(tmp, "start", "off") if c[1] == name]
            assert off_s - started >= IDLE_S, (name, off_s, started)
            assert off_s <= call_s + 0.05, (name, off_s, call_s)    # state first, then command
            assert not cluster.nodes[name].engine.answers()
            agent = cluster.nodes[name].agent
            assert agent is not None and agent.poll() is not None
        first_off = {n: watch.times(n, "off")[0] for n in names}
        time.sleep(3 * 0.5)                      # a few ticks with both nodes silent
        assert [watch.now(n) for n in names] == ["off", "off"], watch.seen
        assert calls(tmp, "start", "on") == []

        # --- 2. a job: the plan on the nodes that are on has no room; a node is woken ---
        job = cluster.andreas("submit", IMAGE, "--name", "woke1", "--epochs", str(EPOCHS),
                              "--due", "+3m", "--weight", "0.01", "--app", APP,
                              "--grace-s", "20", "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}",
                              "--quiet").strip()
        wait_until(cluster, "the on command", lambda: calls(tmp, "start", "on"), 60)
        [(on_call_s, woken)] = calls(tmp, "start", "on")
        [other] = [n for n in names if n != woken]
        wait_until(cluster, "the job completed",
                   lambda: db.states()[job] == "completed", 120)
        assert board.errors == []

        [submitted] = [r.submit_s for r in db.rows("SELECT submit_s FROM jobs")]
        [attempt] = db.rows(
            "SELECT a.attempt, n.name AS node, a.start_s, a.end_s, a.exit_code "
            "FROM job_attempts a JOIN nodes n ON n.id = a.node_id WHERE a.job_id = :j", j=job)
        assert (attempt.node, attempt.exit_code) == (woken, 0)
        assert _history(cluster.checkpoint_root / job) == list(range(1, EPOCHS + 1))
        [waking_s] = watch.times(woken, "waking")
        [up_s] = watch.times(woken, "up")                     # registration's up: no time
        [answered_s] = [t for t, n, what in board.events
                        if n == woken and what == "engine answers"]
        assert submitted <= waking_s <= on_call_s + 0.05 < up_s, (waking_s, on_call_s, up_s)
        assert on_call_s + BOOT_S < answered_s                # booted, then the engine
        assert answered_s - 3.0 <= up_s <= answered_s + 3 * WAKE_LEAD_S, (answered_s, up_s)
        assert up_s <= float(attempt.start_s), (up_s, attempt.start_s)
        # the plan in force when the node was switched on: the job on that node
        [(decided_s, plan)] = [(r.decided_s, r.plan) for r in db.rows(
            "SELECT t AS decided_s, plan FROM decisions WHERE t <= :s "
            "ORDER BY id DESC LIMIT 1", s=on_call_s)]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        assert decided_s >= submitted
        assert [(a["job"], a["node"]) for a in plan["assignments"]] == [(job, woken)], plan

        # --- 3. idle again: the woken node goes off after idle_s -----------------------
        wait_until(cluster, f"{woken} off again",
                   lambda: len(calls(tmp, "end", "off")) == 3, 60)
        assert watch.states(woken) == ["up", "off", "waking", "up", "off"], watch.seen
        second_off = watch.times(woken, "off")[-1]
        assert second_off - float(attempt.end_s) >= IDLE_S - 0.5, (second_off, attempt.end_s)
        assert sorted(n for _, n in calls(tmp, "start", "off")) == sorted([*names, woken])
        assert [n for _, n in calls(tmp, "start", "on")] == [woken]
        assert watch.states(other) == ["up", "off"], watch.seen       # never woken
        assert all(s != "down" for _, s, _ in watch.seen), watch.seen
        assert cluster.stop_manager() == 0
    finally:
        watch.stop()
        board.stop()
        db.engine.dispose()

    log = cluster.manager_log()
    for name in names:
        bad = [ln for ln in log.splitlines() if name in ln and any(
            w in ln for w in ("WARNING", "ERROR", "could not", "marked down", "unreachable"))]
        assert bad == [], bad
    assert f"node {woken}: woke up" in log and "Traceback" not in log
    figures = {
        "idle_s": IDLE_S, "epoch_s": EPOCH_S, "epochs": EPOCHS,
        "off_after_manager_start_s": {n: round(first_off[n] - started, 3) for n in names},
        "off_command_s": {n: [round(end - start, 3) for start, end in zip(
            [t for t, m in calls(tmp, "start", "off") if m == n],
            [t for t, m in calls(tmp, "end", "off") if m == n], strict=True)] for n in names},
        "woken": woken,
        "boot_s": BOOT_S,
        **{k: round(v, 3) for k, v in {
            "on_command_after_submit_s": on_call_s - submitted,
            "engine_answered_after_on_s": answered_s - on_call_s,
            "wake_up_s": up_s - waking_s,          # waking -> up in the store
            "job_start_after_submit_s": float(attempt.start_s) - submitted,
            "job_run_s": float(attempt.end_s) - float(attempt.start_s),
            "off_again_after_job_end_s": second_off - float(attempt.end_s),
            "total_s": time.time() - started}.items()},
    }
    out = ROOT / "out" / "e2e"
    out.mkdir(parents=True, exist_ok=True)
    (out / "power.json").write_text(json.dumps(figures, indent=1))
    print("power-down end to end:", json.dumps(figures))
