"""The optimizer's speed against another commit: new / base in process time, alternating.

    python tests/benchmarks/compare_optimizer.py --base 7d1eb9e --out DIR [--rounds 12]

Checks the base commit out in a detached worktree (``--base-tree`` to reuse one), runs
each tree once to compile or load its kernels, then per round each tree in turn (base
first in even rounds, new first in odd ones), one process at a time, with this
checkout's interpreter and bench script (the tree first on PYTHONPATH):
``bench_optimizer.py --quick --repeats 7``, the same on small problems (10 and 20 nodes
x 50 jobs) and ``construct`` alone (1 000 rows, 15 calls). Per case and tree: the median
over the rounds of each run's median, and the least of each run's least; new / base of
each; geometric means per policy and overall. Process time, since wall time on a shared
machine moves with the others' load. Writes each run's JSON, ``uptime`` before and after
each round, and ``summary.txt`` to ``--out``. A round takes 25-40 s on the 2-core
machine: 12 rounds about 8 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SMALL = ("10,50,1", "10,50,2", "20,50,1", "20,50,2")
CONSTRUCT = ((100, 50, 1), (100, 50, 2), (10, 50, 1), (10, 50, 2), (100, 450, 1))


def construct_alone(out: Path) -> None:
    """Worker: process time of ``construction.construct`` (1 000 rows) per case."""
    import numpy as np

    from andreas.optimizer import construction
    from andreas.optimizer.problem import compile_problem
    from andreas.synthetic import random_snapshot

    rows = []
    for nodes, jobs, scenario in CONSTRUCT:
        snap = random_snapshot(np.random.default_rng(1000 + jobs), nodes, jobs,
                               scenario=scenario)
        p = compile_problem(snap)
        construction.construct(p, 1000, np.random.default_rng(0))
        cpu = []
        for r in range(15):
            start = time.process_time()
            construction.construct(p, 1000, np.random.default_rng(r))
            cpu.append(time.process_time() - start)
        rows.append({"nodes": nodes, "jobs": jobs, "scenario": scenario,
                     "policy": "construct", "cpu_seconds": statistics.median(cpu),
                     "cpu_min_seconds": min(cpu)})
    out.write_text(json.dumps(rows, indent=1))


def _run(tree: Path, args: list[str], log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with log.open("w") as f:
        subprocess.run([sys.executable, *args], env=env, cwd=tree, stdout=f,
                       stderr=subprocess.STDOUT, check=True)


def _runs(tree: Path, out: Path, tag: str) -> None:
    bench = str(HERE / "bench_optimizer.py")
    _run(tree, [bench, "--quick", "--repeats", "7", "--json", str(out / f"{tag}-quick.json")],
         out / f"{tag}-quick.log")
    small = [a for c in SMALL for a in ("--case", c)]
    _run(tree, [bench, *small, "--policies", "greedy,rg,pr", "--repeats", "7",
                "--json", str(out / f"{tag}-small.json")], out / f"{tag}-small.log")
    _run(tree, [__file__, "--worker-construct", str(out / f"{tag}-construct.json")],
         out / f"{tag}-construct.log")


def summarize(out: Path, rounds: int) -> str:
    """Per case and tree: the median over rounds of each run's median process time, and
    the least over rounds of each run's least; new / base of each; geometric means."""
    per: dict[tuple, dict[str, list[tuple[float, float]]]] = {}
    for r in range(rounds):
        for side in ("base", "new"):
            for kind in ("quick", "small", "construct"):
                for row in json.loads((out / f"r{r}-{side}-{kind}.json").read_text()):
                    key = (row["nodes"], row["scenario"], row["jobs"], row["policy"])
                    per.setdefault(key, {"base": [], "new": []})[side].append(
                        (row["cpu_seconds"], row["cpu_min_seconds"]))
    lines = [f"{'case (nodes, scenario, jobs, policy)':<36} {'base ms':>8} {'new ms':>8} "
             f"{'new/base':>8} {'base min':>8} {'new min':>8} {'new/base':>8}"]
    ratios: dict[str, list[tuple[float, float]]] = {}
    for key in sorted(per, key=lambda k: (k[3] == "construct", k)):
        med = [statistics.median(m for m, _ in per[key][s]) for s in ("base", "new")]
        low = [min(lo for _, lo in per[key][s]) for s in ("base", "new")]
        ratio = (med[1] / med[0], low[1] / low[0])
        ratios.setdefault(key[3], []).append(ratio)
        if key[3] != "construct":
            ratios.setdefault("all decide() cases", []).append(ratio)
            if key[2] == 50 and key[3] in ("rg", "pr"):
                ratios.setdefault("rg/pr at 50 jobs", []).append(ratio)
        lines.append(f"{str(key):<36} {med[0] * 1e3:>8.2f} {med[1] * 1e3:>8.2f} "
                     f"{ratio[0]:>8.3f} {low[0] * 1e3:>8.2f} {low[1] * 1e3:>8.2f} "
                     f"{ratio[1]:>8.3f}")
    lines.append("geometric means new/base: median of medians | least of leasts")
    for name, rs in ratios.items():
        gm = [math.exp(sum(math.log(x[i]) for x in rs) / len(rs)) for i in (0, 1)]
        lines.append(f"  {name:<20} {gm[0]:.3f} ({min(x[0] for x in rs):.3f}-"
                     f"{max(x[0] for x in rs):.3f}) | {gm[1]:.3f} ({min(x[1] for x in rs):.3f}"
                     f"-{max(x[1] for x in rs):.3f})  {len(rs)} cases")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="the base commit (checked out in a detached worktree)")
    ap.add_argument("--base-tree", type=Path, help="an existing checkout of the base")
    ap.add_argument("--out", type=Path, required=False, help="directory for the results")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--summary-only", action="store_true", help="re-read --out's runs")
    ap.add_argument("--worker-construct", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker_construct:
        construct_alone(args.worker_construct)
        return 0
    if args.out is None or not (args.base or args.base_tree or args.summary_only):
        ap.error("--out and one of --base / --base-tree are required")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        base = args.base_tree or Path(tempfile.gettempdir()) / f"andreas-base-{args.base}"
        if not base.exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base),
                            args.base], check=True)
        for side, tree in (("base", base), ("new", ROOT)):   # compile or load the kernels
            _run(tree.resolve(), [str(HERE / "bench_optimizer.py"), "--case", "5,10,2",
                                  "--repeats", "1"], args.out / f"warm-{side}.log")
        loads = [subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()]
        for r in range(args.rounds):
            order = (("base", base), ("new", ROOT))
            for side, tree in order if r % 2 == 0 else order[::-1]:
                print(f"round {r + 1}/{args.rounds}: {side}", flush=True)
                _runs(tree.resolve(), args.out, f"r{r}-{side}")
            loads.append(subprocess.run(["uptime"], capture_output=True,
                                        text=True).stdout.strip())
        (args.out / "uptime.txt").write_text("\n".join(loads) + "\n")
    text = summarize(args.out, args.rounds)
    (args.out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
