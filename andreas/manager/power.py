"""Powering idle nodes down from the plan, and up again when a plan wants them (``[power]``).

An idle GPU node still draws ``power_w[0]``; the simulator measures what switching idle
nodes off saves. Here the manager does it, once per tick, after the reconciliation:

- **Off**: a node that is ``up`` (not profiling, in ``[power] nodes`` when that is set,
  answering this tick), with no open attempt and no running container, that the current
  target leaves empty and that has been idle for ``idle_s``, is switched off. Idle since =
  the latest of: the end of the last attempt on it and its last move by the manager or an
  operator (both in the store, so a restarted manager goes on counting), and when this
  manager saw it come up (memory). The node moves ``up -> off`` *first* (so neither the
  plan nor the agent's clean shutdown can take it meanwhile), the manager stops watching
  its container events (:meth:`Executor.rewatch`: its engine going away is no outage),
  then ``off_command`` runs; if the command fails or outlives ``command_timeout_s``
  (killed), the node moves back to ``up``, one warning line says why, and the node is not
  tried again for ``idle_s``.
- **On**: a node that is ``off`` and that the target places a job on is switched on:
  ``off -> waking``, then ``on_command``; a failure moves it back to ``off`` (one line;
  not tried again for ``idle_s``). Which plans place jobs on ``off`` nodes is the
  manager's rescheduling (:meth:`andreas.manager.manager.Manager.reschedule`): the policy
  first plans on the nodes that are on (``up``, and ``waking`` ones); only when that plan
  postpones jobs does it plan again with the ``off`` nodes too, and that plan wins.
- **Waking -> up**: the node's engine is probed in the background each tick; when it
  answers, ``waking -> up`` (trigger ``node-up``: the next plan starts the job there).
  One not answering within ``3 x wake_lead_s`` after its command goes back to ``off``.

An engine that switches nodes itself (Capability.POWER: Slurm's power saving, ``scontrol
update nodename=X state=POWER_DOWN_ASAP`` / ``POWER_UP``, its SuspendProgram and
ResumeProgram doing the switching) is asked instead of the commands, with the same states,
timeouts and failure handling; "answers" is then the engine's word that the node is up.

Commands run without a shell, in parallel for several nodes, with ``{node}`` replaced by
the node's name and ``ANDREAS_NODE`` in their environment. Logs name the program
(argv[0]) and the node only: the arguments may hold a password, and any of them found in
the command's error output is replaced by ``***`` before it is logged.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from andreas.config import PowerSettings
from andreas.executor.base import Capability, Executor
from andreas.manager.plandoc import Target
from andreas.manager.state import StoreState, node_ref
from andreas.manager.triggers import Trigger
from andreas.store.engine import Store
from andreas.store.models import NodeState
from andreas.store.nodes import last_attempt_ends, move_if, states
from andreas.store.read import NodeView

log = logging.getLogger("andreas.manager")

WAKE_TIMEOUT_FACTOR = 3.0     # a waking node not answering by 3 x wake_lead_s: off again
MIN_WAKE_TIMEOUT_S = 60.0
TAIL = 200                    # characters of a failed command's output that are logged


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """How a power command ended: ``ok``, else ``why`` (one line, secrets masked)."""

    ok: bool
    why: str = ""
    seconds: float = 0.0


def redact(text: str, argv: Sequence[str], keep: Sequence[str]) -> str:
    """``text`` with every argument of ``argv`` (but argv[0] and ``keep``) replaced by
    ``***``: a command's error output may echo a password it was given."""
    secrets = sorted({a for a in argv[1:] if len(a) >= 3 and a not in keep}, key=len,
                     reverse=True)
    for s in secrets:
        text = text.replace(s, "***")
    return text


def run_command(argv: Sequence[str], *, node: str, timeout_s: float) -> CommandResult:
    """Run ``argv`` (no shell) with ``ANDREAS_NODE=node``; never raises."""
    t0 = time.monotonic()
    env = {**os.environ, "ANDREAS_NODE": node}
    try:
        done = subprocess.run(list(argv), env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return CommandResult(ok=False, why=f"timed out after {timeout_s:g} s (killed)",
                             seconds=time.monotonic() - t0)
    except OSError as e:
        return CommandResult(ok=False, why=f"cannot run it: {e.strerror or e}",
                             seconds=time.monotonic() - t0)
    seconds = time.monotonic() - t0
    if done.returncode == 0:
        return CommandResult(ok=True, seconds=seconds)
    out = (done.stderr or done.stdout or b"").decode("utf-8", "replace")
    lines = " | ".join(ln.strip() for ln in out.splitlines() if ln.strip())
    tail = redact(lines, argv, (node,))
    tail = tail if len(tail) <= TAIL else "..." + tail[-TAIL:]
    return CommandResult(ok=False, why=f"exit {done.returncode}" + (f": {tail}" if tail else ""),
                         seconds=seconds)


Runner = Callable[..., CommandResult]


class Power:
    """The power-down of one manager (see the module docstring)."""

    def __init__(self, store: Store, executor: Executor, settings: PowerSettings, *,
                 clock: Callable[[], float] = time.time,
                 pool: cf.ThreadPoolExecutor | None = None,
                 runner: Runner = run_command, probe_every_s: float = 5.0) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self.clock = clock
        self.pool = pool or cf.ThreadPoolExecutor(max_workers=8,
                                                  thread_name_prefix="andreas-power")
        self.runner = runner
        self.via_engine = Capability.POWER in executor.capabilities
        self.probe_every_s = probe_every_s
        self.trouble: dict[str, str] = {}          # node -> its last failed command
        # nodes this tick switches off: no longer watched for container events (the
        # reconciler's next poll leaves them out anyway)
        self.unwatched: frozenset[str] = frozenset()
        self._retry_after: dict[str, float] = {}   # node -> no command before this
        self._up_since: dict[str, float] = {}      # node -> when this manager saw it come up
        self._seen: dict[str, NodeState] | None = None
        self._first_s: float | None = None
        self._probes: dict[str, cf.Future] = {}
        self._probe_after: dict[str, float] = {}

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def warn_left_off(self) -> list[str]:
        """With ``[power]`` disabled, nodes still ``off`` or ``waking`` (switched off while
        it was enabled) are never planned on nor switched on: one warning naming them and
        what to do (at the daemon's start); their names."""
        if self.enabled:
            return []
        with self.store.session() as s:
            left = sorted(name for name, st in states(s).items()
                          if st in (NodeState.OFF, NodeState.WAKING))
        if left:
            log.warning("[power] is disabled, but node(s) %s are still off (or waking): the "
                        "manager plans nothing there and will not switch them on; switch "
                        "them on and run `andreas node resume NODE`, or enable [power]",
                        ", ".join(left))
        return left

    def wake_timeout_s(self) -> float:
        return max(MIN_WAKE_TIMEOUT_S, WAKE_TIMEOUT_FACTOR * self.settings.wake_lead_s)

    def managed(self, node: NodeView) -> bool:
        """Whether ``[power] nodes`` lets the manager switch the node."""
        return not self.settings.nodes or node.name in self.settings.nodes

    def plannable(self, state: StoreState, which: NodeState) -> frozenset[str]:
        """Nodes in state ``which`` (``off`` or ``waking``) the policy may plan on:
        switchable, not profiling, not waiting out a failed command."""
        if not self.enabled:
            return frozenset()
        now = self.clock()
        return frozenset(n.name for n in state.nodes.values()
                         if n.state is which and self.managed(n) and not n.profiling
                         and (which is NodeState.WAKING
                              or now >= self._retry_after.get(n.name, 0.0)))

    # ------------------------------------------------------------------ the tick

    def step(self, state: StoreState, target: Target, *,
             answered: Mapping[str, bool], unreachable: set[str]) -> set[Trigger]:
        """One pass: waking nodes that answer go up, planned-on ``off`` nodes are switched
        on, idle empty ``up`` nodes are switched off. ``answered``: node -> whether its
        engine answered this tick with no running container (the reconciler's poll).
        Returns rescheduling triggers."""
        if not self.enabled:
            return set()
        now = self.clock()
        self._note_states(state, now)
        triggers = self._probe_waking(state, now)
        wanted = {c.node for c in target.assignments.values()}
        wake = [n for n in state.nodes.values()
                if n.state is NodeState.OFF and n.name in wanted and self.managed(n)
                and now >= self._retry_after.get(n.name, 0.0)]
        off = self._idle(state, target, answered, unreachable, now)
        jobs = [(n, "on_command", NodeState.OFF, NodeState.WAKING) for n in wake]
        jobs += [(n, "off_command", NodeState.UP, NodeState.OFF) for n in off]
        moved = []
        for node, which, old, new in jobs:
            with self.store.session() as s:
                if move_if(s, node.id, old, new, at_s=now):
                    moved.append((node, which, old, new))
        self.unwatched = frozenset(n.name for n, _, _, new in moved if new is NodeState.OFF)
        if self.unwatched:      # its engine going away is no outage: stop watching first
            self.executor.rewatch()
        futures = {self._switch(node, which): (node, which, old, new)
                   for node, which, old, new in moved}
        for future in cf.as_completed(futures):
            node, which, old, new = futures[future]
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 - a runner bug must not end the manager
                result = CommandResult(ok=False, why=f"{type(e).__name__}: {e}")
            triggers |= self._finish(node, which, old, new, result, now)
        return triggers

    def _switch(self, node: NodeView, which: str) -> cf.Future:
        if self.via_engine:
            return self.pool.submit(self._engine_power, node, which == "on_command")
        return self.pool.submit(self.runner, self.settings.argv(which, node.name),
                                node=node.name, timeout_s=self.settings.command_timeout_s)

    def _engine_power(self, node: NodeView, on: bool) -> CommandResult:
        t0 = time.monotonic()
        try:
            self.executor.power(node_ref(node), on)
        except Exception as e:  # noqa: BLE001 - one line, the node goes back
            return CommandResult(ok=False, why=str(e), seconds=time.monotonic() - t0)
        return CommandResult(ok=True, seconds=time.monotonic() - t0)

    def _finish(self, node: NodeView, which: str, old: NodeState, new: NodeState,
                result: CommandResult, now: float) -> set[Trigger]:
        program = ("the engine" if self.via_engine
                   else self.settings.argv(which, node.name)[0])
        verb = "off" if which == "off_command" else "on"
        if result.ok:
            self.trouble.pop(node.name, None)
            self._probe_after[node.name] = now
            log.info("node %s: switched %s (%s, %.1f s)%s", node.name, verb, program,
                     result.seconds,
                     "" if verb == "off" else "; waits for its engine to answer")
            return set()
        with self.store.session() as s:
            move_if(s, node.id, new, old, at_s=now if old is NodeState.UP else None)
        self.trouble[node.name] = f"switch {verb}: {result.why}"
        self._retry_after[node.name] = now + self.settings.idle_s
        log.warning("node %s: could not switch it %s (%s %s); it stays %s, next try in "
                    "%.0f s", node.name, verb, program, result.why, old.value,
                    self.settings.idle_s)
        return set()

    # ------------------------------------------------------------------ off

    def _note_states(self, state: StoreState, now: float) -> None:
        """Remember when nodes came up (after the first tick: before it the store's
        times are all there is)."""
        if self._first_s is None:
            self._first_s = now
        seen = {name: n.state for name, n in state.nodes.items()}
        if self._seen is not None:
            for name, st in seen.items():
                if st is NodeState.UP and self._seen.get(name) is not NodeState.UP:
                    self._up_since[name] = now
        self._seen = seen

    def idle_since(self, node: NodeView, last_end: float | None) -> float:
        """When the node was last busy or moved (module docstring)."""
        known = [t for t in (last_end, node.state_changed_s, self._up_since.get(node.name))
                 if t is not None]
        if known:
            return max(known)
        return self._first_s if self._first_s is not None else self.clock()

    def _idle(self, state: StoreState, target: Target, answered: Mapping[str, bool],
              unreachable: set[str], now: float) -> list[NodeView]:
        planned = {c.node for c in target.assignments.values()}
        planned |= {c.node for c in target.profiling.values()}
        busy = {a.node_id for j in state.jobs.values() for a in j.open_attempts}
        candidates = [n for n in state.nodes.values()
                      if n.state is NodeState.UP and not n.profiling and self.managed(n)
                      and n.name not in unreachable and answered.get(n.name) is True
                      and n.id not in busy and n.name not in planned
                      and now >= self._retry_after.get(n.name, 0.0)]
        if not candidates:
            return []
        with self.store.session() as s:
            ends = last_attempt_ends(s)
        return [n for n in candidates
                if now - self.idle_since(n, ends.get(n.id)) >= self.settings.idle_s]

    # ------------------------------------------------------------------ waking

    def _probe_waking(self, state: StoreState, now: float) -> set[Trigger]:
        """Background probes of waking nodes' engines; answer -> up, too long -> off."""
        triggers: set[Trigger] = set()
        for name in [k for k in self._probes if k not in state.nodes
                     or state.nodes[k].state is not NodeState.WAKING]:
            del self._probes[name]
        for node in state.nodes.values():
            if node.state is not NodeState.WAKING:
                continue
            future = self._probes.get(node.name)
            if future is not None and future.done():
                del self._probes[node.name]
                if future.exception() is None:
                    with self.store.session() as s:
                        if move_if(s, node.id, NodeState.WAKING, NodeState.UP, at_s=now):
                            self._up_since[node.name] = now
                            log.info("node %s: woke up (engine answers after %.0f s); up",
                                     node.name, now - (node.state_changed_s or now))
                            triggers.add(Trigger.NODE_UP)
                    continue
            since = node.state_changed_s if node.state_changed_s is not None else now
            if now - since > self.wake_timeout_s():
                with self.store.session() as s:
                    if move_if(s, node.id, NodeState.WAKING, NodeState.OFF, at_s=now):
                        self.trouble[node.name] = (f"switch on: engine did not answer "
                                                   f"within {self.wake_timeout_s():.0f} s")
                        self._retry_after[node.name] = now + self.settings.idle_s
                        log.warning("node %s: switched on but its engine did not answer "
                                    "within %.0f s; off again, next try in %.0f s",
                                    node.name, self.wake_timeout_s(), self.settings.idle_s)
                        triggers.add(Trigger.NODE_DOWN)
                continue
            if node.name not in self._probes and now >= self._probe_after.get(node.name, 0.0):
                self._probe_after[node.name] = now + self.probe_every_s
                self._probes[node.name] = self.pool.submit(self.executor.containers,
                                                           node_ref(node))
        return triggers

    def wait_probes(self, timeout_s: float = 5.0) -> None:
        """Wait for the probes in flight (tests, and a clean shutdown)."""
        if self._probes:
            cf.wait(list(self._probes.values()), timeout=timeout_s)
