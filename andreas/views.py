"""Read-only views of the store for people: the queue, one job in detail, the nodes.

Each function returns plain frozen rows (no ORM objects, nothing lazy), so the CLI only
formats them and ``--json`` is ``dataclasses.asdict``. Missing data is ``None`` (shown as
"-"), never a guess: a job without energy readings has no energy cost, a job the latest
decision did not place has no expected finish.

Costs, in the currency of ``[manager] price_per_kwh``:

- *so far*: the measured energy of the job (``job_energy``: its GPUs plus its share of the
  host, in mJ) -> kWh x PUE x price, plus the tardiness penalty already incurred
  (``weight`` x seconds past the due date, up to now or the job's end);
- *to go*: ``predicted_cost`` of the job's assignment in the latest decision's plan (the
  manager writes ``{"assignments": [{"job", "node", "gpus", "expected_end_s",
  "predicted_cost"}, ...]}``), read tolerantly: any missing or malformed part is None.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from andreas.config import ManagerSettings
from andreas.errors import InputError
from andreas.executor.base import NodeRef
from andreas.store.engine import Store
from andreas.store.jobs import TERMINAL
from andreas.store.models import (Decision, EpochEvent, Gpu, GpuGap, HostSample, Job,
                                  JobAttempt, JobEnergy, JobState, Node, PowerSample)
from andreas.submit import resolve_job_id

MJ_PER_KWH = 3.6e9
POWER_WINDOW_S = 60.0
LIVE = (JobState.RUNNING, JobState.PREEMPTING)
_CHUNK = 1000
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class PlanEntry:
    """A job's assignment in the latest decision (every field may be missing)."""

    decision_id: int
    node: str | None = None
    gpus: int | None = None
    expected_end_s: float | None = None
    predicted_cost: float | None = None


@dataclass(frozen=True, kw_only=True)
class Costs:
    energy_kwh: float | None            # measured; None: ran but no reading yet
    energy_cost: float | None
    tardiness_cost: float               # incurred so far
    so_far: float | None
    to_go: float | None                 # the latest plan's prediction


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    id: str
    state: str
    application: str
    node: str | None                    # where it runs now (open attempt)
    gpus: int | None
    epochs_done: int
    epochs: int
    submit_s: float
    due_s: float
    finish_s: float | None              # expected (active) or actual (finished) end
    finish_actual: bool
    weight: float
    energy_kwh: float | None
    cost_so_far: float | None
    cost_to_go: float | None


@dataclass(frozen=True, kw_only=True)
class DecisionRef:
    id: int
    t: float | None = None              # None: the decision row is gone
    trigger: str | None = None
    policy: str | None = None


@dataclass(frozen=True, kw_only=True)
class AttemptRow:
    attempt: int
    node: str | None
    gpus: tuple[int, ...]
    container_id: str | None
    start_s: float | None
    end_s: float | None
    exit_code: int | None
    reason: str | None
    stop_requested_s: float | None
    energy_kwh: float | None
    started_by: DecisionRef | None
    stopped_by: DecisionRef | None


@dataclass(frozen=True, kw_only=True)
class EpochStats:
    """Finished epochs of the job on one configuration (node, GPU type, g)."""

    node: str | None
    gpu_type: str
    gpus: int
    epochs: int
    mean_s: float
    min_s: float
    max_s: float
    last_epoch: int
    last_end_s: float


@dataclass(frozen=True, kw_only=True)
class JobDetail:
    id: str
    state: str
    image: str
    application: str
    command: tuple[str, ...]
    env: dict[str, str]
    epochs: int
    epochs_done: int
    submit_s: float
    due_s: float
    weight: float
    max_gpus: int | None
    grace_s: float
    state_changed_s: float | None
    failures: int
    reason: str | None
    predicted_cost_at_submit: float | None
    finish_s: float | None
    finish_actual: bool
    plan: PlanEntry | None
    costs: Costs
    attempts: tuple[AttemptRow, ...]
    epoch_stats: tuple[EpochStats, ...]


@dataclass(frozen=True, kw_only=True)
class NodeRow:
    name: str
    state: str
    gpu_type: str
    gpu_count: int
    busy: int                           # GPUs held by running / preempting jobs
    free: int                           # usable (healthy, not MIG) and not busy
    jobs: tuple[str, ...]
    power_w: float | None               # latest GPU samples + latest host sample (60 s)
    gpu_power_w: float | None
    host_power_w: float | None
    heartbeat_age_s: float | None
    unhealthy_gpus: tuple[int, ...]     # marked unhealthy, or unreadable in the last 60 s
    mig_gpus: tuple[int, ...]
    profiling: bool


@dataclass(frozen=True, kw_only=True)
class LogSource:
    """Where an attempt's log lives."""

    job_id: str
    attempt: int
    node: NodeRef
    container_id: str
    live: bool                          # the attempt has not ended


def queue(store: Store, settings: ManagerSettings, now_s: float, *,
          include_finished: bool = False) -> list[QueueRow]:
    """Active jobs (or all with ``include_finished``): unfinished ones by due date, then
    finished ones, the most recently finished first."""
    with store.session() as s:
        stmt = select(Job.id, Job.state, Job.application, Job.epochs, Job.epochs_done,
                      Job.submit_s, Job.due_s, Job.weight, Job.state_changed_s)
        if not include_finished:
            stmt = stmt.where(Job.state.not_in(TERMINAL))
        jobs = s.execute(stmt).all()
        ids = [j.id for j in jobs]
        facts = _attempt_facts(s, ids)
        energy = _energy_mj(s, ids)
        plan = latest_plan(s)
    rows = []
    for j in jobs:
        f = facts.get(j.id, _Facts())
        entry = plan.get(j.id) if j.state not in TERMINAL else None
        finish, actual = _finish(j.state, f.last_end_s, j.state_changed_s, entry)
        costs = _costs(settings, j.weight, j.due_s, j.state, finish if actual else None,
                       now_s, f.started, energy.get(j.id), entry)
        rows.append(QueueRow(
            id=j.id, state=j.state.value, application=j.application,
            node=f.open_node, gpus=f.open_gpus, epochs_done=j.epochs_done or 0,
            epochs=j.epochs, submit_s=j.submit_s, due_s=j.due_s, finish_s=finish,
            finish_actual=actual, weight=j.weight, energy_kwh=costs.energy_kwh,
            cost_so_far=costs.so_far, cost_to_go=costs.to_go))
    active = sorted((r for r in rows if not _terminal(r.state)),
                    key=lambda r: (r.due_s, r.submit_s, r.id))
    done = sorted((r for r in rows if _terminal(r.state)),
                  key=lambda r: (-(r.finish_s or r.submit_s), r.id))
    return active + done


def show(store: Store, settings: ManagerSettings, job_id: str, now_s: float) -> JobDetail:
    """One job with its attempts (and the decisions that started and stopped them), its
    epochs per configuration and its costs; InputError for an unknown id."""
    with store.session() as s:
        job_id = resolve_job_id(s, job_id)
        j = s.execute(select(Job).where(Job.id == job_id)).scalar_one()
        attempts = s.execute(select(JobAttempt).where(JobAttempt.job_id == job_id)
                             .order_by(JobAttempt.attempt)).scalars().all()
        node_ids = {a.node_id for a in attempts if a.node_id is not None}
        events = s.execute(
            select(EpochEvent.node_id, EpochEvent.gpu_type, EpochEvent.gpus,
                   func.count(), func.avg(EpochEvent.end_s - EpochEvent.start_s),
                   func.min(EpochEvent.end_s - EpochEvent.start_s),
                   func.max(EpochEvent.end_s - EpochEvent.start_s),
                   func.max(EpochEvent.epoch), func.max(EpochEvent.end_s))
            .where(EpochEvent.job_id == job_id)
            .group_by(EpochEvent.node_id, EpochEvent.gpu_type, EpochEvent.gpus)).all()
        node_ids |= {e[0] for e in events}
        names = _node_names(s, node_ids)
        per_attempt = {a: (g, h, n) for a, g, h, n in s.execute(
            select(JobEnergy.attempt, func.sum(JobEnergy.gpu_energy_mj),
                   func.sum(JobEnergy.host_energy_mj), func.count())
            .where(JobEnergy.job_id == job_id).group_by(JobEnergy.attempt))}
        decision_ids = {d for a in attempts for d in (a.decision_id, a.stop_decision_id)
                        if d is not None}
        decisions = {i: DecisionRef(id=i, t=t, trigger=trigger, policy=policy)
                     for i, t, trigger, policy in s.execute(
                         select(Decision.id, Decision.t, Decision.trigger, Decision.policy)
                         .where(Decision.id.in_(sorted(decision_ids))))}
        entry = latest_plan(s).get(job_id) if j.state not in TERMINAL else None
        # Everything needed is read: the ORM row must not be touched after the session.
        job = {c: getattr(j, c) for c in ("id", "state", "image", "application", "command",
                                          "env", "epochs", "epochs_done", "submit_s",
                                          "due_s", "weight", "max_gpus", "grace_s",
                                          "state_changed_s", "failures", "reason",
                                          "predicted_cost")}
    rows = tuple(AttemptRow(
        attempt=a.attempt, node=names.get(a.node_id), gpus=tuple(int(g) for g in a.gpu_ids or ()),
        container_id=a.container_id, start_s=a.start_s, end_s=a.end_s, exit_code=a.exit_code,
        reason=a.reason, stop_requested_s=a.stop_requested_s,
        energy_kwh=_kwh(per_attempt.get(a.attempt)),
        started_by=_ref(a.decision_id, decisions), stopped_by=_ref(a.stop_decision_id, decisions))
        for a in attempts)
    stats = tuple(sorted((EpochStats(node=names.get(n), gpu_type=t, gpus=g, epochs=int(c),
                                     mean_s=float(mean), min_s=float(lo), max_s=float(hi),
                                     last_epoch=int(last), last_end_s=float(end))
                          for n, t, g, c, mean, lo, hi, last, end in events),
                         key=lambda e: e.last_end_s))
    ends = [a.end_s for a in attempts if a.end_s is not None]
    state = job["state"]
    finish, actual = _finish(state, max(ends) if ends else None, job["state_changed_s"], entry)
    total = _sum_energy(per_attempt.values())
    started = any(a.start_s is not None for a in attempts)
    costs = _costs(settings, job["weight"], job["due_s"], state, finish if actual else None,
                   now_s, started, total, entry)
    return JobDetail(
        id=job["id"], state=state.value, image=job["image"], application=job["application"],
        command=tuple(str(c) for c in job["command"] or ()),
        env={str(k): str(v) for k, v in (job["env"] or {}).items()},
        epochs=job["epochs"], epochs_done=job["epochs_done"] or 0, submit_s=job["submit_s"],
        due_s=job["due_s"], weight=job["weight"], max_gpus=job["max_gpus"],
        grace_s=job["grace_s"], state_changed_s=job["state_changed_s"],
        failures=job["failures"] or 0, reason=job["reason"],
        predicted_cost_at_submit=job["predicted_cost"], finish_s=finish, finish_actual=actual,
        plan=entry, costs=costs, attempts=rows, epoch_stats=stats)


def nodes(store: Store, now_s: float) -> list[NodeRow]:
    """Every node with its GPUs' use, power now and health, by name."""
    since = now_s - POWER_WINDOW_S
    with store.session() as s:
        nodes_ = s.execute(select(Node.id, Node.name, Node.state, Node.gpu_type,
                                  Node.gpu_count, Node.last_heartbeat_s, Node.profiling)
                           .order_by(Node.name)).all()
        gpus = s.execute(select(Gpu.id, Gpu.node_id, Gpu.index, Gpu.healthy,
                                Gpu.mig_enabled).where(Gpu.index >= 0)).all()
        gpu_ids = [g.id for g in gpus]
        busy: dict[int, set[int]] = defaultdict(set)
        jobs_on: dict[int, set[str]] = defaultdict(set)
        for job_id, node_id, gpu_ids_ in s.execute(
                select(JobAttempt.job_id, JobAttempt.node_id, JobAttempt.gpu_ids)
                .join(Job, Job.id == JobAttempt.job_id)
                .where(JobAttempt.end_s.is_(None), Job.state.in_(LIVE),
                       JobAttempt.node_id.is_not(None))):
            busy[node_id].update(int(i) for i in gpu_ids_ or ())
            jobs_on[node_id].add(job_id)
        gpu_power = _latest_gpu_power(s, gpu_ids, since)
        host_power = _latest_host_power(s, [n.id for n in nodes_], since)
        gaps = set()
        for chunk in _chunks(gpu_ids):
            gaps.update(s.execute(select(GpuGap.gpu_id).distinct()
                                  .where(GpuGap.gpu_id.in_(chunk), GpuGap.t >= since))
                        .scalars())
    by_node: dict[int, list[Any]] = defaultdict(list)
    for g in gpus:
        by_node[g.node_id].append(g)
    out = []
    for n in nodes_:
        mine = sorted(by_node.get(n.id, ()), key=lambda g: g.index)
        taken = busy.get(n.id, set())
        usable = [g for g in mine if g.healthy and not g.mig_enabled]
        powers = [gpu_power[g.id] for g in mine if g.id in gpu_power]
        gpu_w = sum(powers) if powers else None
        host_w = host_power.get(n.id)
        total = None if gpu_w is None and host_w is None else (gpu_w or 0.0) + (host_w or 0.0)
        out.append(NodeRow(
            name=n.name, state=n.state.value, gpu_type=n.gpu_type, gpu_count=n.gpu_count,
            busy=len(taken), free=sum(1 for g in usable if g.index not in taken),
            jobs=tuple(sorted(jobs_on.get(n.id, ()))), power_w=total, gpu_power_w=gpu_w,
            host_power_w=host_w,
            heartbeat_age_s=(None if n.last_heartbeat_s is None
                             else max(0.0, now_s - n.last_heartbeat_s)),
            unhealthy_gpus=tuple(g.index for g in mine if not g.healthy or g.id in gaps),
            mig_gpus=tuple(g.index for g in mine if g.mig_enabled),
            profiling=bool(n.profiling)))
    return out


def log_source(store: Store, job_id: str, attempt: int | None = None) -> LogSource:
    """The node and container of the job's attempt (default: the latest one)."""
    with store.session() as s:
        job_id = resolve_job_id(s, job_id)
        state = s.execute(select(Job.state).where(Job.id == job_id)).scalar_one()
        stmt = select(JobAttempt.attempt, JobAttempt.node_id, JobAttempt.container_id,
                      JobAttempt.end_s, JobAttempt.reason).where(JobAttempt.job_id == job_id)
        rows = s.execute(stmt.order_by(JobAttempt.attempt)).all()
        if not rows:
            raise InputError(f"job {job_id}: has not started yet ({state.value}); no logs")
        if attempt is None:
            row = rows[-1]
        else:
            row = next((r for r in rows if r.attempt == attempt), None)
            if row is None:
                known = ", ".join(str(r.attempt) for r in rows)
                raise InputError(f"--attempt {attempt}: job {job_id} has attempt(s) {known}")
        node = None
        if row.node_id is not None:
            node = s.execute(select(Node.name, Node.docker_endpoint)
                             .where(Node.id == row.node_id)).one_or_none()
    if row.container_id is None or node is None:
        why = f" ({row.reason})" if row.reason else ""
        raise InputError(f"job {job_id} attempt {row.attempt}: no container was created{why}")
    return LogSource(job_id=job_id, attempt=row.attempt,
                     node=NodeRef(name=node.name, docker_endpoint=node.docker_endpoint),
                     container_id=row.container_id, live=row.end_s is None)


def latest_plan(s: Session) -> dict[str, PlanEntry]:
    """The assignments of the most recent decision, by job id ({} when there is none)."""
    row = s.execute(select(Decision.id, Decision.plan)
                    .order_by(Decision.t.desc(), Decision.id.desc()).limit(1)).one_or_none()
    if row is None or not isinstance(row.plan, Mapping):
        return {}
    items = row.plan.get("assignments")
    if not isinstance(items, list):
        return {}
    out = {}
    for a in items:
        if isinstance(a, Mapping) and isinstance(a.get("job"), str):
            gpus = a.get("gpus")
            out[a["job"]] = PlanEntry(
                decision_id=row.id,
                node=a["node"] if isinstance(a.get("node"), str) else None,
                gpus=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
                expected_end_s=_num(a.get("expected_end_s")),
                predicted_cost=_num(a.get("predicted_cost")))
    return out


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True, kw_only=True)
class _Facts:
    open_node: str | None = None
    open_gpus: int | None = None
    last_end_s: float | None = None
    started: bool = False


def _attempt_facts(s: Session, ids: list[str]) -> dict[str, _Facts]:
    rows: dict[str, list[Any]] = defaultdict(list)
    for chunk in _chunks(ids):
        for r in s.execute(select(JobAttempt.job_id, JobAttempt.node_id, JobAttempt.gpu_ids,
                                  JobAttempt.start_s, JobAttempt.end_s)
                           .where(JobAttempt.job_id.in_(chunk))
                           .order_by(JobAttempt.attempt)):
            rows[r.job_id].append(r)
    names = _node_names(s, {r.node_id for rs in rows.values() for r in rs})
    out = {}
    for job_id, rs in rows.items():
        open_ = [r for r in rs if r.end_s is None and r.node_id is not None]
        ends = [r.end_s for r in rs if r.end_s is not None]
        last = open_[-1] if open_ else None
        out[job_id] = _Facts(open_node=names.get(last.node_id) if last else None,
                             open_gpus=len(last.gpu_ids or ()) if last else None,
                             last_end_s=max(ends) if ends else None,
                             started=any(r.start_s is not None for r in rs))
    return out


def _energy_mj(s: Session, ids: list[str]) -> dict[str, tuple[Any, Any, int]]:
    out = {}
    for chunk in _chunks(ids):
        for job_id, gpu, host, n in s.execute(
                select(JobEnergy.job_id, func.sum(JobEnergy.gpu_energy_mj),
                       func.sum(JobEnergy.host_energy_mj), func.count())
                .where(JobEnergy.job_id.in_(chunk)).group_by(JobEnergy.job_id)):
            out[job_id] = (gpu, host, n)
    return out


def _sum_energy(parts: Iterable[tuple[Any, Any, int]]) -> tuple[Any, Any, int] | None:
    parts = list(parts)
    if not parts:
        return None
    add = lambda xs: None if all(x is None for x in xs) else sum(int(x) for x in xs  # noqa: E731
                                                                 if x is not None)
    return add([p[0] for p in parts]), add([p[1] for p in parts]), sum(p[2] for p in parts)


def _kwh(energy: tuple[Any, Any, int] | None) -> float | None:
    """kWh of (gpu mJ, host mJ, rows); None when no part was measured."""
    if energy is None or (energy[0] is None and energy[1] is None):
        return None
    return (int(energy[0] or 0) + int(energy[1] or 0)) / MJ_PER_KWH


def _costs(settings: ManagerSettings, weight: float, due_s: float, state: JobState,
           ended_s: float | None, now_s: float, started: bool,
           energy: tuple[Any, Any, int] | None, entry: PlanEntry | None) -> Costs:
    kwh = _kwh(energy)
    if kwh is None and not started:
        kwh = 0.0                                   # never ran: truly nothing used
    energy_cost = None if kwh is None else kwh * settings.energy_pue * settings.price_per_kwh
    until = ended_s if ended_s is not None else now_s
    if state in TERMINAL and ended_s is None:
        until = due_s                               # finished, end unknown: charge nothing
    # A cancelled job is withdrawn by its user: no penalty for its due date.
    tardiness = 0.0 if state is JobState.CANCELLED else weight * max(0.0, until - due_s)
    so_far = None if energy_cost is None else energy_cost + tardiness
    return Costs(energy_kwh=kwh, energy_cost=energy_cost, tardiness_cost=tardiness,
                 so_far=so_far, to_go=entry.predicted_cost if entry else None)


def _finish(state: JobState, last_end_s: float | None, changed_s: float | None,
            entry: PlanEntry | None) -> tuple[float | None, bool]:
    """(end time, whether it is actual): a finished job's end, else the plan's estimate."""
    if state in TERMINAL:
        end = last_end_s if last_end_s is not None else changed_s
        return end, end is not None
    return (entry.expected_end_s if entry else None), False


def _latest_gpu_power(s: Session, gpu_ids: list[int], since: float) -> dict[int, float]:
    """Power of each GPU's newest sample since ``since`` (primary-key range reads)."""
    out: dict[int, float] = {}
    for chunk in _chunks(gpu_ids):
        latest = (select(PowerSample.gpu_id, func.max(PowerSample.t).label("t"))
                  .where(PowerSample.gpu_id.in_(chunk), PowerSample.t >= since)
                  .group_by(PowerSample.gpu_id).subquery())
        out.update((g, float(p)) for g, p in s.execute(
            select(PowerSample.gpu_id, PowerSample.power_w)
            .join(latest, (PowerSample.gpu_id == latest.c.gpu_id)
                  & (PowerSample.t == latest.c.t))))
    return out


def _latest_host_power(s: Session, node_ids: list[int], since: float) -> dict[int, float]:
    """Host power of each node's newest sample since ``since`` that has a reading."""
    out: dict[int, float] = {}
    for chunk in _chunks(node_ids):
        latest = (select(HostSample.node_id, func.max(HostSample.t).label("t"))
                  .where(HostSample.node_id.in_(chunk), HostSample.t >= since,
                         HostSample.host_power_w.is_not(None))
                  .group_by(HostSample.node_id).subquery())
        out.update((n, float(p)) for n, p in s.execute(
            select(HostSample.node_id, HostSample.host_power_w)
            .join(latest, (HostSample.node_id == latest.c.node_id)
                  & (HostSample.t == latest.c.t))))
    return out


def _node_names(s: Session, ids: Collection[int | None]) -> dict[int, str]:
    wanted = sorted(i for i in ids if i is not None)
    if not wanted:
        return {}
    return dict(s.execute(select(Node.id, Node.name).where(Node.id.in_(wanted))).all())


def _ref(decision_id: int | None, known: Mapping[int, DecisionRef]) -> DecisionRef | None:
    if decision_id is None:
        return None
    return known.get(decision_id, DecisionRef(id=decision_id))


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _terminal(state: str) -> bool:
    return JobState(state) in TERMINAL


def _chunks(items: list[T]) -> Iterator[list[T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]
