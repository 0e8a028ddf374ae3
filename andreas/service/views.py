"""Read-only views of the store for people: the queue, one job in detail, the nodes.

Each function returns plain frozen rows (no ORM objects, nothing lazy), so the CLI only
formats them and ``--json`` is ``dataclasses.asdict``. Missing data is ``None`` (shown as
"-"), never a guess: a job without energy readings has no energy cost, a job the latest
decision did not place has no expected finish.

Costs, in the currency of ``[manager] price_per_kwh``:

- *so far*: the measured energy of the job (``job_energy``: its GPUs plus its share of the
  host, in mJ) -> kWh x PUE x price (with ``[manager] tariff``: each window's kWh x
  price(t) x PUE(t) when it was used), plus the tardiness penalty already incurred
  (``weight`` x seconds past the due date, up to now or the job's end);
- *to go*: ``predicted_cost`` of the job's assignment in the latest decision's plan (the
  manager writes ``{"assignments": [{"job", "node", "gpus", "expected_end_s",
  "predicted_cost"}, ...]}``), read tolerantly (any missing or malformed part is None) by
  :func:`andreas.manager.plandoc.read_assignments`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from andreas.config import ManagerSettings
from andreas.accounting import MJ_PER_KWH, late_s, spread
from andreas.errors import InputError
from andreas.executor.base import DRY_RUN_PREFIX, NodeRef
from andreas.manager.plandoc import PlanEntry, read_assignments, read_job_action
from andreas.manager.snapshot import settings_prices
from andreas.store.attempts import stored_log
from andreas.store.decisions import (DecisionInfo, DecisionRef, decision_refs, latest_decision,
                                     recent_decisions)
from andreas.store.engine import Store
from andreas.store.epochs import ConfigEpochs, job_epochs, max_epochs
from andreas.store.jobs import TERMINAL
from andreas.store.models import JobState
from andreas.store.nodes import Db
from andreas.store.read import (JobView, load_jobs, load_nodes, load_queue, node_jobs,
                                node_names)
from andreas.store.readings import (EnergyTotal, attempt_energy, gpus_with_gaps, job_energy,
                                    job_energy_parts, latest_gpu_power, latest_host_power,
                                    total)
from andreas.store.lookup import resolve_job_id
from andreas.store.owners import access, require

POWER_WINDOW_S = 60.0
HISTORY_DECISIONS = 100          # `andreas show`: the decisions read for a job's history


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
    # (source, confidence) of the plan's epoch-time estimate behind finish_s (None: no plan)
    estimate: tuple[str | None, float | None] | None = None
    owner: str | None = None            # None: submitted before owners were recorded
    dry_run: bool = False               # its open attempt is a dry run's: nothing runs


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
class DecisionAction:
    """What the decisions did with a job: runs of the same action collapsed, so a job
    that waited through 40 decisions for the same reason is one row (``decisions``: 40,
    ``first_t``..``t``)."""

    decision_id: int                    # the newest of the run
    t: float
    trigger: str
    policy: str
    action: str
    node: str | None
    gpus: int | None
    reason: str
    decisions: int = 1
    first_t: float | None = None


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
    gpu_milli: int | None
    gpu_memory_mib: int | None
    state_changed_s: float | None
    failures: int
    reason: str | None
    predicted_cost_at_submit: float | None
    finish_s: float | None
    finish_actual: bool
    plan: PlanEntry | None
    costs: Costs
    attempts: tuple[AttemptRow, ...]
    epoch_stats: tuple[ConfigEpochs, ...]
    owner: str | None = None
    # what the last HISTORY_DECISIONS decisions since its submission did with it, newest first
    history: tuple[DecisionAction, ...] = ()
    dry_run: bool = False               # its open attempt is a dry run's: nothing runs


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
    # The container was removed (retention): the end of its log, kept in the store, and
    # when it was kept; None while the container still has the log.
    kept: str | None = None
    kept_s: float | None = None


def queue(store: Store, settings: ManagerSettings, now_s: float, *,
          include_finished: bool = False, mine: bool = False) -> list[QueueRow]:
    """Active jobs (or all with ``include_finished``): unfinished ones by due date, then
    finished ones, the most recently finished first. ``mine``: only the caller's jobs (a
    MariaDB submitter never sees others')."""
    with store.session() as s:
        owner = access(s).user if mine else None
        jobs = load_queue(s, include_finished=include_finished, owner=owner)
        names = node_names(s, {a.node_id for j in jobs.values() for a in j.attempts})
        energy = job_energy(s, list(jobs))
        measured = max_epochs(s, [j for j, v in jobs.items() if v.state not in TERMINAL])
        parts = job_energy_parts(s, list(jobs)) if settings.tariff_file is not None else {}
        plan = latest_plan(s)
    rows = []
    for j in jobs.values():
        entry = plan.get(j.id) if j.state not in TERMINAL else None
        finish, actual = _finish(j, entry)
        costs = _costs(settings, j, finish if actual else None, now_s, energy.get(j.id), entry,
                       parts.get(j.id, ()))
        placed = [a for a in j.open_attempts if a.node_id is not None]
        here = placed[-1] if placed else None
        rows.append(QueueRow(
            id=j.id, state=j.state.value, application=j.application,
            node=names.get(here.node_id) if here is not None and here.node_id is not None
            else None,
            gpus=len(here.gpu_ids) if here is not None else None,
            epochs_done=min(j.epochs, max(j.epochs_done, measured.get(j.id, 0))),
            epochs=j.epochs, submit_s=j.submit_s, due_s=j.due_s, finish_s=finish,
            finish_actual=actual, weight=j.weight, energy_kwh=costs.energy_kwh,
            cost_so_far=costs.so_far, cost_to_go=costs.to_go,
            estimate=(entry.estimate_source, entry.confidence) if entry else None,
            owner=j.owner, dry_run=_dry_run(j)))
    active = sorted((r for r in rows if not _terminal(r.state)),
                    key=lambda r: (r.due_s, r.submit_s, r.id))
    done = sorted((r for r in rows if _terminal(r.state)),
                  key=lambda r: (-(r.finish_s or r.submit_s), r.id))
    return active + done


def show(store: Store, settings: ManagerSettings, job_id: str, now_s: float) -> JobDetail:
    """One job with its attempts (and the decisions that started and stopped them), its
    epochs per configuration and its costs; InputError for an unknown id, NotPermitted
    for someone else's job (its env, command and log tails are its owner's)."""
    with store.session() as s:
        job_id = resolve_job_id(s, job_id)
        job = load_jobs(s, ids=[job_id])[job_id]
        require(access(s), job_id, job.owner, "read")
        epochs = job_epochs(s, job_id)
        names = node_names(s, {a.node_id for a in job.attempts})
        per_attempt = attempt_energy(s, job_id)
        parts = (job_energy_parts(s, [job_id]).get(job_id, [])
                 if settings.tariff_file is not None else [])
        decisions = decision_refs(s, {d for a in job.attempts
                                      for d in (a.decision_id, a.stop_decision_id)
                                      if d is not None})
        entry = latest_plan(s).get(job_id) if job.state not in TERMINAL else None
        history = _history(recent_decisions(s, job.submit_s, HISTORY_DECISIONS), job_id)
        done = max_epochs(s, [job_id]).get(job_id, 0)
    rows = tuple(AttemptRow(
        attempt=a.attempt, node=names.get(a.node_id) if a.node_id is not None else None,
        gpus=a.gpu_ids, container_id=a.container_id, start_s=a.start_s, end_s=a.end_s,
        exit_code=a.exit_code, reason=a.reason, stop_requested_s=a.stop_requested_s,
        energy_kwh=_kwh(per_attempt.get(a.attempt)),
        started_by=_ref(a.decision_id, decisions), stopped_by=_ref(a.stop_decision_id, decisions))
        for a in job.attempts)
    finish, actual = _finish(job, entry)
    costs = _costs(settings, job, finish if actual else None, now_s,
                   total(per_attempt.values()), entry, parts)
    return JobDetail(
        id=job.id, state=job.state.value, image=job.image, application=job.application,
        command=("<unreadable stored value>",) if "command" in job.unreadable else job.command,
        env=dict(job.env), epochs=job.epochs,
        epochs_done=min(job.epochs, max(job.epochs_done, done)),
        submit_s=job.submit_s, due_s=job.due_s, weight=job.weight, max_gpus=job.max_gpus,
        grace_s=job.grace_s, gpu_milli=job.gpu_milli, gpu_memory_mib=job.gpu_memory_mib,
        state_changed_s=job.state_changed_s, failures=job.failures,
        reason=job.reason, predicted_cost_at_submit=job.predicted_cost, finish_s=finish,
        finish_actual=actual, plan=entry, costs=costs, attempts=rows, epoch_stats=tuple(epochs),
        owner=job.owner, history=history, dry_run=_dry_run(job))


def _dry_run(job: JobView) -> bool:
    """Whether the job's open attempt was "started" by a dry run (no container exists)."""
    return any((a.container_id or "").startswith(DRY_RUN_PREFIX) for a in job.open_attempts)


def _history(decisions: Iterable[DecisionInfo], job_id: str) -> tuple[DecisionAction, ...]:
    """The job's actions in ``decisions`` (newest first), equal neighbours collapsed."""
    out: list[DecisionAction] = []
    for d in decisions:
        act = read_job_action(d.plan, job_id)
        if act is None:
            continue
        row = DecisionAction(decision_id=d.id, t=d.t_s, trigger=d.trigger, policy=d.policy,
                             action=act.kind, node=act.node, gpus=act.gpus,
                             reason=act.reason)
        last = out[-1] if out else None
        if last is not None and (last.action, last.node, last.gpus, last.reason) == (
                row.action, row.node, row.gpus, row.reason):
            out[-1] = replace(last, decisions=last.decisions + 1, first_t=row.t)
        else:
            out.append(row)
    return tuple(out)


def nodes(store: Store, now_s: float) -> list[NodeRow]:
    """Every node with its GPUs' use, power now and health, by name."""
    since = now_s - POWER_WINDOW_S
    with store.session() as s:
        nodes_ = list(load_nodes(s).values())
        gpu_ids = [g.id for n in nodes_ for g in n.gpus]
        busy: dict[int, set[int]] = defaultdict(set)
        jobs_on: dict[int, set[str]] = defaultdict(set)
        for node_id, job_id, held in node_jobs(s):
            busy[node_id].update(held)
            jobs_on[node_id].add(job_id)
        gpu_power = latest_gpu_power(s, gpu_ids, since)
        host_power = latest_host_power(s, [n.id for n in nodes_], since)
        gaps = gpus_with_gaps(s, gpu_ids, since)
    out = []
    for n in nodes_:
        taken = busy.get(n.id, set())
        powers = [gpu_power[g.id] for g in n.gpus if g.id in gpu_power]
        gpu_w = sum(powers) if powers else None
        host_w = host_power.get(n.id)
        total_w = None if gpu_w is None and host_w is None else (gpu_w or 0.0) + (host_w or 0.0)
        out.append(NodeRow(
            name=n.name, state=n.state.value, gpu_type=n.gpu_type, gpu_count=n.gpu_count,
            busy=len(taken), free=sum(1 for g in n.usable if g.index not in taken),
            jobs=tuple(sorted(jobs_on.get(n.id, ()))), power_w=total_w, gpu_power_w=gpu_w,
            host_power_w=host_w,
            heartbeat_age_s=(None if n.last_heartbeat_s is None
                             else max(0.0, now_s - n.last_heartbeat_s)),
            unhealthy_gpus=tuple(g.index for g in n.gpus if not g.healthy or g.id in gaps),
            mig_gpus=tuple(g.index for g in n.gpus if g.mig),
            profiling=n.profiling))
    return out


def log_source(store: Store, job_id: str, attempt: int | None = None) -> LogSource:
    """The node and container of the job's attempt (default: the latest one); NotPermitted
    for someone else's job."""
    with store.session() as s:
        job_id = resolve_job_id(s, job_id)
        job = load_jobs(s, ids=[job_id])[job_id]
        require(access(s), job_id, job.owner, "read the logs of")
        rows = job.attempts
        if not rows:
            raise InputError(f"job {job_id}: has not started yet ({job.state.value}); no logs")
        if attempt is None:
            row = rows[-1]
        else:
            found = next((r for r in rows if r.attempt == attempt), None)
            if found is None:
                known = ", ".join(str(r.attempt) for r in rows)
                raise InputError(f"attempt {attempt}: job {job_id} has attempt(s) {known}",
                                 field="attempt")
            row = found
        node = None
        if row.node_id is not None:
            node = next((n for n in load_nodes(s).values() if n.id == row.node_id), None)
        kept = stored_log(s, row.id)
    if row.container_id is None or node is None:
        why = f" ({row.reason})" if row.reason else ""
        raise InputError(f"job {job_id} attempt {row.attempt}: no container was created{why}")
    return LogSource(job_id=job_id, attempt=row.attempt,
                     node=NodeRef(name=node.name, docker_endpoint=node.endpoint),
                     container_id=row.container_id, live=row.end_s is None,
                     kept=kept[0] if kept else None, kept_s=kept[1] if kept else None)


def latest_plan(db: Db) -> dict[str, PlanEntry]:
    """The assignments of the latest decision (the manager's target), by job id ({} when
    there is none)."""
    latest = latest_decision(db)
    return {} if latest is None else read_assignments(latest.id, latest.plan)


# --------------------------------------------------------------------------- helpers


def _mj(energy: EnergyTotal | None) -> int | None:
    """GPU + host mJ; None when no part was measured."""
    if energy is None or (energy.gpu_mj is None and energy.host_mj is None):
        return None
    return (energy.gpu_mj or 0) + (energy.host_mj or 0)


def _kwh(energy: EnergyTotal | None) -> float | None:
    mj = _mj(energy)
    return None if mj is None else mj / MJ_PER_KWH


def _costs(settings: ManagerSettings, job: JobView, ended_s: float | None, now_s: float,
           energy: EnergyTotal | None, entry: PlanEntry | None,
           parts: Iterable[tuple[float, float, float]] = ()) -> Costs:
    """``parts``: the job's energy windows (mJ, start, end), read only with a tariff."""
    mj = _mj(energy)
    if mj is None and not any(a.start_s is not None for a in job.attempts):
        mj = 0                                      # never ran: truly nothing used
    kwh = None if mj is None else mj / MJ_PER_KWH
    money = None if kwh is None else settings_prices(settings).bill(kwh, spread(parts))
    tardiness = job.weight * late_s(due_s=job.due_s, end_s=ended_s, now_s=now_s,
                                    cancelled=job.state is JobState.CANCELLED,
                                    finished=job.state in TERMINAL)
    so_far = None if money is None else money + tardiness
    return Costs(energy_kwh=kwh, energy_cost=money, tardiness_cost=tardiness,
                 so_far=so_far, to_go=entry.predicted_cost if entry else None)


def _finish(job: JobView, entry: PlanEntry | None) -> tuple[float | None, bool]:
    """(end time, whether it is actual): a finished job's end (its last attempt's, else its
    last state change), else the plan's estimate."""
    if job.state in TERMINAL:
        ends = [a.end_s for a in job.attempts if a.end_s is not None]
        end = max(ends) if ends else job.state_changed_s
        return end, end is not None
    return (entry.expected_end_s if entry else None), False


def _ref(decision_id: int | None, known: Mapping[int, DecisionRef]) -> DecisionRef | None:
    if decision_id is None:
        return None
    return known.get(decision_id, DecisionRef(id=decision_id))


def _terminal(state: str) -> bool:
    return JobState(state) in TERMINAL
