"""Where the manager's policy runs: in the manager's process, or in a helper process that
exits when decisions stop coming.

The policies' compiled loops (numba, with LLVM behind it) hold about 110 MB once loaded,
more than the rest of the manager together, and the manager needs them for the few
milliseconds of each decision. ``[manager] optimizer_idle_s`` > 0 (the default) runs
them in one helper process, started at the first decision and ended after that many
seconds without one, so an idle manager holds only its own memory; the next decision
starts it again (about a second: Python, numpy, numba and the cached kernels). 0 keeps
the policies in the manager's process, as tests and the simulator do.

The helper receives the snapshot, the random generator and a stateful policy's state and
returns the plan with both, so a decision is the same wherever it runs (a test holds the
two to the same plans). A helper that dies is an :class:`~andreas.errors.AndreasError`
for that decision (the manager keeps its previous decision) and is started anew for the
next one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from andreas.errors import AndreasError, InputError

if TYPE_CHECKING:
    import concurrent.futures as cf

    import numpy as np

    from andreas.model import Plan, Snapshot

log = logging.getLogger("andreas.manager")


class Decider(Protocol):
    def start(self) -> None: ...

    def decide(self, snapshot: Snapshot, rng: np.random.Generator, policy: str,
               state: dict[str, Any] | None) -> tuple[Plan, np.random.Generator]: ...

    def close(self) -> None: ...


class InProcess:
    """The policies in this process (``optimizer_idle_s = 0``, tests)."""

    def decide(self, snapshot: Snapshot, rng: np.random.Generator, policy: str,
               state: dict[str, Any] | None) -> tuple[Plan, np.random.Generator]:
        from andreas import optimizer

        options = {} if state is None else {"state": state}
        return optimizer.decide(snapshot, rng, policy, **options), rng

    def start(self) -> None:
        """Compile or load the kernels now, so the first decision need not wait."""
        _warm()

    def close(self) -> None:
        pass


def _warm() -> None:
    """The helper's start: end with the manager, then compile or load the kernels."""
    _follow_parent()
    from andreas.optimizer.warmup import warm

    warm(notice=log.info)


def _follow_parent(every_s: float = 1.0) -> None:
    """A helper whose manager died (SIGKILL, OOM) must not live on holding the kernels:
    a daemon thread ends the process once its parent is no longer the one that started
    it (an orphan is re-parented)."""
    import os

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, name="andreas-helper-parent", daemon=True).start()


def _remote(snapshot: Snapshot, rng: np.random.Generator, policy: str,
            state: dict[str, Any] | None) -> tuple[Any, ...]:
    """In the helper: the plan, the generator after it and the state, or the refusal."""
    try:
        plan, rng = InProcess().decide(snapshot, rng, policy, state)
    except (AndreasError, ValueError) as e:
        return ("error", type(e).__name__, str(e))
    return ("plan", plan, rng, state)


class Helper:
    """The policies in one helper process that ends ``idle_s`` after the last decision."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._pool: cf.ProcessPoolExecutor | None = None
        self._timer: threading.Timer | None = None
        self._busy = 0
        self._closed = False

    def start(self) -> None:
        """Start the helper now (it compiles or loads the kernels), e.g. at the daemon's
        start, so the first decision need not wait for it."""
        pool = self._take()
        try:
            pool.submit(int).result()
        finally:
            self._release()

    def _take(self) -> cf.ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise AndreasError("the manager is stopping")
            self._busy += 1
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pool is None:
                import concurrent.futures as cf
                import multiprocessing

                self._pool = cf.ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                    initializer=_warm)
                log.info("optimizer helper process starting (it ends after %.0f s without "
                         "a decision)", self.idle_s)
            return self._pool

    def _release(self) -> None:
        with self._lock:
            self._busy -= 1
            if self._busy or self._closed or self._pool is None:
                return
            timer = threading.Timer(self.idle_s, lambda: self._idle(timer))
            timer.daemon = True
            self._timer = timer
            timer.start()

    def _idle(self, timer: threading.Timer) -> None:
        with self._lock:
            if self._timer is not timer or self._busy:
                return                          # a decision came meanwhile
            pool, self._pool, self._timer = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True)
            log.info("optimizer helper process ended after %.0f s without a decision",
                     self.idle_s)

    def decide(self, snapshot: Snapshot, rng: np.random.Generator, policy: str,
               state: dict[str, Any] | None) -> tuple[Plan, np.random.Generator]:
        from concurrent.futures.process import BrokenProcessPool

        pool = self._take()
        try:
            out = pool.submit(_remote, snapshot, rng, policy, state).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise AndreasError("the optimizer helper process died; it is started again "
                               "for the next decision") from None
        finally:
            self._release()
        if out[0] == "error":
            raise InputError(out[2]) if out[1] == "InputError" else ValueError(out[2])
        _, plan, rng, new_state = out
        if state is not None and new_state is not None:
            state.clear()
            state.update(new_state)
        return plan, rng

    @property
    def running(self) -> bool:
        """Whether the helper process exists now."""
        return self._pool is not None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            pool, self._pool, self._timer = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def make_decider(idle_s: float) -> InProcess | Helper:
    """A helper process for ``idle_s`` > 0, else this process."""
    return Helper(idle_s) if idle_s > 0 else InProcess()
