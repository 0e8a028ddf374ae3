"""Engine benchmark: andreas's simulator engine against a minimal SimPy model of one trace.

The evidence behind docs/ENGINE.md. One trace of rigid multi-resource tasks (whole GPUs,
GPU slices that share a GPU and slow each other down, CPU, memory, GPU memory) is
replayed twice under first-fit with no periodic rescheduling:

- by ``andreas.simulator.engine.simulate`` (policy ``first-fit``, ``period_s=0``);
- by the SimPy model below, process-oriented as the genetic-scheduling paper builds its
  simulator: one process per job (arrival, wait to be placed, run, release), one
  scheduler process woken by arrivals and completions that places the waiting jobs with
  the same ``andreas.optimizer.packing.decide_first_fit`` call, and interrupts for the
  jobs whose co-residents change (the engine's re-pacing under interference).

The two must place every job on the same node and GPUs and give it the same start and
completion times (a correctness cross-check; the script exits 1 if a placement differs or
a time by more than 1e-6 s). It then prints, per size, the wall and CPU time of each,
SimPy / andreas, the same without the first-fit calls, trace events (arrivals +
completions) per second, scheduler decisions, and with cProfile the five functions each
spends most of its own time in (over all code, and over the engine's own machinery). It
never asserts a time. SimPy is not a dependency of andreas: without it the script says
so and exits 0. Run: ``bash scripts/bench.sh engine`` or this file with python
(``--jobs 500 --nodes 50`` for one size; the default sizes take about 12 min here).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from andreas.feasibility import check_plan
from andreas.interference import Sharing, thetas
from andreas.model import GPU_MILLI, Config, Demand, Job, Node, Snapshot, Trace
from andreas.optimizer.packing import decide_first_fit
from andreas.resources import Ledger, held_milli
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions

try:
    import simpy
except ImportError:            # benchmarks are not the test suite; SimPy is only the check
    simpy = None

SIZES = ((500, 50), (1000, 200), (2000, 100))
TOLERANCE_S = 1e-6
EPS = 1e-6                     # the engine's: events within EPS of the clock are "now"


# -- the trace ------------------------------------------------------------------------------
def make_trace(n_jobs: int, n_nodes: int, seed: int, load: float = 0.9) -> Trace:
    """Half the nodes 4 x V100 (32 GiB), half 2 x T4 (16 GiB), with CPU and memory. Jobs:
    40 % whole GPUs (1, 2 or 4; 4 only fits a V100 node), 60 % slices of 100-700
    milli-GPU on 1 or 2 GPUs, some with memory peaks (collisions slow the residents).
    Poisson arrivals offering ``load`` times the cluster's GPUs in work (at V100 speed; T4s
    are 1.8x slower and fragmentation idles GPUs: at 0.9 about 7 % of the jobs wait)."""
    rng = np.random.default_rng(seed)
    kinds = (("V100", 4, 32_000, 256_000, 32_768), ("T4", 2, 16_000, 128_000, 16_384))
    nodes = tuple(Node(name=f"n{i + 1:04d}", gpu_type=t, gpus=g, cpu_milli=c, memory_mib=m,
                       gpu_memory_mib=gm, power_w=tuple(150.0 + 250.0 * k for k in range(g + 1)))
                  for i, (t, g, c, m, gm) in ((i, kinds[i % 2]) for i in range(n_nodes)))
    specs = []
    for _ in range(n_jobs):
        if rng.random() < 0.4:
            gpus = int(rng.choice([1, 1, 2, 4]))
            demand = Demand(gpus=gpus, cpu_milli=int(rng.integers(1, 9)) * 1000,
                            memory_mib=int(rng.integers(4, 33)) * 1000)
        else:
            p = float(rng.choice([0.0, 0.0, 0.1, 0.3]))
            demand = Demand(gpus=int(rng.choice([1, 1, 1, 2])),
                            gpu_milli=int(rng.integers(1, 8)) * 100,
                            cpu_milli=int(rng.integers(1, 5)) * 500,
                            memory_mib=int(rng.integers(1, 17)) * 1000,
                            gpu_memory_mib=int(rng.integers(1, 7)) * 1000,
                            gpu_memory_peak_mib=int(rng.integers(1, 5)) * 1000 if p else 0,
                            peak_probability=p)
        epoch_s = float(rng.uniform(30.0, 600.0))
        epochs = int(rng.integers(1, 40))
        times = {"V100": (round(epoch_s, 3),) * 4}
        if demand.gpus <= 2:
            times["T4"] = (round(epoch_s * 1.8, 3),) * 2
        specs.append((demand, epochs, times))
    # GPU-seconds a job asks for on a V100 (slices count their share)
    work = [held_milli(d) / GPU_MILLI * e * t["V100"][0] for d, e, t in specs]
    capacity = sum(n.gpus for n in nodes)
    gaps = rng.exponential(float(np.mean(work)) / (load * capacity), size=n_jobs)
    mean_s = float(np.mean([e * t["V100"][0] for _, e, t in specs]))
    jobs = tuple(Job(id=f"j{k + 1:05d}", submit_s=round(float(s), 3),
                     due_s=round(float(s), 3) + 10 * mean_s, weight=0.01, epochs=epochs,
                     epoch_time_s=times, demand=demand)
                 for k, ((demand, epochs, times), s) in enumerate(zip(specs, np.cumsum(gaps))))
    return Trace(nodes=nodes, jobs=jobs, name=f"engine-bench-j{n_jobs}-n{n_nodes}-s{seed}")


# -- the andreas engine ---------------------------------------------------------------------
def run_andreas(trace: Trace) -> tuple[dict[str, tuple[float, float]], dict[str, Any]]:
    res = simulate(trace, "first-fit", SimOptions(period_s=0))
    times = {r.id: (r.first_start_s, r.completion_s) for r in res.jobs}
    where = {a.job: (a.node, a.gpu_ids) for a in res.attempts}
    return times, {"decisions": res.optimizer_calls, "policy_s": res.optimizer_total_s,
                   "placements": where}


# -- the SimPy model ------------------------------------------------------------------------
@dataclass(eq=False)
class Task:
    """A job in the SimPy model; its pace follows the engine's (progress in epochs)."""

    spec: Job
    placed: Any = None          # event the scheduler triggers when it starts the job
    proc: Any = None
    timing: bool = False        # the process waits on its completion timeout (interruptible)
    node: int = -1
    slots: tuple[int, ...] = ()
    solo_epoch_s: float = 0.0
    epoch_s: float = 0.0
    slow: float = 1.0
    base: float = 0.0           # epochs done at base_s
    base_s: float = 0.0
    start_s: float = math.nan
    end_s: float = math.nan

    def finish_s(self) -> float:
        return self.base_s + (self.spec.epochs - self.base) * self.epoch_s

    def progress(self, now: float) -> float:
        return self.base + max(0.0, now - self.base_s) / self.epoch_s

    def repace(self, now: float, slow: float) -> None:
        self.base = self.progress(now)
        self.base_s = max(now, self.base_s)
        self.slow, self.epoch_s = slow, self.solo_epoch_s * slow


class SimPyModel:
    def __init__(self, trace: Trace, sharing: Sharing) -> None:
        assert simpy is not None
        self.env = simpy.Environment()
        self.trace, self.sharing = trace, sharing
        self.ledger = Ledger(trace.nodes)
        self.waiting: dict[str, Task] = {}
        self.running: dict[str, Task] = {}
        self.done: list[Task] = []
        self.dirty: set[int] = set()
        self.wake = self.env.event()
        self.rng = np.random.default_rng(0)
        self.decisions = 0
        self.policy_s = 0.0
        for job in trace.jobs:
            task = Task(spec=job)
            task.proc = self.env.process(self.job(task))
        self.env.process(self.scheduler())

    def poke(self) -> None:
        if not self.wake.triggered:
            self.wake.succeed()

    def job(self, task: Task):
        env = self.env
        yield env.timeout(task.spec.submit_s - env.now)
        task.placed = env.event()
        self.waiting[task.spec.id] = task
        self.poke()
        yield task.placed
        task.timing = True
        while True:
            try:
                yield env.timeout(task.finish_s() - env.now)
                break
            except simpy.Interrupt:     # co-residents changed: the new pace is in task
                continue
        task.end_s = env.now
        demand = task.spec.demand
        assert demand is not None
        self.ledger.release(demand, task.node, task.slots, task.spec.id)
        if demand.shared:
            self.dirty.add(task.node)
        del self.running[task.spec.id]
        self.done.append(task)
        self.poke()

    def scheduler(self):
        env = self.env
        while True:
            yield self.wake
            self.wake = env.event()
            self.repace()
            self.decide()
            self.repace()

    def decide(self) -> None:
        """One scheduling event: the snapshot the engine would build, the same first-fit
        call, the engine's feasibility check of the plan, then the starts."""
        if not (self.waiting or self.running):
            return
        now, names = self.env.now, [n.name for n in self.trace.nodes]
        jobs = [replace(t.spec, epochs_done=min(t.progress(now), t.spec.epochs - EPS),
                        running=Config(node=names[t.node], gpus=len(t.slots),
                                       gpu_ids=t.slots, slowdown=t.slow - 1.0))
                for t in self.running.values()]
        jobs += [t.spec for t in self.waiting.values()]
        snap = Snapshot(now_s=now, nodes=self.trace.nodes, jobs=tuple(jobs),
                        energy=self.trace.energy, params=self.trace.params,
                        name=self.trace.name)
        start = time.perf_counter()
        plan = decide_first_fit(snap, self.rng)
        self.policy_s += time.perf_counter() - start
        self.decisions += 1
        check_plan(snap, plan)
        for a in plan.assignments:
            task = self.waiting.pop(a.job, None)
            if task is None:
                continue                        # a running job keeps its GPUs
            demand = task.spec.demand
            assert demand is not None
            node = self.ledger.index[a.node]
            self.ledger.place(demand, node, a.gpu_ids, a.job)
            if demand.shared:
                self.dirty.add(node)
            gpu_type = self.trace.nodes[node].gpu_type
            assert gpu_type is not None
            task.node, task.slots = node, a.gpu_ids
            task.solo_epoch_s = task.epoch_s = task.spec.epoch_time_s[gpu_type][demand.gpus - 1]
            task.base, task.base_s, task.start_s = 0.0, self.env.now, self.env.now
            self.running[a.job] = task
            task.placed.succeed()

    def repace(self) -> None:
        """The engine's interference charge: the slowest worker sets the job's pace."""
        if not self.dirty:
            return
        for task in self.running.values():
            if task.node not in self.dirty:
                continue
            theta = 0.0
            for slot in task.slots:
                residents = self.ledger.on_gpu(task.node, slot)
                if len(residents) > 1:
                    k = next(k for k, (owner, _) in enumerate(residents)
                             if owner == task.spec.id)
                    theta = max(theta, thetas(residents, self.sharing)[k])
            if abs(1.0 + theta - task.slow) > 1e-12:
                task.repace(self.env.now, 1.0 + theta)
                if task.timing:
                    task.proc.interrupt()
        self.dirty.clear()

    def run(self) -> int:
        """Step to the end; the number of SimPy kernel events processed."""
        env, steps = self.env, 0
        while env.peek() < math.inf:
            env.step()
            steps += 1
        return steps


def run_simpy(trace: Trace) -> tuple[dict[str, tuple[float, float]], dict[str, Any]]:
    model = SimPyModel(trace, SimOptions().sharing)
    steps = model.run()
    if len(model.done) != len(trace.jobs):
        raise RuntimeError(f"SimPy model: {len(trace.jobs) - len(model.done)} jobs never ran")
    times = {t.spec.id: (t.start_s, t.end_s) for t in model.done}
    names = [n.name for n in trace.nodes]
    where = {t.spec.id: (names[t.node], t.slots) for t in model.done}
    return times, {"decisions": model.decisions, "policy_s": model.policy_s,
                   "kernel_events": steps, "placements": where}


# -- the comparison -------------------------------------------------------------------------
def timed(fn, trace: Trace) -> tuple[dict[str, tuple[float, float]], dict[str, Any]]:
    """The replay's job times and figures, with its wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    times, stats = fn(trace)
    stats["wall_s"] = time.perf_counter() - wall
    stats["cpu_s"] = time.process_time() - cpu
    return times, stats


def best_of(repeat: int, trace: Trace) -> tuple[list[dict[str, tuple[float, float]]],
                                                 list[dict[str, Any]]]:
    """Each engine ``repeat`` times, alternating; per engine the run of least wall time."""
    runs: list[list[tuple[dict[str, tuple[float, float]], dict[str, Any]]]] = [[], []]
    for _ in range(repeat):
        for k, fn in enumerate((run_andreas, run_simpy)):
            runs[k].append(timed(fn, trace))
    best = [min(r, key=lambda run: run[1]["wall_s"]) for r in runs]
    return [b[0] for b in best], [b[1] for b in best]


def max_difference(a: dict[str, tuple[float, float]],
                   b: dict[str, tuple[float, float]]) -> tuple[float, str]:
    """Largest |start| or |finish| difference over all jobs, and the job it is on."""
    if a.keys() != b.keys():
        return math.inf, f"job sets differ: {sorted(a.keys() ^ b.keys())[:5]}"
    worst, where = 0.0, ""
    for job, (s1, f1) in a.items():
        s2, f2 = b[job]
        d = max(abs(s1 - s2), abs(f1 - f2))
        if d > worst:
            worst, where = d, job
    return worst, where


# What is the engine's own machinery (not the policy, the ledger or the plan check, which
# both share): the event loop, the snapshot's dataclass copies, the SimPy kernel.
ENGINE_FILES = ("simulator/engine.py", "simulator/accounts.py", "simulator/powerdown.py",
                "simulator/sharing.py", "simulator/jobrun.py", "simpy/", "bench_engine.py",
                "dataclasses.py")


def profile(fn, trace: Trace, top: int = 5) -> dict[str, list[tuple[str, float, float]]]:
    """The ``top`` functions by own time, over everything and over the engine's own code:
    (function, own seconds, share of the profiled total)."""
    prof = cProfile.Profile()
    prof.enable()
    fn(trace)
    prof.disable()
    table = pstats.Stats(prof, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in table.values()) or 1.0
    rows = sorted(table.items(), key=lambda kv: -kv[1][2])

    def name(path: str, line: int, func: str) -> str:
        return f"{func} ({Path(path).parent.name}/{Path(path).name}:{line})" if line else func

    def pick(keep) -> list[tuple[str, float, float]]:
        return [(name(*key), v[2], v[2] / total) for key, v in rows if keep(key[0])][:top]

    return {"all": pick(lambda path: True),
            "engine": pick(lambda path: any(f in path.replace("\\", "/")
                                            for f in ENGINE_FILES))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, help="one size: this many jobs (with --nodes)")
    ap.add_argument("--nodes", type=int, help="one size: this many nodes (with --jobs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", type=float, default=0.9,
                    help="offered GPU work over GPU capacity (at V100 speed)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="replays per engine, alternating; the least wall time counts")
    ap.add_argument("--profile", choices=("first", "all", "none"), default="first",
                    help="cProfile both engines at the first size (default), every size, "
                         "or none")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if simpy is None:
        print("bench_engine: skipped, SimPy is not installed (it is only this benchmark's "
              "cross-check, not a dependency of andreas): pip install simpy")
        return 0
    if (args.jobs is None) != (args.nodes is None):
        ap.error("--jobs and --nodes go together")
    sizes = ((args.jobs, args.nodes),) if args.jobs is not None else SIZES
    print(f"SimPy {simpy.__version__}; policy first-fit, no periodic rescheduling, "
          f"seed {args.seed}, load {args.load}")
    print("wall: whole replay (least of --repeat); cpu ratio: the same runs' CPU seconds; "
          "rest: wall minus the first-fit calls (the same work in both); "
          "ev/s: (arrivals + completions) per wall second")
    print(f"{'jobs':>6} {'nodes':>5} {'decisions':>9} {'andreas s':>9} {'simpy s':>8} "
          f"{'simpy/andreas':>13} {'cpu ratio':>9} {'rest a s':>8} {'rest s s':>8} "
          f"{'rest ratio':>10} "
          f"{'andreas ev/s':>12} {'simpy ev/s':>10} {'max diff s':>10}")
    rows, ok = [], True
    for k, (n_jobs, n_nodes) in enumerate(sizes):
        trace = make_trace(n_jobs, n_nodes, args.seed, args.load)
        (a_times, s_times), (a_stats, s_stats) = best_of(args.repeat, trace)
        a_wall, s_wall = a_stats["wall_s"], s_stats["wall_s"]
        cpu_ratio = s_stats["cpu_s"] / a_stats["cpu_s"]
        diff, where = max_difference(a_times, s_times)
        moved = sorted(j for j, p in a_stats["placements"].items()
                       if s_stats["placements"].get(j) != p)
        events = 2 * n_jobs                       # arrivals + completions
        decisions = (f"{a_stats['decisions']}" if a_stats["decisions"] == s_stats["decisions"]
                     else f"{a_stats['decisions']}/{s_stats['decisions']}")
        a_rest, s_rest = a_wall - a_stats["policy_s"], s_wall - s_stats["policy_s"]
        print(f"{n_jobs:>6} {n_nodes:>5} {decisions:>9} {a_wall:>9.2f} {s_wall:>8.2f} "
              f"{s_wall / a_wall:>13.2f} {cpu_ratio:>9.2f} {a_rest:>8.2f} {s_rest:>8.2f} "
              f"{s_rest / a_rest:>10.2f} "
              f"{events / a_wall:>12.0f} {events / s_wall:>10.0f} {diff:>10.1e}")
        if diff > TOLERANCE_S:
            ok = False
            a, s = a_times.get(where), s_times.get(where)
            print(f"  MISMATCH on {where}: andreas (start, end) {a}, SimPy {s}")
        if moved:
            ok = False
            j = moved[0]
            print(f"  {len(moved)} jobs placed differently, e.g. {j}: andreas "
                  f"{a_stats['placements'][j]}, SimPy {s_stats['placements'].get(j)}")
        row: dict[str, Any] = {
            "jobs": n_jobs, "nodes": n_nodes, "andreas_s": a_wall, "simpy_s": s_wall,
            "ratio_simpy_to_andreas": s_wall / a_wall, "andreas_cpu_s": a_stats["cpu_s"],
            "simpy_cpu_s": s_stats["cpu_s"], "cpu_ratio": cpu_ratio, "andreas_rest_s": a_rest,
            "simpy_rest_s": s_rest, "rest_ratio": s_rest / a_rest, "events": events,
            "andreas_events_per_s": events / a_wall, "simpy_events_per_s": events / s_wall,
            "simpy_kernel_events": s_stats["kernel_events"],
            "andreas_decisions": a_stats["decisions"], "simpy_decisions": s_stats["decisions"],
            "andreas_policy_s": a_stats["policy_s"], "simpy_policy_s": s_stats["policy_s"],
            "max_difference_s": diff, "worst_job": where, "placed_differently": len(moved)}
        if args.profile == "all" or (args.profile == "first" and k == 0):
            for name, fn in (("andreas", run_andreas), ("simpy", run_simpy)):
                prof = profile(fn, trace)
                row[f"{name}_profile"] = prof
                for part, title in (("all", "all code"), ("engine", "its own machinery")):
                    print(f"  {name}, cProfile own time, top {len(prof[part])} of {title}:")
                    for func, own, share in prof[part]:
                        print(f"    {share:>6.1%} {own:>7.2f} s  {func}")
        rows.append(row)
    print(f"same placements and start/finish times within {TOLERANCE_S:g} s: "
          f"{'yes' if ok else 'NO'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
