"""A capacity-aware LP lower bound for a cloud trace (an experiment, not part of andreas).

Time-indexed relaxation: y[j, c, t] >= 0 is the share of job j's work done on
configuration c in slot t. Each job's shares sum to 1; in a slot a job works at most the
slot's length after its submission; the slot's work, counted in VMs (g / the type's
largest VM), fits N VMs; a job's lateness is at least (submit + its work time - due) and
(the share-weighted start of its slots - due); after a window of 1.5 x its slack one
catch-all slot without capacity. Without the capacity rows it is the per-job bound
(``andreas.simulator.bounds.cloud_lower_bound``). On the published-code benchmark's
N = 20, load 3 trace it equals that bound (6183.60 $; 169 224 columns, 20 s with HiGHS):
capacity never binds in the relaxation. Run from the repository root:
``python docs/measurements/2026-11-26-fmix/lpbound.py 20 3``.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "benchmarks")]

import highspy  # noqa: E402

from andreas.simulator.bounds import cloud_lower_bound, gpu_offers  # noqa: E402


def options(job, offers) -> list[tuple[float, float, float]]:
    """(whole-job seconds, GPU-priced dollars, VM-seconds) per undominated configuration."""
    pts = []
    for gpu_type, (price, largest) in offers.items():
        times = job.epoch_time_s.get(gpu_type, ())
        for g in range(1, min(largest, len(times)) + 1):
            if job.runs_on(gpu_type, g):
                s = job.epochs_left * times[g - 1]
                pts.append((s, g * price * s / 3600.0, s * g / largest))
    return [p for p in pts
            if not any(q != p and all(a <= b for a, b in zip(q, p)) for q in pts)]


def lp_bound(trace, slot_s: float = 1800.0, horizon: float = 1.5) -> tuple[float, int]:
    """(the LP's optimum, its columns)."""
    offers = gpu_offers(trace.catalog)
    n_vms = len(trace.nodes)
    jobs = list(trace.jobs)
    t0 = min(j.submit_s for j in jobs)
    nj = len(jobs)
    # rows: share sums [0, J), lateness vs work time [J, 2J), vs slot starts [2J, 3J)
    lo = [1.0] * nj + [j.submit_s - j.due_s for j in jobs] + [-j.due_s for j in jobs]
    hi = [1.0] * nj + [math.inf] * (2 * nj)
    cap_row: dict[int, int] = {}
    ents: list[tuple[int, int, float]] = []
    cost: list[float] = []

    def column(e: float, *entries: tuple[int, float]) -> None:
        c = len(cost)
        cost.append(e)
        ents.extend((c, r, v) for r, v in entries)

    for i, job in enumerate(jobs):
        pts = options(job, offers)
        r, d = job.submit_s, job.due_s
        end = r + horizon * max(d - r, min(p[0] for p in pts)) + 2 * slot_s
        for t in range(int((r - t0) // slot_s), int(math.ceil((end - t0) / slot_s))):
            a, b = t0 + t * slot_s, t0 + (t + 1) * slot_s
            avail = min(b, end) - max(a, r)
            if avail <= 0:
                continue
            slot_row = len(lo)
            lo.append(-math.inf)
            hi.append(avail)
            if t not in cap_row:
                cap_row[t] = len(lo)
                lo.append(-math.inf)
                hi.append(n_vms * slot_s)
            for s, e, vm_s in pts:
                column(e, (i, 1.0), (nj + i, -s), (2 * nj + i, -max(a, r)), (slot_row, s),
                       (cap_row[t], vm_s))
        for s, e, _ in pts:        # the catch-all after the window: no capacity
            column(e, (i, 1.0), (nj + i, -s), (2 * nj + i, -end))
    for i, job in enumerate(jobs):   # lateness, priced by the weight
        column(job.weight, (nj + i, 1.0), (2 * nj + i, 1.0))
    m = np.array(ents)
    m = m[np.lexsort((m[:, 1], m[:, 0]))]
    ncol = len(cost)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, len(lo)
    lp.col_cost_ = np.array(cost)
    lp.col_lower_, lp.col_upper_ = np.zeros(ncol), np.full(ncol, math.inf)
    lp.row_lower_, lp.row_upper_ = np.array(lo), np.array(hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(m[:, 0], np.arange(ncol + 1)).astype(np.int32)
    lp.a_matrix_.index_ = m[:, 1].astype(np.int32)
    lp.a_matrix_.value_ = m[:, 2]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.run()
    return h.getObjectiveValue(), ncol


def main() -> None:
    from bench_published import bench_trace

    nodes, load = int(sys.argv[1]), float(sys.argv[2])
    trace = bench_trace(nodes, 1, load)
    per_job = cloud_lower_bound(trace)
    start = time.perf_counter()
    value, ncol = lp_bound(trace)
    print(f"N={nodes} load={load}: per-job bound {per_job:.2f}, LP {value:.2f} "
          f"({value / per_job:.4f}), {ncol} columns, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
