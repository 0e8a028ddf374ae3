"""A grid of simulations (scenario x arrival kind x N x seed x policy), aggregated.

Every (trace, policy) pair is one task; the trace is generated where the task runs from
its seed, so only a few numbers cross process boundaries. Tasks run in a local process
pool, or on a Dask cluster (``dask``: a scheduler address), or only one shard of them
(``Grid.shard``: every K-th task from the I-th, so a Slurm job array of K tasks runs the
grid and ``simulator.shards`` merges the parts). The headline figures are the ones the
papers report: each method's mean total cost, and the mean percentage reduction (eq. 3)
of rg against the best first-principle method of the same trace and of pr against rg.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

from andreas.simulator.results import SimOptions, reduction_pct

BASELINES = ("fifo", "edf", "priority")
Task = tuple[int, str, int, int, str]     # scenario, arrival, N, seed, policy


@dataclass(frozen=True, kw_only=True)
class Grid:
    scenarios: tuple[int, ...] = (1,)
    arrivals: tuple[str, ...] = ("exponential",)
    nodes: tuple[int, ...] = (10, 20, 50)
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    policies: tuple[str, ...] = ("fifo", "edf", "priority", "greedy", "rg", "pr")
    cloud: bool = False

    def traces(self) -> list[tuple[int, str, int, int]]:
        return list(itertools.product(self.scenarios, self.arrivals, self.nodes, self.seeds))

    def tasks(self, shard: tuple[int, int] = (1, 1)) -> list[Task]:
        """(scenario, arrival, N, seed, policy) of the grid in a fixed order; with ``shard``
        (I, K), 1 <= I <= K, only tasks I, I + K, I + 2K, ... (1-based): the K shards
        partition the grid and each gets a mix of small and large traces."""
        index, count = shard
        if not 1 <= index <= count:
            raise ValueError(f"shard: must be I/K with 1 <= I <= K, got {index}/{count}")
        every = [(*t, p) for t in self.traces() for p in self.policies]
        return every[index - 1::count]


def run_task(scenario: int, arrival: str, n: int, seed: int, policy: str, cloud: bool,
             options: SimOptions, tariff: Any = None) -> dict[str, Any]:
    """One simulation, reduced to its summary row (runs in a worker process). ``tariff``:
    a ``formats.tariff.TariffFile`` that prices the generated trace's energy (a few tuples
    cross the process boundary, not the trace)."""
    from andreas.simulator.engine import simulate
    from andreas.simulator.generate import generate_trace

    trace = generate_trace(n_nodes=n, scenario=scenario, arrival=arrival, seed=seed,
                           cloud=cloud)
    if tariff is not None:
        from andreas.costs import with_tariff
        trace = replace(trace, energy=with_tariff(trace.energy, tariff))
    if policy == "bound":    # the trace's lower bound (simulator/bounds.py), not a policy
        from andreas.simulator.bounds import bound_row
        row = bound_row(trace, power_off_idle=options.power_off_idle)
        row.update(late_jobs=None, optimizer_mean_s=None)
    else:
        row = simulate(trace, policy, replace(options, seed=seed)).summary()
        row.pop("options")
    row.update(scenario=scenario, arrival=arrival, nodes=n, seed=seed, jobs=len(trace.jobs))
    return row


def run_sweep(grid: Grid, options: SimOptions, *, workers: int = 1,
              show_progress: bool = True, tariff: Any = None,
              shard: tuple[int, int] = (1, 1), dask: str | None = None
              ) -> list[dict[str, Any]]:
    """The (trace, policy) tasks of the grid (of one ``shard``), in a local pool of
    ``workers`` processes or on the Dask scheduler at ``dask``; ``tariff`` (a
    ``TariffFile``) prices every trace. Rows sorted by trace and policy."""
    tasks = grid.tasks(shard)
    rows: list[dict[str, Any]] = []
    from rich.progress import Progress

    with Progress(disable=not show_progress) as bar:
        task = bar.add_task("simulations", total=len(tasks))
        if dask is not None:
            results = _on_dask(dask, tasks, grid.cloud, options, tariff)
        else:
            from andreas.optimizer.warmup import warm
            from andreas.simulator.compare import _notice
            warm(notice=_notice if show_progress else None)   # forked workers inherit it
            results = _in_pool(workers, tasks, grid.cloud, options, tariff)
        for row in results:
            rows.append(row)
            bar.advance(task)
    rows.sort(key=sort_key)
    return rows


def sort_key(row: dict[str, Any]) -> tuple:
    return (row["scenario"], row["arrival"], row["nodes"], row["seed"], row["policy"])


def _in_pool(workers: int, tasks: Sequence[Task], cloud: bool, options: SimOptions, tariff: Any
             ) -> Iterator[dict[str, Any]]:
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        futures = [pool.submit(run_task, *t, cloud, options, tariff) for t in tasks]
        for fut in as_completed(futures):
            yield fut.result()


def _on_dask(address: str, tasks: Sequence[Task], cloud: bool, options: SimOptions, tariff: Any
             ) -> Iterator[dict[str, Any]]:
    """The same tasks on a Dask cluster (``distributed``, the ``andreas[dask]`` extra):
    each is one ``run_task`` call on a worker, which compiles the kernels itself once."""
    import distributed   # a missing one is one line naming andreas[dask] (andreas.entry)
    with distributed.Client(address) as client:
        futures = [client.submit(run_task, *t, cloud, options, tariff, pure=False)
                   for t in tasks]
        for fut in distributed.as_completed(futures):
            yield fut.result()


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and spread per (scenario, arrival, N, policy) plus the headline reductions."""
    by_trace: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by_trace[(r["scenario"], r["arrival"], r["nodes"], r["seed"])][r["policy"]] = r
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for (sc, arr, n, _), per_policy in by_trace.items():
        lower = per_policy.get("bound", {}).get("total_cost")
        base = [per_policy[b]["total_cost"] for b in BASELINES if b in per_policy]
        best_base = min(base) if base else None
        for policy, r in per_policy.items():
            groups[(sc, arr, n, policy)].append({
                **r,
                "vs_best_baseline_pct": (reduction_pct(best_base, r["total_cost"])
                                         if best_base is not None else None),
                "vs_rg_pct": (reduction_pct(per_policy["rg"]["total_cost"], r["total_cost"])
                              if "rg" in per_policy else None),
                "vs_bound": (r["total_cost"] / lower if lower else None),
            })
    out = []
    for (sc, arr, n, policy), items in sorted(groups.items()):
        def stats(key: str, items: list = items) -> tuple[float, float]:
            values = [i[key] for i in items if i.get(key) is not None]
            if not values:
                return (float("nan"), float("nan"))
            return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1
                                              else 0.0)
        row = {"scenario": sc, "arrival": arr, "nodes": n, "policy": policy,
               "runs": len(items)}
        for key in ("total_cost", "energy_cost", "tardiness_cost", "late_jobs",
                    "optimizer_mean_s", "wall_s", "vs_best_baseline_pct", "vs_rg_pct",
                    "vs_bound", "migrations", "preemptions", "resizes", "lost_work_s",
                    "wait_s", "slow_s"):
            row[f"{key}_mean"], row[f"{key}_std"] = stats(key)
        out.append(row)
    return out


def headline(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Mean reduction over the whole grid per (scenario, arrival): the issue's targets."""
    agg = aggregate(rows)
    out: dict[str, dict[str, float | None]] = {}
    for (sc, arr), grouped in itertools.groupby(
            sorted(agg, key=lambda r: (r["scenario"], r["arrival"])),
            key=lambda r: (r["scenario"], r["arrival"])):
        items = list(grouped)
        pick = {p: [i for i in items if i["policy"] == p] for p in ("rg", "pr")}
        key = f"scenario {sc}, {arr}"
        out[key] = {
            "rg_vs_best_baseline_pct": statistics.fmean(
                i["vs_best_baseline_pct_mean"] for i in pick["rg"]) if pick["rg"] else None,
            "pr_vs_best_baseline_pct": statistics.fmean(
                i["vs_best_baseline_pct_mean"] for i in pick["pr"]) if pick["pr"] else None,
            "pr_vs_rg_pct": statistics.fmean(
                i["vs_rg_pct_mean"] for i in pick["pr"]) if pick["pr"] else None,
        }
    return out
