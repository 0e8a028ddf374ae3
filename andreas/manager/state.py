"""The store as the manager reads it at one instant: nodes with their GPUs, the jobs it acts
on and their attempts. Plain frozen views, loaded with one query per table, so the
reconciliation and the snapshot never touch ORM objects (and never lazy-load)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from andreas.executor.base import NodeRef
from andreas.store.models import Gpu, Job, JobAttempt, JobState, Node, NodeState

# Jobs the manager plans or watches; terminal jobs are loaded only while an attempt is open.
ACTIVE = (JobState.QUEUED, JobState.RUNNING, JobState.PREEMPTING, JobState.PREEMPTED)
LIVE = (JobState.RUNNING, JobState.PREEMPTING)        # an attempt (container) should exist
WAITING = (JobState.QUEUED, JobState.PREEMPTED)
FAKE_GPU_PREFIX = "GPU-fake-"


@dataclass(frozen=True, kw_only=True)
class GpuView:
    index: int
    uuid: str
    usable: bool          # healthy, not MIG, still on the node (index >= 0)


@dataclass(frozen=True, kw_only=True)
class NodeView:
    id: int
    name: str
    endpoint: str
    gpu_type: str
    gpu_count: int
    state: NodeState
    profiling: bool
    gpus: tuple[GpuView, ...]

    @property
    def ref(self) -> NodeRef:
        return NodeRef(name=self.name, docker_endpoint=self.endpoint)

    @property
    def usable(self) -> tuple[GpuView, ...]:
        return tuple(g for g in self.gpus if g.usable)

    @property
    def fake(self) -> bool:
        return bool(self.gpus) and all(g.uuid.startswith(FAKE_GPU_PREFIX) for g in self.gpus)

    def uuid_of(self, index: int) -> str | None:
        return next((g.uuid for g in self.gpus if g.index == index), None)

    def index_of(self, uuid: str) -> int | None:
        return next((g.index for g in self.gpus if g.uuid == uuid), None)


@dataclass(frozen=True, kw_only=True)
class AttemptView:
    id: int
    job_id: str
    attempt: int
    node_id: int | None
    gpu_ids: tuple[int, ...]
    container_id: str | None
    start_s: float | None
    end_s: float | None
    exit_code: int | None
    decision_id: int | None
    stop_decision_id: int | None
    stop_requested_s: float | None
    reason: str | None = None

    @property
    def open(self) -> bool:
        return self.end_s is None


@dataclass(frozen=True, kw_only=True)
class JobView:
    id: str
    state: JobState
    image: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    epochs: int
    epochs_done: int
    submit_s: float
    due_s: float
    weight: float
    application: str
    grace_s: float
    failures: int
    max_gpus: int | None
    predicted_cost: float | None
    attempts: tuple[AttemptView, ...] = ()

    @property
    def latest(self) -> AttemptView | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def open_attempts(self) -> tuple[AttemptView, ...]:
        return tuple(a for a in self.attempts if a.open)


@dataclass(frozen=True, kw_only=True)
class StoreState:
    nodes: Mapping[str, NodeView]
    jobs: Mapping[str, JobView]
    nodes_by_id: Mapping[int, NodeView] = field(default_factory=dict)

    def node_of(self, attempt: AttemptView) -> NodeView | None:
        return self.nodes_by_id.get(attempt.node_id) if attempt.node_id is not None else None


def load_nodes(s: Session) -> dict[str, NodeView]:
    gpus: dict[int, list[GpuView]] = defaultdict(list)
    for node_id, index, uuid, healthy, mig in s.execute(
            select(Gpu.node_id, Gpu.index, Gpu.uuid, Gpu.healthy, Gpu.mig_enabled)
            .order_by(Gpu.node_id, Gpu.index)):
        gpus[node_id].append(GpuView(index=index, uuid=uuid,
                                     usable=bool(healthy) and not mig and index >= 0))
    out = {}
    for r in s.execute(select(Node.id, Node.name, Node.docker_endpoint, Node.gpu_type,
                              Node.gpu_count, Node.state, Node.profiling).order_by(Node.name)):
        out[r.name] = NodeView(id=r.id, name=r.name, endpoint=r.docker_endpoint,
                               gpu_type=r.gpu_type, gpu_count=r.gpu_count, state=r.state,
                               profiling=bool(r.profiling),
                               gpus=tuple(g for g in gpus.get(r.id, ()) if g.index >= 0))
    return out


_JOB_COLUMNS = (Job.id, Job.state, Job.image, Job.command, Job.env, Job.epochs, Job.epochs_done,
                Job.submit_s, Job.due_s, Job.weight, Job.application, Job.grace_s,
                Job.failures, Job.max_gpus, Job.predicted_cost)
_ATTEMPT_COLUMNS = (JobAttempt.id, JobAttempt.job_id, JobAttempt.attempt, JobAttempt.node_id,
                    JobAttempt.gpu_ids, JobAttempt.container_id, JobAttempt.start_s,
                    JobAttempt.end_s, JobAttempt.exit_code, JobAttempt.decision_id,
                    JobAttempt.stop_decision_id, JobAttempt.stop_requested_s,
                    JobAttempt.reason)


def load_jobs(s: Session, *, ids: Iterable[str] | None = None) -> dict[str, JobView]:
    """Active jobs plus terminal jobs with an open attempt (default), or the given ids."""
    if ids is None:
        open_ids = select(JobAttempt.job_id).where(JobAttempt.end_s.is_(None))
        where = or_(Job.state.in_(ACTIVE), Job.id.in_(open_ids))
    else:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        where = Job.id.in_(wanted)
    rows = s.execute(select(*_JOB_COLUMNS).where(where)).all()
    if not rows:
        return {}
    job_ids = [r.id for r in rows]
    attempts: dict[str, list[AttemptView]] = defaultdict(list)
    for chunk in range(0, len(job_ids), 1000):
        for a in s.execute(select(*_ATTEMPT_COLUMNS)
                           .where(JobAttempt.job_id.in_(job_ids[chunk:chunk + 1000]))
                           .order_by(JobAttempt.job_id, JobAttempt.attempt)):
            attempts[a.job_id].append(_attempt(a))
    return {r.id: _job(r, tuple(attempts.get(r.id, ()))) for r in rows}


def load_state(s: Session) -> StoreState:
    nodes = load_nodes(s)
    return StoreState(nodes=MappingProxyType(nodes), jobs=MappingProxyType(load_jobs(s)),
                      nodes_by_id=MappingProxyType({n.id: n for n in nodes.values()}))


def _attempt(a: Any) -> AttemptView:
    return AttemptView(id=a.id, job_id=a.job_id, attempt=a.attempt, node_id=a.node_id,
                       gpu_ids=tuple(int(i) for i in (a.gpu_ids or ())),
                       container_id=a.container_id, start_s=a.start_s, end_s=a.end_s,
                       exit_code=a.exit_code, decision_id=a.decision_id,
                       stop_decision_id=a.stop_decision_id, stop_requested_s=a.stop_requested_s,
                       reason=a.reason)


def _job(r: Any, attempts: tuple[AttemptView, ...]) -> JobView:
    return JobView(id=r.id, state=r.state, image=r.image,
                   command=tuple(str(c) for c in (r.command or ())),
                   env=MappingProxyType({str(k): str(v) for k, v in (r.env or {}).items()}),
                   epochs=r.epochs, epochs_done=r.epochs_done or 0, submit_s=r.submit_s,
                   due_s=r.due_s, weight=r.weight, application=r.application,
                   grace_s=r.grace_s if r.grace_s is not None else 120.0,
                   failures=r.failures or 0, max_gpus=r.max_gpus,
                   predicted_cost=r.predicted_cost, attempts=attempts)
