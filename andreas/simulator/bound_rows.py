"""Valid rows of the on-premise LP bound that price where a job's work lies in time.

``bounds.py``'s per-job rows see a job's completion through its mean busy time and its
fastest run, and its lateness through the share of work left after a slot start. Both
let a job run slowly (on its cheapest, least GPU-second configuration) and still count
half of only its *fastest* run after the mean of its work, and let a late job spread
thin slices after its due date at a fraction of their lateness. The rows here close
both, from one fact about every schedule: reparametrise a job's run by its run time
theta (idle gaps removed, they only add), on configuration c(theta) with whole-job run
time P_c; a share dF of its work is done in run time P_c dF. For any set L of its work,
the run time still to come after each piece of L is at least the run time of the
pieces of L after it, so

    integral over L of (C - t) dF(t) >= sum over ordered pairs (a before b) in L of
    P_c(b) dF(a) dF(b) >= (1/2) y^T M y,   M_cc' = min(P_c, P_c'),

y_c the share of L done on c (each unordered pair counts the later piece's P, at least
the smaller of the two). M is positive semidefinite (min(a, b) = integral of 1{s < a}
1{s < b} ds), so y^T M y / 2 is convex and above its tangent at any point yhat:
yhat^T M y - yhat^T M yhat / 2. The rows take yhat = alpha e_c for a few alpha and
configurations c; with c the fastest and L all the work this is the mean busy row.
"""

from __future__ import annotations

import math

import numpy as np

ALPHAS = (0.25, 0.5, 1.0)   # tangent points alpha e_c of the late-work rows
MAX_TIMES = 4               # configurations' run times a job's rows take tangents at
SEQUENCE_JOBS = 10          # sets up to this size get the exact sequence bound
ASSIGNMENT_CELLS = 40_000   # the largest assignment LP (positions x jobs) solved per set


def run_times(work_after: list[list[tuple[int, float]]]) -> list[float]:
    """The distinct whole-job run times of a job's configurations (at most MAX_TIMES,
    spread from the fastest to the slowest): the tangents' configurations."""
    times = sorted({p for here in work_after for _, p in here})
    if len(times) <= MAX_TIMES:
        return times
    step = (len(times) - 1) / (MAX_TIMES - 1)
    return sorted({times[round(i * step)] for i in range(MAX_TIMES)})


def busy_rows(rows: list, work_after: list[list[tuple[int, float]]],
              slot_starts: list[float], c_col: int, times: list[float]) -> None:
    """C >= sum_t s_t x_t + sum_c' min(P, P_c') y_c' - P / 2, one row per run time P of
    ``times`` (x_t the share of the work done in slot t, y_c' on configuration c').

    Valid for every schedule: C - (mean time of the work) is the integral of (C - t) dF
    over all of it, at least y^T M y / 2 (module doc), at least its tangent at e_c; and
    the work of slot t is done after s_t. At P = the fastest run this is ``bounds.py``'s
    mean busy row; at the run time of a slow configuration it sees that a job run there
    ends half that run after the mean of its work, not half its fastest run."""
    for big in times:
        cols, coefs = [c_col], [1.0]
        for here, s_t in zip(work_after, slot_starts):
            for u, p in here:
                cols.append(u)
                coefs.append(-(s_t + min(big, p)))
        rows.append((cols, coefs, -big / 2, math.inf))


def late_rows(rows: list, due_s: float, work_after: list[list[tuple[int, float]]],
              slot_starts: list[float], tard: int, times: list[float]) -> None:
    """T >= sum_(t: s_t >= d) ((s_t - d) x_t + alpha sum_c' min(P, P_c') x_c't)
    - alpha^2 P / 2, for alpha in (0,) + ALPHAS and P in ``times``; x_c't the share of the
    work done on c' in slot t.

    Valid for every schedule: let G be the share of the work done in the slots that
    start at or after the due date d. If G > 0 the job ends after d, and T = C - d >=
    G (C - d) = integral over that work of (C - t) + (t - d) dF, at least y^T M y / 2
    (module doc; y the shares of that work per configuration), at least its tangent at
    alpha e_c, plus sum (s_t - d) x_t; if G = 0 the right side is at most 0 <= T. The
    per-slot rows of ``bounds.py`` take the largest of (s_t - d) F_t + W_t: for a job
    that spreads its late work thinly over many slots, about half this mean."""
    late = [(here, s_t) for here, s_t in zip(work_after, slot_starts) if s_t >= due_s]
    if not late:
        return
    for alpha in (0.0,) + ALPHAS:
        for big in times if alpha else times[:1]:
            cols, coefs = [tard], [1.0]
            for here, s_t in late:
                for u, p in here:
                    cols.append(u)
                    coefs.append(-(s_t - due_s + alpha * min(big, p)))
            rows.append((cols, coefs, -alpha * alpha * big / 2, math.inf))


def fused_times(least: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Candidate sizes of the jobs on one machine that stands for the whole cluster, one
    candidate per row: for a weighting lambda of the classes, p_j = min_k lambda_k a_jk,
    a_jk = least[j, k] / rates[k] the least time job j takes all of class k (its least
    GPU-seconds there over the class's GPUs; inf where it cannot run). Candidates:
    lambda proportional to the classes' GPUs (every GPU-second alike) and, per job, the
    lambda that balances its own a_jk.

    Any lambda >= 0 summing to 1 is valid: in a span tau each class k does at most tau
    of whole-class time, sum_j x_jk a_jk <= tau for the shares x_jk of the jobs' work it
    does, so sum_j p_j <= sum_k lambda_k sum_j x_jk a_jk <= tau. Where a GPU-second of
    one class does less work than one of another, counting them alike overstates the
    capacity, and a balanced lambda sees it."""
    a = least / rates[None, :]
    runs = np.isfinite(a)
    finite = np.where(runs, a, 0.0)
    inv = np.where(runs & (finite > 0), 1.0 / np.where(finite > 0, finite, 1.0), 0.0)
    lam = np.vstack([rates / rates.sum(), inv / inv.sum(axis=1, keepdims=True)])
    # a class of weight 0 that a job runs on makes its size 0, not the other classes'
    return np.min(np.where(runs[None, :, :], lam[:, None, :] * finite[None, :, :], np.inf),
                  axis=2)


def kth_ends(p: np.ndarray, release: np.ndarray, own_end: np.ndarray) -> np.ndarray:
    """e_k <= the k-th completion among a set of jobs, in any schedule: for each release
    s of the set, at most n_<s of the first k to end were submitted before s, so at
    least k - n_<s of them were submitted at or after it and all their work (at least
    the smallest p's of those) is done after s on the fused machine; and the k-th end
    is no earlier than the k-th smallest of the jobs' own earliest ends (``own_end``)."""
    n = len(p)
    e = np.sort(own_end).astype(float)
    for s in np.unique(release):
        before = int(np.sum(release < s))
        q = s + np.cumsum(np.sort(p[release >= s]))
        e[before:] = np.maximum(e[before:], q[:n - before])
    return e


def assignment_bound(e: np.ndarray, own_end: np.ndarray, due: np.ndarray,
                     weight: np.ndarray) -> float:
    """min over the orders pi in which a set of jobs ends of sum_k w_pi(k) max(0,
    max(e_k, own_end_pi(k)) - d_pi(k)): a lower bound on the set's weighted tardiness
    (the job that ends k-th ends after e_k and after its own earliest end), as the
    assignment LP (integral, so exact) on HiGHS. Positions that no job can be late in
    take any job for free and are left out."""
    import highspy

    late = np.maximum(e[:, None], own_end[None, :]) - due[None, :]
    keep = np.flatnonzero((late > 0).any(axis=1))
    if len(keep) == 0 or len(keep) * len(due) > ASSIGNMENT_CELLS:
        return 0.0       # none owed, or too large to solve here (0 is a valid bound)
    cost = weight[None, :] * np.maximum(late[keep], 0.0)
    k, n = cost.shape
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = k * n, k + n
    lp.col_cost_ = cost.ravel()
    lp.col_lower_, lp.col_upper_ = np.zeros(k * n), np.ones(k * n)
    lp.row_lower_ = np.concatenate([np.ones(k), np.zeros(n)])
    lp.row_upper_ = np.ones(k + n)
    pos, job = np.divmod(np.arange(k * n), n)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.arange(0, 2 * k * n + 1, 2, dtype=np.int32)
    lp.a_matrix_.index_ = np.column_stack([pos, k + job]).ravel().astype(np.int32)
    lp.a_matrix_.value_ = np.ones(2 * k * n)
    h = getattr(highspy, "_Highs", highspy.Highs)()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return 0.0
    # weak duality, exactly: any position prices u with v_j = min(0, min_k c_kj - u_k)
    # are feasible for the dual, and sum u + sum v is below the minimum
    u = np.asarray(h.getSolution().row_dual)[:k]
    v = np.minimum(0.0, (cost - u[:, None]).min(axis=0))
    return max(0.0, float(u.sum() + v.sum()))


def set_rows(rows: list, jobs: list, cols: list[tuple[int, int]], starts: np.ndarray,
             least: np.ndarray, rates: np.ndarray, fastest: np.ndarray) -> None:
    """For each slot start, the set S of jobs submitted at or after it (as ``bounds.py``'s
    ``_completion_sum_rows``), on the fused machine of the candidate lambda that makes
    S's work largest (``fused_times``), with e_k from ``kth_ends``: Queyranne's row
    sum_S p_j C_j >= r P + (P^2 + sum p_j^2) / 2, the SPT/EDD row sum_S T_j >= sum_k
    max(0, e_k - d_(k)), and the weighted row sum_S w_j T_j >= ``assignment_bound``.

    Valid for every schedule: the first two as in ``_completion_sum_rows`` with these p
    and e (both below the truth, ``fused_times``, ``kth_ends``); the third since the job
    that ends k-th in S is late by at least max(e_k, its own earliest end) - its due
    date, and the schedule's order is one of those the minimum runs over. Without it the
    LP hands all of a set's lateness to its job of least weight; with it, each position
    that must end late takes a job of its own."""
    sizes = fused_times(least, rates)
    submit = np.array([j.submit_s for j in jobs])
    due = np.array([j.due_s for j in jobs])
    weight = np.array([j.weight for j in jobs])
    seen: set[tuple[int, ...]] = set()
    for s_t in starts:
        members = np.flatnonzero(submit >= s_t)
        if len(members) < 2 or tuple(members) in seen:
            continue
        seen.add(tuple(members))
        p = sizes[int(np.argmax(sizes[:, members].sum(axis=1))), members]
        release, own = submit[members], submit[members] + fastest[members]
        e = kth_ends(p, release, own)
        total = float(p.sum())
        rows.append(([cols[i][1] for i in members], list(p / total),
                     float(release.min()) + (total + float((p * p).sum()) / total) / 2,
                     math.inf))
        late = float(np.maximum(0.0, e - np.sort(due[members])).sum())
        if late > 0:
            rows.append(([cols[i][0] for i in members], [1.0] * len(members), late, math.inf))
            owed = assignment_bound(e, own, due[members], weight[members])
            if len(members) <= SEQUENCE_JOBS:
                owed = max(owed, sequence_bound(release, p, own,
                                                due[members], weight[members]))
            if owed > 0:
                rows.append(([cols[i][0] for i in members], list(weight[members]), owed,
                             math.inf))


def sequence_bound(release: np.ndarray, p: np.ndarray, own_end: np.ndarray,
                   due: np.ndarray, weight: np.ndarray) -> float:
    """min over the orders pi in which a small set of jobs ends of sum_k w_pi(k) max(0,
    max(M(first k), own_end_pi(k)) - d_pi(k)), M(A) = max_s (s + the p of A's jobs
    submitted at or after s) the least time all of A can be done on the fused machine
    with preemption, by dynamic programming over subsets (the set's size at most
    SEQUENCE_JOBS): a lower bound on the set's weighted tardiness, since the job that
    ends k-th ends after all the work of the first k. Unlike ``assignment_bound`` it
    sees that the first jobs' work is their own, not the smallest of the set."""
    n = len(p)
    masks = np.arange(1 << n)
    bits = (masks[:, None] >> np.arange(n)[None, :]) & 1
    work = np.max([np.where(bits @ (release >= s) > 0, s + bits @ np.where(release >= s, p, 0.0),
                            -math.inf) for s in np.unique(release)], axis=0)
    best = np.full(1 << n, math.inf)
    best[0] = 0.0
    for mask in range(1, 1 << n):
        last = np.flatnonzero(bits[mask])
        owed = weight[last] * np.maximum(0.0, np.maximum(work[mask], own_end[last])
                                         - due[last])
        best[mask] = float(np.min(best[mask ^ (1 << last)] + owed))
    return float(best[-1])
