"""Run several policies on one trace, in parallel processes, with a live progress bar.

Each policy's simulation is independent, so they run in a process pool; workers report
(simulated time, jobs done) through a managed dict that the parent turns into one rich
progress bar per policy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import Manager
from typing import Any

from andreas.model import Trace
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions, SimResult, reduction_pct

REPORT_EVERY_S = 0.25


def default_workers(tasks: int) -> int:
    return max(1, min(tasks, os.cpu_count() or 1))


def run_policies(trace: Trace, policies: Sequence[str], options: SimOptions, *,
                 workers: int | None = None, show_progress: bool = True) -> list[SimResult]:
    """Simulate every policy on the same trace; results in the order of ``policies``."""
    workers = min(workers or default_workers(len(policies)), len(policies))   # no idle forks
    if workers <= 1:
        return [_run_inline(trace, p, options, show_progress) for p in policies]
    from andreas.optimizer.warmup import warm
    warm(notice=_notice if show_progress else None)   # once here; forked workers inherit it
    with Manager() as manager:
        board = manager.dict()
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {p: pool.submit(_worker, trace, p, options, board) for p in policies}
            _watch(trace, futures, board, show_progress)
            return [futures[p].result() for p in policies]


def _notice(message: str) -> None:
    import sys
    print(f"andreas: {message}", file=sys.stderr, flush=True)


def reduction_matrix(results: Sequence[SimResult]) -> dict[str, dict[str, float]]:
    """pct[row][col]: how much cheaper ``col`` is than ``row``, in % of row (eq. 3)."""
    return {a.policy: {b.policy: reduction_pct(a.total_cost, b.total_cost) for b in results}
            for a in results}


def _worker(trace: Trace, policy: str, options: SimOptions, board: Any) -> SimResult:
    last = [0.0]

    def report(t: float, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= REPORT_EVERY_S or done == total:
            last[0] = now
            board[policy] = (t, done, total)

    return simulate(trace, policy, options, report)


def _run_inline(trace: Trace, policy: str, options: SimOptions, show: bool) -> SimResult:
    if not show:
        return simulate(trace, policy, options)
    with _progress() as bar:
        task = bar.add_task(policy, total=len(trace.jobs), sim="")
        t0 = min((j.submit_s for j in trace.jobs), default=0.0)

        def report(t: float, done: int, total: int) -> None:
            bar.update(task, completed=done, sim=_sim_time(t - t0))

        return simulate(trace, policy, options, report)


def _watch(trace: Trace, futures: dict[str, Future], board: Any, show: bool) -> None:
    pending = set(futures.values())
    if not show:
        wait(pending)
        return
    t0 = min((j.submit_s for j in trace.jobs), default=0.0)
    with _progress() as bar:
        tasks = {p: bar.add_task(p, total=len(trace.jobs), sim="") for p in futures}
        while pending:
            _, pending = wait(pending, timeout=REPORT_EVERY_S, return_when=FIRST_COMPLETED)
            for policy, task in tasks.items():
                state = board.get(policy)
                if state:
                    bar.update(task, completed=state[1], sim=_sim_time(state[0] - t0))
        for policy, task in tasks.items():
            if futures[policy].exception() is None:
                bar.update(task, completed=len(trace.jobs))


def _progress():
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)
    return Progress(TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("jobs done, simulated {task.fields[sim]}"), TimeElapsedColumn(),
                    transient=False)


def _sim_time(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"
