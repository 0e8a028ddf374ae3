"""``andreas manager run``: store, lock, executor, signals, loop.

SIGTERM / SIGINT set a stop event: the tick in progress finishes, the period timer stops,
the executor's event watchers stop, the lock is released and the process exits 0.
Running containers are left running; the next manager adopts them (reconciliation at
start).

Container events (``executor.watch``) wake the loop for the nodes the last tick read
(:meth:`Manager.watched_nodes`); polling every ``poll_s`` stays the source of truth.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from andreas.config import ManagerSettings, Settings
from andreas.executor.base import Executor
from andreas.infra.fields import check_field
from andreas.manager.lock import acquire, make_lock
from andreas.manager.loop import run_loop
from andreas.manager.manager import Manager
from andreas.store.engine import Store, open_store

log = logging.getLogger("andreas.manager")


def make_executor(settings: Settings, *, dry_run: bool) -> Executor:
    """The executor ``[executor] kind`` names (Docker or Slurm), or the dry-run one that
    only records (imported on use). A Slurm output directory the manager cannot see is an
    InputError naming the key."""
    if dry_run:
        from andreas.executor.dryrun import DryRunExecutor

        return DryRunExecutor(settings=settings.executor)
    if settings.executor.kind == "slurm":
        from andreas.errors import InputError
        from andreas.executor.errors import ExecutorError
        from andreas.executor.slurm import SlurmExecutor

        try:
            return SlurmExecutor(settings.executor)
        except ExecutorError as e:
            raise InputError(str(e), field="executor.slurm.output_dir") from None
    from andreas.executor.docker import DockerExecutor

    return DockerExecutor(settings.executor)


def with_overrides(settings: Settings, *, policy: str | None = None,
                   period_s: float | None = None, metrics_port: int | None = None) -> Settings:
    """``settings`` with the command line's options; an option's value is checked by the
    rules of the setting it replaces (an :class:`InputError` naming the option)."""
    manager = settings.manager
    if policy is not None:
        manager = replace(manager, policy=policy)
    if period_s is not None:
        manager = replace(manager, period_s=check_field(ManagerSettings, "period_s", period_s,
                                                        "--period-s"))
    if metrics_port is not None:
        manager = replace(manager, metrics_port=check_field(
            ManagerSettings, "metrics_port", metrics_port, "--metrics-port"))
    return replace(settings, manager=manager)


def run(settings: Settings, *, dry_run: bool = False, once: bool = False,
        store: Store | None = None, executor: Executor | None = None,
        stop: threading.Event | None = None, install_signals: bool = True,
        clock: Callable[[], float] = time.time) -> int:
    """The daemon's life; returns the exit code (0: stopped cleanly)."""
    stop = stop or threading.Event()
    if install_signals:
        def on_signal(signum, _frame):
            log.info("%s received: finishing the current tick, then stopping",
                     signal.Signals(signum).name)
            stop.set()
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    own_store = store is None
    store = store or open_store(settings=settings)
    lock = make_lock(store.engine)
    manager = None
    metrics = None
    watching = threading.Event()     # set when the daemon ends, however it ends
    try:
        if not acquire(lock, settings.manager.lock, stop=stop):
            log.info("stopped while waiting for the manager lock")
            return 0
        executor = executor or make_executor(settings, dry_run=dry_run)
        manager = Manager(store, executor, settings, clock=clock)
        manager.mark_profiling_nodes()   # an unknown [profiler] node: one line, exit 2
        log.info("manager started: store %s, policy %s, period %.0f s, poll %.1f s%s",
                 store.url, settings.manager.policy, settings.manager.period_s,
                 settings.manager.poll_s, " (dry run: no container is touched)"
                 if dry_run else "")
        if settings.manager.metrics_port is not None and not once:
            from andreas.manager.exporter import manager_collector
            from andreas.metrics import serve

            metrics = serve([manager_collector(manager)],
                            address=settings.manager.metrics_address,
                            port=settings.manager.metrics_port)
        from andreas.optimizer.kernels import warm
        warm(notice=log.info)   # the first decision need not wait for the compiler
        if not once:
            executor.watch(manager.watched_nodes, manager.wake, watching)
        run_loop(manager, stop, once=once, lock=lock)
        log.info("manager stopped; running containers are left running and will be "
                 "adopted at the next start")
        return 0
    finally:
        watching.set()
        if metrics is not None:
            metrics.close()
        if manager is not None:
            manager.close()
        lock.release()
        if own_store:
            store.dispose()
