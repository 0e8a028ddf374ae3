"""Policy ``milp``: andreas's f_obj (cloud: f_mix) minimised exactly by a MILP solver (HiGHS).

The model is the path-relinking paper's P1 specialised to andreas's f_obj (the
reference definition is ``andreas.costs.evaluate``): times, tardiness and postponement
costs are the compiled ``Problem``'s (restarts priced as for every other policy). All
variables are binary (j job, n physical node, c configuration (class, g), o a node's
*rate option*):

- ``x[j,n,c]``: job j runs on node n with configuration c; a job with no x is postponed.
- ``s[n,o]``, at most one per node: on premise o is the node's number of busy GPUs (the
  rate is c_{n,l}); in the cloud o is (VM type, busy GPUs) and the rate the VM price.
- ``a[j,n,c,o]``: the one job the node is charged for, under its rate (P1k/l). Its cost
  is linear, so the node term needs no big-M; minimisation makes the charged job the
  first-ending one.

In the cloud the objective is f_mix (each x also pays the job's ``Problem.rank``, the
charged job's time prices only the idle GPUs), what greedy, rg and pr minimise there.
Identical nodes are interchangeable, so the model orders them (symmetry breaking). The
greedy plan is the solver's starting solution and the fallback when it finds nothing.

Work conservation (``work_conserving``, default on): f_obj charges nothing for
postponing a job that can still meet its due date after one more period, while running
it costs energy, so the plain optimum leaves such jobs waiting next to idle GPUs, a plan
that is ruinous over a whole trace. Rows per job and node class (on premise) and per
*profile* of jobs and node (cloud) allow a job to wait only when every node it could use
is full, as in the heuristics' constructions; ``andreas.optimizer.exact`` enumerates under
the same rule. The full model, row by row: docs/design/optimizer.md, "The MILP model".
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from andreas.costs import evaluate, objective_name
from andreas.errors import InputError
from andreas.model import Plan, Snapshot
from andreas.optimizer.milp_model import DEFAULT_MAX_VARIABLES, Model, build_model, class_members
from andreas.optimizer.problem import Problem, compile_problem
from andreas.optimizer.solution import to_plan

DEFAULT_TIME_LIMIT_S = 60.0
DEFAULT_MIP_GAP = 0.0
MAX_COEFFICIENT = 1e15          # HiGHS treats costs >= 1e20 as infinite; stay well below
OPTIMAL_GAP = 1e-6              # a relative gap this small counts as proven optimal


@dataclass(frozen=True, kw_only=True)
class Solved:
    """What the solver returned: assignment per job (-1 postponed; None: no solution),
    node classes, figures."""

    node: np.ndarray | None
    cfg: np.ndarray | None
    node_cls: np.ndarray
    status: str
    bound: float
    solver_s: float
    mip_nodes: int
    start_accepted: bool
    resolved: bool          # solved a second time without the start (see _solve)


def decide_milp(snapshot: Snapshot, rng: np.random.Generator | None = None, *,
                time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
                max_variables: int = DEFAULT_MAX_VARIABLES,
                work_conserving: bool = True) -> Plan:
    """Minimise f_obj (cloud: f_mix, as the heuristics) with HiGHS; past the time limit, the
    best plan found and its gap.

    ``work_conserving`` (default) restricts the plans to those that postpone a job only
    when no node has room for it (module docstring): f_obj alone prefers idle GPUs.
    """
    _check_options(time_limit_s, mip_gap, max_variables)
    if not isinstance(work_conserving, bool):
        raise InputError(f"work_conserving: must be true or false, got {work_conserving!r}")
    from andreas.optimizer.greedy import decide_greedy

    start_t = time.perf_counter()
    _check_inputs(snapshot)
    problem = compile_problem(snapshot)
    name = objective_name(problem.cloud)
    _check_magnitudes(problem)
    greedy = decide_greedy(snapshot, np.random.default_rng(0))
    model = build_model(problem, max_variables=max_variables, work_conserving=work_conserving)
    build_s = time.perf_counter() - start_t
    solved = _solve(problem, model, greedy, time_limit_s, mip_gap)
    stats: dict[str, Any] = {
        "jobs": problem.n_jobs, "variables": model.n_cols, "constraints": model.n_rows,
        "build_s": build_s, "solver_s": solved.solver_s, "mip_nodes": solved.mip_nodes,
        "start_accepted": int(solved.start_accepted), "resolved": int(solved.resolved),
        "time_limit_s": float(time_limit_s), "work_conserving": int(work_conserving),
        "work_conserving_rows": model.n_wc_rows,
        "greedy_objective": getattr(evaluate(snapshot, greedy), name),
    }
    plan = None
    if solved.node is not None:
        assert solved.cfg is not None                 # the solver sets both or neither
        plan = to_plan(problem, solved.node, solved.cfg, solved.node_cls, policy="milp",
                       objective=0.0, objective_name=name)
    return _finish(snapshot, plan, greedy, solved, stats, name)


def _finish(snapshot: Snapshot, plan: Plan | None, greedy: Plan, solved: Solved,
            stats: dict[str, Any], name: str) -> Plan:
    """The solver's plan scored by the reference objective (``costs.evaluate``); the greedy
    one if it is better or the solver found nothing (then the gap is measured against the
    solver's bound)."""
    value = getattr(evaluate(snapshot, plan), name) if plan is not None else math.inf
    fallback = value > stats["greedy_objective"] * (1 + 1e-12) + 1e-12
    if fallback:
        plan, value = greedy, stats["greedy_objective"]
    bound = min(solved.bound, value)
    gap = (value - bound) / max(abs(value), 1e-12) if value > 0 else 0.0
    status = solved.status
    if status == "optimal" and gap > OPTIMAL_GAP:
        status = "gap_reached"
    stats.update(status=status, mip_gap=gap, bound=bound, fallback_greedy=int(fallback))
    assert plan is not None                           # no solver plan: inf, fallback
    return dataclasses.replace(plan, policy="milp", objective=value, objective_name=name,
                               stats=stats)


def _check_options(time_limit_s: float, mip_gap: float, max_variables: int) -> None:
    if not (isinstance(time_limit_s, (int, float)) and math.isfinite(time_limit_s)
            and time_limit_s > 0):
        raise InputError(f"time_limit_s: must be a positive number of seconds, "
                         f"got {time_limit_s!r}")
    if not (isinstance(mip_gap, (int, float)) and 0 <= mip_gap < 1):
        raise InputError(f"mip_gap: must be in [0, 1), got {mip_gap!r}")
    if not (isinstance(max_variables, int) and max_variables > 0):
        raise InputError(f"max_variables: must be a positive integer, got {max_variables!r}")


def _check_inputs(snapshot: Snapshot) -> None:
    """Every number the model is built from must be finite: one line naming the field."""
    def need(value: float, what: str) -> None:
        if not math.isfinite(value):
            raise InputError(f"{what} must be finite for the MILP, got {value!r}")

    need(snapshot.now_s, "snapshot: now_s")
    for name in ("rho", "period_s", "mu", "restart_overhead_s"):
        need(getattr(snapshot.params, name), f"params: {name}")
    need(snapshot.energy.pue, "energy: pue")
    need(snapshot.energy.price_per_kwh, "energy: price_per_kwh")
    for node in snapshot.nodes:
        for g, watts in enumerate(node.power_w):
            need(watts, f"node {node.name}: power_w[{g}]")
    for entry in snapshot.catalog:
        need(entry.cost_per_hour, f"catalog {entry.name}: cost_per_hour")
    for job in snapshot.jobs:
        for name in ("weight", "due_s", "epochs", "epochs_done"):
            need(getattr(job, name), f"job {job.id}: {name}")
        for gpu_type, times in job.epoch_time_s.items():
            for g, value in enumerate(times, start=1):
                need(value, f"job {job.id}: epoch_time_s[{gpu_type}][{g}]")


def _check_magnitudes(problem: Problem) -> None:
    """Finite but huge coefficients (HiGHS treats >= 1e20 as infinite) are refused too."""
    post = problem.post_cost     # costs.postponement_costs, as the constructions price it
    for i, job in enumerate(problem.jobs):
        run = problem.runnable[i]
        worst = max(float(np.max(np.abs(problem.job_cost[i, run]), initial=0.0)),
                    float(np.max(problem.t[i, run], initial=0.0)), abs(float(post[i])))
        if not worst <= MAX_COEFFICIENT:
            raise InputError(f"job {job.id}: its costs or times reach {worst:g}, beyond what "
                             f"the MILP solver can represent (limit {MAX_COEFFICIENT:g})")
    cost = problem.class_cost_h
    for k, name in enumerate(problem.class_name):
        if not np.max(np.abs(cost[k]), initial=0.0) <= MAX_COEFFICIENT:
            raise InputError(f"node class {name}: cost per hour {cost[k].max():g} is beyond "
                             f"what the MILP solver can represent (limit {MAX_COEFFICIENT:g})")


# --------------------------------------------------------------------------- the model

def _start_vector(p: Problem, m: Model, plan: Plan) -> np.ndarray | None:
    """A plan as a full column vector, its nodes permuted to satisfy the symmetry order."""
    names = {name: i for i, name in enumerate(p.node_names)}
    jobs = {job.id: i for i, job in enumerate(p.jobs)}
    placed: dict[int, list[tuple[int, int]]] = {}      # physical node -> [(job, cfg)]
    node_k: dict[int, int] = {}
    for a in plan.assignments:
        n = names[a.node]
        k = (p.class_name.index(plan.node_configs[a.node]) if p.cloud
             else int(p.node_class[n]))
        level = (p.cfg_level == 0 if a.power_limit_w is None
                 else np.isclose(p.cfg_limit_w, a.power_limit_w))
        match = np.flatnonzero((p.cfg_class == k) & (p.cfg_g == a.gpus) & level)
        if len(match) != 1:
            return None
        placed.setdefault(n, []).append((jobs[a.job], int(match[0])))
        node_k[n] = k
    busy = {n: sum(int(p.cfg_g[c]) for _, c in v) for n, v in placed.items()}
    slots: dict[int, int] = {}
    groups = ([list(range(p.n_nodes))] if p.cloud
              else [class_members(p, k) for k in range(len(p.class_gpus))])
    if p.has_moves:     # no symmetry order: every node stays itself
        groups = [[n] for n in range(p.n_nodes)]
    for members in groups:
        used = [n for n in members if n in placed]
        used.sort(key=lambda n: (-(node_k[n] + 1) if p.cloud else 0, -busy[n], n))
        for slot, n in zip(members, used):
            slots[n] = slot
    col = {(int(j), int(n), int(c)): i for i, (j, n, c) in enumerate(zip(m.xj, m.xn, m.xc))}
    opt = {(int(n), int(k), int(level)): o
           for o, (n, k, level) in enumerate(zip(m.sn, m.sk, m.sl))}
    charge = {(int(x), int(o)): i for i, (x, o) in enumerate(zip(m.ax, m.ao))}
    v = np.zeros(m.n_cols)
    for n, items in placed.items():
        slot = slots[n]
        o = opt.get((slot, node_k[n], busy[n]))
        found = [col.get((j, slot, c)) for j, c in items]
        if o is None or None in found:
            return None
        cols = [int(x) for x in found if x is not None]
        first = min(range(len(items)),
                    key=lambda i: p.t_energy[items[i][0], items[i][1]])
        charged = charge.get((cols[first], o))
        if charged is None:
            return None
        v[cols] = 1.0
        v[m.n_x + charged] = 1.0
        v[m.n_x + m.n_a + o] = 1.0
    waiting = [jobs[j] for j in plan.postponed]
    w = m.job_w[waiting] if len(m.job_w) else np.zeros(0, np.int64)
    v[m.n_x + m.n_a + m.n_s + w[w >= 0]] = 1.0      # a waiting job's profile asks for w = 1
    return v


@dataclass(frozen=True, kw_only=True)
class _Run:
    status: str
    bound: float
    mip_nodes: int
    values: np.ndarray | None
    consistent: bool     # the returned vector has the objective the solver reports


def _run_highs(highspy: Any, m: Model, time_limit_s: float, mip_gap: float,
               start: np.ndarray | None) -> tuple[_Run, bool]:
    h = getattr(highspy, "_Highs", highspy.Highs)()   # the wrapper prints a banner on stdout
    # presolve off: its probing took most of the time here (cloud 6 nodes x 15 jobs: 40 s
    # -> 20 s for six snapshots; on premise 10 x 30: 11 s -> 0.7 s). Symmetry detection
    # off: the model orders identical nodes itself, and on big models the detection ran
    # for seconds before the time limit was first checked.
    for name, value in (("output_flag", False), ("log_to_console", False), ("presolve", "off"),
                        ("mip_detect_symmetry", False),
                        ("time_limit", float(time_limit_s)), ("mip_rel_gap", float(mip_gap)),
                        ("random_seed", 0), ("mip_feasibility_tolerance", 1e-9),
                        ("primal_feasibility_tolerance", 1e-9)):
        h.setOptionValue(name, value)
    h.passModel(_lp(highspy, m))
    accepted = False
    if start is not None:
        accepted = h.setSolution(m.n_cols, np.arange(m.n_cols, dtype=np.int32),
                                 start) == highspy.HighsStatus.kOk
    h.run()
    info = h.getInfo()
    bound = float(info.mip_dual_bound)
    sol = h.getSolution()
    values = np.asarray(sol.col_value, dtype=float) if sol.value_valid else None
    consistent = True
    if values is not None:
        reported = float(info.objective_function_value)
        own = float(m.cost @ values + m.offset)
        consistent = abs(own - reported) <= 1e-7 * max(1.0, abs(reported))
    return _Run(status=_status_name(highspy, h.getModelStatus()),
                bound=bound if math.isfinite(bound) else -math.inf,
                mip_nodes=int(info.mip_node_count), values=values,
                consistent=consistent), accepted


def _solve(p: Problem, m: Model, greedy: Plan, time_limit_s: float, mip_gap: float) -> Solved:
    """Solve with the greedy plan as the start. HiGHS 1.16 may hand back the unreduced start
    vector while reporting the better objective presolve found from it; such a run is
    repeated without the start in the time left."""
    empty = np.full(p.n_jobs, -1, dtype=np.int64)
    node_cls = (np.zeros(p.n_nodes, dtype=np.int64) if p.cloud else p.node_class.copy())
    if m.n_x == 0:   # nothing can run: every job waits, provably optimal
        return Solved(node=empty, cfg=empty.copy(), node_cls=node_cls, status="optimal",
                      bound=m.offset, solver_s=0.0, mip_nodes=0, start_accepted=False,
                      resolved=False)
    import highspy

    t0 = time.perf_counter()
    run, accepted = _run_highs(highspy, m, time_limit_s, mip_gap, _start_vector(p, m, greedy))
    resolved = False
    left = time_limit_s - (time.perf_counter() - t0)
    if not run.consistent and left > 0:
        again, _ = _run_highs(highspy, m, left, mip_gap, None)
        resolved = True
        if again.values is not None:
            run = dataclasses.replace(again, bound=max(again.bound, run.bound),
                                      mip_nodes=again.mip_nodes + run.mip_nodes)
    if not run.consistent:   # the vector is feasible but not the optimum the solver proved
        run = dataclasses.replace(run, status="time_limit")
    solver_s = time.perf_counter() - t0
    if run.values is None:
        return Solved(node=None, cfg=None, node_cls=node_cls, status=run.status,
                      bound=run.bound, solver_s=solver_s, mip_nodes=run.mip_nodes,
                      start_accepted=accepted, resolved=resolved)
    x = run.values[: m.n_x] > 0.5
    node, cfg = empty.copy(), empty.copy()
    node[m.xj[x]] = m.xn[x]
    cfg[m.xj[x]] = m.xc[x]
    if p.cloud:
        y = run.values[m.n_x + m.n_a: m.n_x + m.n_a + m.n_s] > 0.5
        node_cls[m.sn[y]] = m.sk[y]
    return Solved(node=node, cfg=cfg, node_cls=node_cls, status=run.status, bound=run.bound,
                  solver_s=solver_s, mip_nodes=run.mip_nodes, start_accepted=accepted,
                  resolved=resolved)


def _lp(highspy: Any, m: Model) -> Any:
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = m.n_cols, m.n_rows
    lp.col_cost_ = m.cost
    lp.col_lower_ = np.zeros(m.n_cols)
    lp.col_upper_ = np.ones(m.n_cols)
    lp.row_lower_ = m.row_lo
    lp.row_upper_ = m.row_hi
    lp.offset_ = m.offset
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = m.n_cols, m.n_rows
    lp.a_matrix_.start_ = m.start.astype(np.int32)
    lp.a_matrix_.index_ = m.index.astype(np.int32)
    lp.a_matrix_.value_ = m.value
    lp.integrality_ = [highspy.HighsVarType.kInteger] * m.n_cols
    return lp


def _status_name(highspy: Any, status: Any) -> str:
    names = {highspy.HighsModelStatus.kOptimal: "optimal",
             highspy.HighsModelStatus.kTimeLimit: "time_limit",
             highspy.HighsModelStatus.kInterrupt: "interrupted",
             highspy.HighsModelStatus.kMemoryLimit: "memory_limit",
             highspy.HighsModelStatus.kIterationLimit: "iteration_limit",
             highspy.HighsModelStatus.kSolutionLimit: "solution_limit",
             highspy.HighsModelStatus.kInfeasible: "infeasible"}
    return names.get(status, str(status).rsplit(".", 1)[-1].lstrip("k").lower() or "unknown")
