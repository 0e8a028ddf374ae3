"""python fluid.py CELL... (from the repository root; CELL = N:scenario:arrival:seed on
premise): where the LP's lateness goes. Solves the default bound, then reads its own
fluid schedule as if it ran: each job ends when its last slice ends (the start of the
last slot with work plus the run time of that slot's work; or that slot's end), and
prints the weighted tardiness of that reading beside the LP's. A large difference says
the LP leaves thin slices of late work that it charges only in proportion to their
share, which no row on a single job or on a fused machine can price (an integrality
gap), rather than a lack of capacity. Reads private parts of bounds.py (a measurement,
not an interface)."""
import sys

import numpy as np

sys.path.insert(0, ".")

import andreas.simulator.bounds as B
from andreas.simulator.generate import generate_trace

seen: list = []
solved: dict = {}
job_rows, highs = B._job_rows, B._highs


def spy_job_rows(model, job, classes, t0, slot, starts, shared_nodes, m_col, integral):
    first_col = len(model.cols)          # the job's u columns come first, slot by slot
    cols = job_rows(model, job, classes, t0, slot, starts, shared_nodes, m_col, integral)
    first = int(min(len(starts) - 1, max(0, (job.submit_s - t0) // slot)))
    configs = B._configs(job, classes, model.energy)
    us = [(first_col + i * len(configs) + c, t, configs[c][2])
          for i, t in enumerate(range(first, len(starts))) for c in range(len(configs))]
    seen.append((job, cols, us, starts, slot))
    return cols


def spy_highs(*args):
    solved["h"] = highs(*args)
    return solved["h"]


B._job_rows, B._highs = spy_job_rows, spy_highs
for cell in sys.argv[1:]:
    seen.clear()
    n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival,
                           seed=int(seed), cloud=False)
    bound = B.onprem_lower_bound(trace)
    x = np.asarray(solved["h"].getSolution().col_value)
    lp = start_read = end_read = 0.0
    late_lp = late_read = 0
    for job, (tard, _), us, starts, slot in seen:
        last = max(t for c, t, _ in us if x[c] > 1e-4)
        run = sum(x[c] * p for c, t, p in us if t == last)
        begin = max(starts[last], job.submit_s)
        lp += job.weight * x[tard]
        start_read += job.weight * max(0.0, begin + run - job.due_s)
        end_read += job.weight * max(0.0, starts[last] + slot - job.due_s)
        late_lp += x[tard] > 1.0
        late_read += begin + run > job.due_s + 1.0
    print(f"op:{cell} bound {bound.total_cost:.2f}: LP tardiness {lp:.2f} ({late_lp} jobs "
          f"late); its schedule read as run: {start_read:.2f} ({late_read} late) ending "
          f"at the last slice, {end_read:.2f} at the end of its slot", flush=True)
