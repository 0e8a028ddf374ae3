"""The agent-side fence: a node cut off from the manager stops jobs that run elsewhere now.

When the manager cannot reach a node's Docker engine it ends the attempts there ("node
unreachable") and, after a hold, starts the jobs elsewhere from their checkpoints. A node
cut off from the manager but not from its jobs would keep running its copy: two copies,
one checkpoint directory. The fence, one thread of the agent, closes that gap:

- every ``fence_check_s`` it lists the running andreas containers of its engine and asks
  the store (:func:`andreas.store.fence.verdicts`) whether each one's (job, attempt) is
  still the job's latest attempt, open, on this node. A container the store calls stale
  (ended, superseded, placed elsewhere) gets SIGTERM, and SIGKILL once its grace period
  has passed (the job's ``grace_s``, which the executor puts in the ``andreas.grace_s``
  label): the job checkpoints, as at any preemption;
- when the store has not answered for ``fence_after_s`` (measured from the moment the last
  successful check was *sent*: the manager cannot have ended an attempt before a read
  that still saw it open), it stops every andreas container it runs the same way, since
  it cannot know whether they were restarted elsewhere. 0 switches that off.

Why this is safe (docs/design/manager.md, "Fencing"): the manager starts a job whose
node stopped answering only ``grace_s + [manager] fence_after_s + 5 s`` after it ended the
attempt, and the agent's last successful check was sent before that end, so the copy is
killed before the manager's hold ends (when the agent's fence_after_s is at most the
manager's); an agent that reaches the store sees the ended attempt sooner still.

Unknown attempts (no row: ``andreas profile`` runs) are the manager's to judge; an agent
that was not running while its node was cut off cannot fence (it stops them at most
``fence_after_s`` after it starts, if the store is still unreachable then).

*Without the engine*: a container engine that crashes (dockerd SIGKILLed) leaves its
containers' processes running under their shims, and the manager, which cannot reach
the engine either, ends their attempts and starts the jobs elsewhere after its hold. So
the fence remembers each container's main process (``State.Pid`` and its start time,
``andreas.infra.procs``) when it lists it, and while the engine does not answer it
watches those processes through ``/proc`` and signals them directly (SIGTERM to the
container's init, as ``docker stop`` does; SIGKILL after the grace period ends the whole
PID namespace), on the same verdicts.

Inputs are constructor arguments (the Docker client, the store's verdicts, clocks), so the
tests drive the same loop with a real engine and a real store or with stubs.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andreas.errors import error_line
from andreas.infra import procs
from andreas.job import LABEL_JOB, job_labels
from andreas.store.fence import Verdict

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 10.0   # Docker's stop timeout, for containers without andreas.grace_s

Verdicts = Callable[[list[tuple[str, int]]], Mapping[tuple[str, int], Verdict]]


@dataclass(frozen=True, kw_only=True)
class Running:
    """A running andreas container of this node's engine."""

    container_id: str
    name: str
    job_id: str
    attempt: int
    grace_s: float | None = None      # the ``andreas.grace_s`` label (the job's grace_s)
    process: procs.ProcessRef | None = None   # its main process here (None: unknown)


@dataclass(frozen=True, kw_only=True)
class Stopping:
    """A container the fence has sent SIGTERM: SIGKILL at ``kill_at`` (monotonic)."""

    running: Running
    why: str
    kill_at: float
    killed: bool = False


@dataclass
class FenceStats:
    checks: int = 0            # answered store checks
    failed_checks: int = 0     # store errors or no answer in time
    stopped: int = 0           # containers sent SIGTERM by the fence
    killed: int = 0            # ... and SIGKILL after their grace period
    self_fenced: int = 0       # times the store stayed unreachable for fence_after_s
    without_engine: int = 0    # signals sent through /proc while the engine was away


class Fence:
    """The fence loop; :meth:`run` until the stop event (a thread of the agent)."""

    def __init__(self, *, docker: Callable[[], Any], verdicts: Verdicts, check_s: float,
                 after_s: float, mono: Callable[[], float] = time.monotonic,
                 proc: Path = procs.PROC) -> None:
        self.docker = docker               # makes the Docker client (again, after a failure)
        self.client: Any = None
        self.proc = proc
        self.known: dict[str, Running] = {}   # the last listing, with the processes
        self.engine_down: str | None = None   # why the engine does not answer
        self.verdicts = verdicts
        self.check_s = check_s
        self.after_s = after_s
        self.mono = mono
        self.stats = FenceStats()
        self.stopping: dict[str, Stopping] = {}
        self.last_ok = mono()          # when the last answered check was sent (start: now)
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="andreas-fence")
        self._pending: cf.Future | None = None
        self._pending_sent = 0.0
        self._fenced = False           # all stopped for want of the store (log once)
        self._store_down = False       # the last query failed (one line per change)

    def run(self, stop: threading.Event) -> None:
        next_check = self.mono()
        while not stop.is_set():
            now = self.mono()
            if now >= next_check:
                self.check()
                next_check = self.mono() + self.check_s
            wake = [next_check] + [s.kill_at for s in self.stopping.values() if not s.killed]
            if self.after_s > 0 and not self._fenced:
                wake.append(self.last_ok + self.after_s)
            stop.wait(max(0.01, min(wake) - self.mono()))
            if not stop.is_set():
                self.kill_due()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ one check

    def check(self) -> None:
        """List, ask the store (waiting at most until the self-fence is due), act."""
        running = self._listed()
        if running is None:
            if self.engine_down is not None:
                self._forget(())             # the processes it was stopping have ended
            return
        verdicts = self._ask(running)
        now = self.mono()
        if verdicts is not None:
            if self._fenced or self._store_down:
                log.warning("fence: the store answers again")
            self._fenced = self._store_down = False
            for r in running:
                v = verdicts.get((r.job_id, r.attempt))
                if v is not None and v.stale:
                    self._stop(r, v.why, now)
        elif self.after_s > 0 and now >= self.last_ok + self.after_s:
            if not self._fenced:
                self.stats.self_fenced += 1
                log.error("fence: no answer from the store for %.0f s: stopping the %d andreas "
                          "container(s) here (they may run elsewhere by now)",
                          now - self.last_ok, len(running))
            self._fenced = True
            for r in running:
                self._stop(r, f"store unreachable for {now - self.last_ok:.0f} s", now)
        self._forget(r.container_id for r in running)
        self.kill_due()

    def _ask(self, running: list[Running]) -> Mapping[tuple[str, int], Verdict] | None:
        """The store's verdicts, or None when it failed or did not answer before the
        self-fence is due (a hung query must not delay the fence)."""
        if self._pending is None:
            self._pending_sent = self.mono()
            keys = sorted({(r.job_id, r.attempt) for r in running})
            self._pending = self._pool.submit(self.verdicts, keys)
        sent = self._pending_sent
        wait_s = (self.last_ok + self.after_s - self.mono()) if self.after_s > 0 else None
        if wait_s is not None and self._fenced:
            wait_s = min(1.0, self.check_s)     # fenced already: a short wait for the answer
        try:
            found = self._pending.result(timeout=None if wait_s is None else max(0.0, wait_s))
        except cf.TimeoutError:
            self.stats.failed_checks += 1
            self._note_down(f"the store has not answered for {self.mono() - sent:.0f} s")
            return None                     # still pending: collected at a later check
        except Exception as e:  # noqa: BLE001 - any store error: unreachable for the fence
            self._pending = None
            self.stats.failed_checks += 1
            self._note_down(f"cannot ask the store ({self.mono() - self.last_ok:.0f} s since "
                            f"the last answer): {error_line(e)}")
            return None
        self._pending = None
        self.stats.checks += 1
        self.last_ok = max(self.last_ok, sent)
        if not running:
            return found
        wanted = {(r.job_id, r.attempt) for r in running}
        return found if wanted <= set(found) else None   # an older query's answer: next time

    def _note_down(self, why: str) -> None:
        """One warning when the store stops answering; later failures at debug level."""
        (log.debug if self._store_down else log.warning)("fence: %s", why)
        self._store_down = True

    # ------------------------------------------------------------------ stopping

    def _listed(self) -> list[Running] | None:
        """The running andreas containers: from the engine, else (it does not answer)
        those of the last listing whose process still runs here; None: nothing to watch."""
        try:
            if self.client is None:
                self.client = self.docker()
            running = self._running()
        except Exception as e:  # noqa: BLE001 - the engine is away: watch the processes
            self.client = None
            running = [r for r in self.known.values()
                       if r.process is not None and procs.alive(r.process, self.proc)]
            if self.engine_down is None:
                log.warning("fence: the container engine does not answer (%s); %s",
                            error_line(e),
                            f"watching the processes of {len(running)} andreas container(s) "
                            "here through /proc" if running else "no andreas container "
                            "known to run here")
            self.engine_down = error_line(e)
            self.known = {r.container_id: r for r in running}
            return running or None
        if self.engine_down is not None:
            log.warning("fence: the container engine answers again")
            self.engine_down = None
        self.known = {r.container_id: r for r in running}
        return running

    def _signal(self, r: Running, sig: str) -> None:
        """Through the engine; while it is away, to the container's process directly.
        Raises when neither way reached it."""
        if self.engine_down is None and self.client is not None:
            self.client.api.kill(r.container_id, signal=sig)
            return
        if r.process is None or not procs.send(r.process, signal.Signals[sig], self.proc):
            raise ProcessLookupError(f"engine away ({self.engine_down}) and no process of "
                                     "it runs here")
        self.stats.without_engine += 1

    def _stop(self, r: Running, why: str, now: float) -> None:
        if r.container_id in self.stopping:
            return
        grace = r.grace_s if r.grace_s is not None else DEFAULT_GRACE_S
        try:
            self._signal(r, "SIGTERM")
        except Exception as e:  # noqa: BLE001 - gone meanwhile, or Docker down: next check
            log.warning("fence: SIGTERM to %s failed: %s", r.name, error_line(e))
            return
        self.stopping[r.container_id] = Stopping(running=r, why=why, kill_at=now + grace)
        self.stats.stopped += 1
        how = "" if self.engine_down is None else f" (process {r.process.pid}, engine away)" \
            if r.process is not None else ""
        log.warning("fence: SIGTERM container %s%s (job=%s attempt=%d): %s; SIGKILL after "
                    "%.0f s", r.name, how, r.job_id, r.attempt, why, grace)

    def kill_due(self) -> None:
        now = self.mono()
        for cid, s in list(self.stopping.items()):
            if s.killed or now < s.kill_at:
                continue
            try:
                self._signal(s.running, "SIGKILL")
            except Exception as e:  # noqa: BLE001 - exited meanwhile (409/404): fine
                log.debug("fence: SIGKILL %s: %s", s.running.name, error_line(e))
            self.stopping[cid] = Stopping(running=s.running, why=s.why, kill_at=s.kill_at,
                                          killed=True)
            self.stats.killed += 1
            log.warning("fence: SIGKILL container %s (job=%s attempt=%d): grace period over",
                        s.running.name, s.running.job_id, s.running.attempt)

    def _forget(self, running: Iterable[str]) -> None:
        alive = set(running)
        for cid in [c for c in self.stopping if c not in alive]:
            del self.stopping[cid]

    def _running(self) -> list[Running]:
        out = []
        for row in self.client.api.containers(filters={"label": LABEL_JOB,
                                                       "status": "running"}):
            try:
                labels = job_labels(row.get("Labels"))
            except ValueError:
                continue                      # bad labels: the manager's warning covers it
            if labels is None:
                continue
            names = row.get("Names") or [row["Id"][:12]]
            known = self.known.get(row["Id"])
            out.append(Running(container_id=row["Id"], name=str(names[0]).lstrip("/"),
                               job_id=labels.job_id, attempt=labels.attempt,
                               grace_s=labels.grace_s,
                               process=known.process if known is not None
                               and known.process is not None else self._process(row["Id"])))
        return out

    def _process(self, container_id: str) -> procs.ProcessRef | None:
        """The container's main process on this machine (one inspect per container)."""
        try:
            pid = int((self.client.api.inspect_container(container_id).get("State") or {})
                      .get("Pid") or 0)
        except Exception as e:  # noqa: BLE001 - no process known: only the engine stops it
            log.debug("fence: container %s: no process (%s)", container_id[:12], e)
            return None
        return procs.ref(pid, self.proc) if pid > 0 else None
