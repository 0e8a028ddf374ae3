"""``andreas manager run``: store, lease, executor, signals, loop.

The manager waits for the manager lease (``lock.py``), then fences every write of its
store with the lease's token (``andreas.store.lease.install_fence``) and renews it in the
background. Once another manager holds the lease this one stops acting at once (its next
write or check raises LeaseLost) and exits with code 1, so systemd restarts it as a
standby.

SIGTERM / SIGINT set a stop event: the tick in progress finishes, the period timer stops,
the executor's event watchers stop, the lease is given back and the process exits 0.
Running containers are left running; the next manager adopts them (reconciliation at
start).

Container events (``executor.watch``) wake the loop for the nodes the last tick read
(:meth:`Manager.watched_nodes`), and so do submissions and cancellations on this host
(``andreas.infra.nudge``); polling every ``poll_s`` stays the source of truth.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from andreas.config import ExecutorKind, ManagerSettings, Settings
from andreas.executor.base import Executor
from andreas.infra.fields import check_field
from andreas.infra.nudge import Listener, listen
from andreas.manager.decider import make_decider
from andreas.manager.lock import Lease, LeaseLost, Renewer, acquire, make_lock
from andreas.manager.loop import run_loop
from andreas.manager.manager import Manager
from andreas.store.engine import Store
from andreas.store.opener import open_store
from andreas.store.lease import install_fence
from andreas.store.owners import require_manager

if TYPE_CHECKING:
    from andreas.metrics import MetricsServer

log = logging.getLogger("andreas.manager")


def make_executor(settings: Settings, *, dry_run: bool) -> Executor:
    """The executor ``[executor] kind`` names (Docker or Slurm), or the dry-run one that
    only records (imported on use). A Slurm output directory the manager cannot see is an
    InputError naming the key."""
    if dry_run:
        from andreas.executor.dryrun import DryRunExecutor

        return DryRunExecutor(settings=settings.executor)
    if settings.executor.kind == ExecutorKind.SLURM:
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
        _stop_on_signals(stop)
    own_store = store is None
    store = store or open_store(settings=settings)
    lock = make_lock(store.engine, ttl_s=settings.manager.lease_s)
    manager = None
    metrics = None
    renewer = None
    unfence = None
    wake = None
    watching = threading.Event()     # set when the daemon ends, however it ends
    try:
        with store.session() as s:
            require_manager(s)          # a person's or the reporter's account: one line
        if not acquire(lock, settings.manager.lock, stop=stop):
            log.info("stopped while waiting for the manager lease")
            return 0
        if isinstance(lock, Lease):
            unfence = install_fence(store.engine, lock.fence_token)
            renewer = Renewer(lock).start()
        executor = executor or make_executor(settings, dry_run=dry_run)
        manager = Manager(store, executor, settings, clock=clock, fence=lock.check,
                          decider=make_decider(0.0 if once else
                                               settings.manager.optimizer_idle_s))
        manager.mark_profiling_nodes()   # an unknown [profiler] node: one line, exit 2
        log.info("manager started: store %s, policy %s, period %.0f s, poll %.1f s%s",
                 store.url, settings.manager.policy, settings.manager.period_s,
                 settings.manager.poll_s, " (dry run: no container is touched)"
                 if dry_run else "")
        if settings.manager.metrics_port is not None and not once:
            metrics = _serve_metrics(manager, settings.manager.metrics_address,
                                     settings.manager.metrics_port)
        manager.decider.start()   # the first decision need not wait for the compiler
        if not once:
            executor.watch(manager.watched_nodes, manager.wake, watching)
            wake = listen(store.wake_key, manager.wake_now)   # submissions: at once
        run_loop(manager, stop, once=once, lock=lock)
        log.info("manager stopped; running containers are left running and will be "
                 "adopted at the next start")
        return 0
    except LeaseLost as e:
        log.error("%s: this manager stops acting and exits (1); restarted, it waits as a "
                  "standby", e)
        return 1
    finally:
        watching.set()
        _shut_down(renewer, wake, metrics, manager)
        lock.release()
        if unfence is not None:
            unfence()
        if own_store:
            store.dispose()


def _stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT finish the current tick, then stop the daemon."""
    def on_signal(signum, _frame):
        log.info("%s received: finishing the current tick, then stopping",
                 signal.Signals(signum).name)
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _serve_metrics(manager: Manager, address: str, port: int) -> MetricsServer:
    """The manager's ``/metrics`` endpoint (prometheus_client imported only here)."""
    from andreas.manager.exporter import manager_collector
    from andreas.metrics import serve

    return serve([manager_collector(manager)], address=address, port=port)


def _shut_down(renewer: Renewer | None, wake: Listener | None, metrics: MetricsServer | None,
               manager: Manager | None) -> None:
    """Stop, in this order, what the daemon started before its lease is released."""
    if renewer is not None:
        renewer.stop()
    if wake is not None:
        wake.close()
    if metrics is not None:
        metrics.close()
    if manager is not None:
        manager.close()
