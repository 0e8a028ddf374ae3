"""Genetic scheduler benchmark (policy ``ga``, the genetic-scheduling paper): its time per
decision and the GPU utilisation it reaches against First-Fit, Round-Robin and Tetris.

1. One scheduling event at 100 nodes: a PAI-like cluster (the paper's Table 1 mix: 2-GPU
   P100 and T4 nodes, 8-GPU V100-class nodes) whose GPUs are 80 % allocated by running
   tasks, and a queue of task instances (a task's instances share one demand, as the
   paper's Figure 2; most ask a slice of a GPU). Prints the median time of ``ga`` over a
   few runs and its ratio to First-Fit's on the same snapshot, and the allocation each
   reaches (the GA's own objective).
2. Replays at several offered loads (``--loads``): imports of Alibaba's openb trace
   (default; ``--generated``: PAI-like traces), 3 seeds each, simulated under first-fit,
   round-robin, tetris, best-fit and ga (``--policies``; ga backfills by default:
   ``ga-nobackfill`` is ga without, ``ga-allocation`` and ``ga-paper`` are ga without it
   and with Algorithm 3's plain fitness, next-fit and strict; ``first-fit-backfill`` is
   First-Fit under ga's reservation, the control for what the GA adds). Three
   measures of GPU utilisation: "time-avg", the milli-GPU allocated integrated over the
   scheduling window (first submission to last start: after it nothing waits or
   arrives, so no decision can change the allocation) over capacity x window (the
   simulator's ``gpu_utilization_scheduling``); "after event", the paper's Figure 10,
   the cluster's allocation right after each decision that had a queue, averaged over
   those decisions; "makespan", the simulator's ``gpu_utilization`` over the whole
   replay, drain included (on Alibaba's trace a few month-long tasks make the makespan,
   so this one is about the inverse of the last start of the longest task). Prints ga's
   ratio to Round-Robin and Tetris per load (the paper's targets: >= 1.10 x
   Round-Robin, >= Tetris) and how often the GA's own best beat its seeds.

The demand shapes of the event and of generated traces are illustrative (not Alibaba's): 55 % of the
instances ask 0.1-0.5 of a GPU, 20 % 0.6-0.8, 18 % one GPU, 5 % two, 2 % four or eight
(V100-class nodes only); CPU and memory in proportion. Times are reported, never
asserted. Run: ``python tests/benchmarks/bench_ga.py`` (``--quick``: one replay seed and
fewer tasks; ``--decoder``, ``--fitness`` pick ga's; ``--json`` keeps the numbers).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import andreas.simulator.engine as engine
from andreas.feasibility import check_plan
from andreas.model import Config, Demand, Job, Node, Snapshot, Trace
from andreas.optimizer import decide
from andreas.optimizer.genetic import NEXT_FIT, PackingGenome, allocation
from andreas.simulator.results import SimOptions

# (GPU type, GPUs per node, share of the nodes, CPU milli-cores, memory MiB, GPU memory MiB)
NODE_MIX = (("P100", 2, 0.42, 64_000, 512 * 1024, 16 * 1024),
            ("T4", 2, 0.26, 96_000, 512 * 1024, 15 * 1024),
            ("V100", 8, 0.32, 96_000, 512 * 1024, 32 * 1024))
SPEED = {"P100": 1.0, "T4": 1.3, "V100": 0.6}      # epoch time relative to a P100
POWER_W = {"P100": (120.0, 150.0), "T4": (120.0, 70.0), "V100": (200.0, 250.0)}
REPLAY_POLICIES = ("first-fit", "round-robin", "tetris", "best-fit", "ga")


def cluster(n_nodes: int) -> tuple[Node, ...]:
    counts = [max(1, round(share * n_nodes)) for _, _, share, *_ in NODE_MIX]
    counts[0] += n_nodes - sum(counts)
    nodes = []
    for (gpu_type, gpus, _, cpu, mem, gmem), count in zip(NODE_MIX, counts):
        idle, per_gpu = POWER_W[gpu_type]
        for _ in range(count):
            nodes.append(Node(name=f"n{len(nodes):03d}", gpu_type=gpu_type, gpus=gpus,
                              power_w=tuple(idle + per_gpu * g for g in range(gpus + 1)),
                              cpu_milli=cpu, memory_mib=mem, gpu_memory_mib=gmem))
    return tuple(nodes)


def task(rng: np.random.Generator, job_id: str, submit_s: float) -> Job:
    u = rng.random()
    if u < 0.55:
        gpus, milli = 1, int(rng.choice([100, 200, 250, 300, 400, 500]))
    elif u < 0.75:
        gpus, milli = 1, int(rng.choice([600, 700, 800]))
    elif u < 0.93:
        gpus, milli = 1, 1000
    elif u < 0.98:
        gpus, milli = 2, 1000
    else:
        gpus, milli = int(rng.choice([4, 8])), 1000
    epoch = float(rng.lognormal(np.log(120.0), 0.7))
    epochs = int(rng.integers(5, 30))
    types = ("V100",) if gpus > 2 else tuple(SPEED)
    return Job(id=job_id, submit_s=submit_s, due_s=submit_s + 3 * epoch * epochs,
               weight=0.01, epochs=epochs,
               epoch_time_s={t: (epoch * SPEED[t],) * 8 for t in types},
               demand=Demand(gpus=gpus, gpu_milli=milli,
                             cpu_milli=int(rng.choice([2, 4, 6, 8, 12])) * 1000 * gpus,
                             memory_mib=int(rng.choice([8, 16, 24, 32, 48])) * 1024 * gpus,
                             gpu_memory_mib=int(rng.choice([1, 2, 4, 6])) * 1024))


def instances(rng: np.random.Generator, prefix: str, submit_s: float, mean: float,
              limit: int) -> list[Job]:
    """A task's instances: one demand, submitted together."""
    proto = task(rng, prefix, submit_s)
    count = min(int(rng.geometric(1 / mean)), limit)
    return [dataclasses.replace(proto, id=f"{prefix}-{i}") for i in range(count)]


def replay_trace(seed: int, n_nodes: int, n_tasks: int, load: float,
                 mean_instances: float = 4.0) -> Trace:
    """Poisson arrivals of tasks at ``load`` times the rate that the GPUs could absorb."""
    rng = np.random.default_rng(seed)
    nodes = cluster(n_nodes)
    gpus = sum(n.gpus for n in nodes)
    work = 0.6 * 120.0 * np.exp(0.245) * 17 * mean_instances   # mean GPU-s of a task
    rate = load * gpus / work
    t, jobs, k = 0.0, [], 0
    while len(jobs) < n_tasks:
        t += float(rng.exponential(1 / rate))
        jobs += instances(rng, f"t{k:04d}", round(t, 3), mean_instances, n_tasks - len(jobs))
        k += 1
    return Trace(nodes=nodes, jobs=tuple(jobs), name=f"pai-like-n{n_nodes}-s{seed}")


def event_snapshot(seed: int, n_nodes: int = 100, waiting: int = 120,
                   allocated: float = 0.8) -> Snapshot:
    """Running tasks (placed First-Fit) until ``allocated`` of the milli-GPU is held, then
    ``waiting`` task instances in the queue."""
    rng = np.random.default_rng(seed)
    nodes = cluster(n_nodes)
    capacity = sum(n.gpus for n in nodes) * 1000
    jobs: list[Job] = []
    held = 0
    while held < allocated * capacity:
        job = task(rng, f"r{len(jobs):05d}", 0.0)
        jobs.append(job)
        assert job.demand is not None
        held += job.demand.gpus * job.demand.gpu_milli
    placed = {a.job: a for a in decide(Snapshot(now_s=0.0, nodes=nodes, jobs=tuple(jobs)),
                                       rng, "first-fit").assignments}
    running = [dataclasses.replace(j, running=Config(node=placed[j.id].node,
                                                     gpus=placed[j.id].gpus,
                                                     gpu_ids=placed[j.id].gpu_ids))
               for j in jobs if j.id in placed]
    queue: list[Job] = []
    while len(queue) < waiting:
        queue += instances(rng, f"w{len(queue):05d}", 1.0 + len(queue), 4.0,
                           waiting - len(queue))
    return Snapshot(now_s=100.0, nodes=nodes, jobs=tuple(running + queue))


def one_event(repeats: int, options: dict) -> dict:
    snap = event_snapshot(0)
    decide(event_snapshot(1, 8, 10), np.random.default_rng(0), "ga", **options)   # compile
    out: dict = {"nodes": len(snap.nodes), "waiting": sum(j.running is None for j in snap.jobs)}
    for policy in ("first-fit", "ga"):
        times = []
        for r in range(repeats):
            start = time.perf_counter()
            plan = decide(snap, np.random.default_rng(r), policy,
                          **(options if policy == "ga" else {}))
            times.append(time.perf_counter() - start)
        check_plan(snap, plan)
        out[policy] = {"seconds": statistics.median(times), "allocation": allocation(snap, plan)}
    out["time_ratio"] = out["ga"]["seconds"] / out["first-fit"]["seconds"]
    return out


def shared_root() -> Path:
    """The shared folder beside the checkout (a worktree may sit one level deeper)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "shared/traces/alibaba-openb-2023").is_dir():
            return parent / "shared"
    return here.parents[3] / "shared"


def alibaba_trace(seed: int, n_nodes: int, n_tasks: int, load: float | None):
    """An import of Alibaba's openb trace (``andreas trace import-alibaba`` rules: steady
    arrivals from ``--since 9900000``, the busy share while submitting scaled to ``load``:
    ``--busy-share``, not the offered ``--load``)."""
    from andreas.simulator.alibaba import import_alibaba

    root = shared_root() / "traces/alibaba-openb-2023"
    trace, _ = import_alibaba(root / "openb_pod_list_default.csv",
                              root / "openb_node_list_gpu_node.csv", sample=n_tasks,
                              seed=seed, max_nodes=n_nodes, since=9_900_000.0,
                              busy_share="full" if load is None else load)
    return trace


# a replayed policy: the engine's policy and the options ga gets (variants of ga)
VARIANTS = {"ga-allocation": {"fitness": "allocation", "backfill": False},  # Algorithm 3
            "ga-paper": {"fitness": "allocation", "decoder": "strict",    # and its -1
                         "backfill": False},
            "ga-nobackfill": {"backfill": False}}   # ga without the reservation
# First-Fit under ga's reservation (the chromosome of zeros of a backfilling genome): the
# control that says what the GA adds beyond the backfilling rule
CONTROLS = {"first-fit-backfill": "first-fit"}


def first_fit_backfill(snapshot, rng, name, **kw):
    genome = PackingGenome(snapshot, backfill=True)
    zeros = np.zeros(genome.n_genes, dtype=np.int64)
    return genome.to_plan(zeros, NEXT_FIT, "first-fit", {})


def replay(seeds: list[int], n_nodes: int, n_tasks: int, load: float, options: dict,
           make_trace=None, policies=REPLAY_POLICIES) -> dict:
    """Simulate each policy; record the allocation after every decision (Figure 10)."""
    make_trace = make_trace or replay_trace
    decide_in_engine = engine.decide
    rows: dict = {p: {"utilisation": [], "scheduling": [], "window_s": [], "after_event": [],
                      "after_event_all": [], "ga_beat_seeds": 0, "events": 0,
                      "mean_decision_s": [], "mean_jct_s": []} for p in policies}
    try:
        for seed in seeds:
            trace = make_trace(seed, n_nodes, n_tasks, load)
            for label in policies:
                policy = "ga" if label in VARIANTS else CONTROLS.get(label, label)
                extra = {**options, **VARIANTS.get(label, {})} if policy == "ga" else {}
                decide_one = first_fit_backfill if label in CONTROLS else decide_in_engine
                seen: list[tuple[float, bool]] = []
                row = rows[label]

                def watch(snapshot, rng, name, seen=seen, row=row, extra=extra,
                          decide_one=decide_one, **kw):
                    kw.update({k: v for k, v in extra.items()
                               if k not in ("population", "generations")})
                    plan = decide_one(snapshot, rng, name, **kw)
                    queue = any(j.running is None for j in snapshot.jobs)
                    seen.append((allocation(snapshot, plan), queue))
                    row["ga_beat_seeds"] += int(plan.stats.get("from_seed", 1.0) == 0.0)
                    return plan

                engine.decide = watch
                opts = SimOptions(seed=0, ga_population=extra.get("population"),
                                  ga_generations=extra.get("generations"))
                res = engine.simulate(trace, policy, opts)
                after = np.array([a for a, _ in seen])
                queued = np.array([q for _, q in seen], dtype=bool)
                row["utilisation"].append(res.gpu_utilization)
                row["scheduling"].append(res.gpu_utilization_scheduling)
                row["window_s"].append(res.scheduling_window_s)
                row["after_event"].append(float(after[queued].mean()) if queued.any()
                                          else float("nan"))
                row["after_event_all"].append(float(after.mean()))
                row["events"] += int(queued.sum())
                row["mean_decision_s"].append(res.optimizer_mean_s)
                row["mean_jct_s"].append(res.mean_jct_s)
    finally:
        engine.decide = decide_in_engine
    out = {}
    for p, r in rows.items():
        out[p] = {k: float(np.mean(r[k])) for k in ("utilisation", "scheduling", "after_event",
                                                   "after_event_all", "mean_decision_s",
                                                   "mean_jct_s")}
        out[p].update({k + "_per_seed": r[k] for k in ("utilisation", "scheduling",
                                                        "window_s", "after_event")},
                      events=r["events"], ga_beat_seeds=r["ga_beat_seeds"])
    return out


MEASURES = (("scheduling", "time-avg"), ("after_event", "after event"),
            ("utilisation", "makespan"))


def ratios(rows: dict, ga: str = "ga") -> dict:
    """ga's mean over the seeds divided by Round-Robin's and Tetris' on each measure."""
    return {(base, key): rows[ga][key] / rows[base][key]
            for base in ("round-robin", "tetris") if base in rows for key, _ in MEASURES}


def print_replay(rows: dict, title: str) -> None:
    print(title)
    print(f"  {'policy':<18} {'time-avg':>8} {'after ev':>8} {'makespan':>8} {'all ev':>8} "
          f"{'JCT h':>7} {'ms/dec':>7} {'queued ev':>9} {'GA > seeds':>10}")
    for p, r in rows.items():
        beat = str(r["ga_beat_seeds"]) if p.startswith("ga") else "-"
        print(f"  {p:<18} {r['scheduling']:>8.4f} {r['after_event']:>8.4f} "
              f"{r['utilisation']:>8.4f} {r['after_event_all']:>8.4f} "
              f"{r['mean_jct_s'] / 3600:>7.2f} {r['mean_decision_s'] * 1000:>7.1f} "
              f"{r['events']:>9} {beat:>10}")


def show(load: float | None) -> str:
    return "own" if load is None else f"{load:g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one replay seed, 200 tasks")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3, help="replay traces per load")
    ap.add_argument("--nodes", type=int, default=20, help="replay cluster size")
    ap.add_argument("--tasks", type=int, default=600, help="task instances per replay")
    ap.add_argument("--loads", default=None,
                    help="comma-separated loads: Alibaba imports' GPU load while submitting "
                         "(own: the trace's, months of arrivals, slow to replay; above "
                         "about 2.24 some 20-node imports refuse it; default 0.8,1.5,2.2), "
                         "or generated traces' arrivals over GPU capacity (--generated; "
                         "default 3)")
    ap.add_argument("--generated", action="store_true",
                    help="replay generated PAI-like traces instead of Alibaba imports")
    ap.add_argument("--policies", default=",".join(REPLAY_POLICIES),
                    help="replayed policies; ga-allocation (Algorithm 3's fitness) and "
                         "ga-paper (that fitness with its -1 for an overbooked node) are "
                         "variants of ga")
    ap.add_argument("--decoder", default=None, help="ga's decoder (default: its own)")
    ap.add_argument("--fitness", default=None, help="ga's fitness (default: its own)")
    ap.add_argument("--population", type=int, default=None)
    ap.add_argument("--generations", type=int, default=None)
    ap.add_argument("--no-event", action="store_true", help="skip the 100-node event")
    ap.add_argument("--json", type=Path, help="also write the results to this file")
    args = ap.parse_args(argv)
    options = {k: v for k, v in (("decoder", args.decoder), ("fitness", args.fitness),
                                 ("population", args.population),
                                 ("generations", args.generations)) if v is not None}
    seeds = [1] if args.quick else list(range(1, args.seeds + 1))
    tasks = 200 if args.quick else args.tasks
    loads = [None if x == "own" else float(x) for x in (
        args.loads or ("3" if args.generated else "0.8,1.5,2.2")).split(",")]
    policies = tuple(args.policies.split(","))
    results: dict = {"options": options, "replays": {}}
    if not args.no_event:
        event = one_event(args.repeats, {k: v for k, v in options.items()})
        results["event"] = event
        print(f"one event: {event['nodes']} nodes, {event['waiting']} waiting task instances")
        for policy in ("first-fit", "ga"):
            e = event[policy]
            print(f"  {policy:<10} {e['seconds']:8.3f} s  allocation {e['allocation']:.4f}")
        print(f"  ga time / first-fit time: {event['time_ratio']:.1f}"
              f"   (target: under 1 s per event: {'yes' if event['ga']['seconds'] < 1 else 'NO'})")
    kind = "generated PAI-like" if args.generated else "Alibaba import"
    for load in loads:
        rows = replay(seeds, args.nodes, tasks, load, options,
                      None if args.generated else alibaba_trace, policies)
        results["replays"][show(load)] = rows
        print_replay(rows, f"replay: {len(seeds)} {kind} trace(s), {args.nodes} nodes, "
                           f"{tasks} task instances, load {show(load)}")
        sys.stdout.flush()
    print("ga / baseline (means over the seeds; time-avg: allocation over the scheduling "
          "window, first submission to last start; after event: right after each decision "
          "that had a queue, the paper's Figure 10; makespan: over the whole replay)")
    gas = [p for p in policies if p == "ga" or p in VARIANTS or p in CONTROLS]
    print(f"  {'load':>5} {'policy':<18} " + " ".join(
        f"{'/' + base[:5] + ' ' + label:>17}" for base in ("round-robin", "tetris")
        for _, label in MEASURES))
    for load in loads:
        rows = results["replays"][show(load)]
        for ga in gas:
            r = ratios(rows, ga)
            print(f"  {show(load):>5} {ga:<18} " + " ".join(
                f"{r.get((base, key), float('nan')):>17.3f}"
                for base in ("round-robin", "tetris") for key, _ in MEASURES))
    if "ga" in policies and "round-robin" in policies:
        met = {load: ratios(results["replays"][show(load)]).get(("round-robin", "scheduling"),
                                                                 0.0) >= 1.10 for load in loads}
        print("  target ga >= 1.10 x Round-Robin on time-avg utilisation: "
              + ", ".join(f"load {show(k)} {'met' if v else 'NOT met'}" for k, v in met.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
