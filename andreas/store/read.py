"""The one read model of nodes, jobs and attempts: plain frozen rows, loaded with one query
per table (IN-clauses in chunks), so that the manager, the user views and the reports
never touch ORM objects (and never lazy-load) and map the same columns once."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sqlalchemy import JSON, ColumnElement, and_, column, or_, select, table

from andreas.store.chunks import chunks
from andreas.store.jobs import ACTIVE, TERMINAL
from andreas.store.models import Gpu, JobState, Node, NodeState
from andreas.store.nodes import Db
from andreas.store.jobs import LIVE
from andreas.store.owners import attempts_table, jobs_table, owned_by, restricted
from andreas.store.tables import job_attempts, jobs

log = logging.getLogger(__name__)
_UNREADABLE: set[int] = set()          # attempts whose gpu_ids were said to be unreadable

FAKE_GPU_PREFIX = "GPU-fake-"
DEFAULT_GRACE_S = 120.0              # a job row without grace_s (older rows)


@dataclass(frozen=True, kw_only=True)
class GpuView:
    id: int
    index: int
    uuid: str
    healthy: bool
    mig: bool
    memory_mib: int = 0
    engine_held: bool = False     # the engine says it is not ours now (andreas.manager.engine_view)

    @property
    def usable(self) -> bool:
        """Healthy, not MIG and not held back by the engine (a node's views hold only GPUs
        still on it)."""
        return self.healthy and not self.mig and not self.engine_held


@dataclass(frozen=True, kw_only=True)
class NodeView:
    id: int
    name: str
    endpoint: str
    gpu_type: str
    gpu_count: int
    state: NodeState
    profiling: bool
    gpus: tuple[GpuView, ...]         # still on the node (index >= 0), by index
    last_heartbeat_s: float | None = None
    state_changed_s: float | None = None     # the manager's or an operator's last move

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

    def positions(self, indexes: tuple[int, ...]) -> tuple[int, ...]:
        """GPU indexes as positions among the usable GPUs, the optimizer's GPU ids
        (-1: a GPU not usable now)."""
        where = {g.index: k for k, g in enumerate(self.usable)}
        return tuple(where.get(i, -1) for i in indexes)


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
    gpu_milli: int | None = None          # its share of gpu_ids[0]; None: whole GPUs
    profiling: bool = False               # a run of the manager's automatic profiling

    @property
    def open(self) -> bool:
        return self.end_s is None

    def held_milli(self) -> dict[int, int]:
        """Milli-GPU the attempt holds per GPU index."""
        share = self.gpu_milli if self.gpu_milli is not None else 1000
        return {i: share for i in self.gpu_ids}


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
    state_changed_s: float | None = None
    reason: str | None = None
    attempts: tuple[AttemptView, ...] = ()
    gpu_milli: int | None = None          # a share of one GPU; None: whole GPUs (elastic)
    gpu_memory_mib: int | None = None
    owner: str | None = None              # None: submitted before owners were recorded
    # Fields whose stored JSON did not read as what they must be (a row edited by hand):
    # shown as unknown; the manager fails such a job rather than run it with a guess.
    unreadable: tuple[str, ...] = ()

    @property
    def latest(self) -> AttemptView | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def open_attempts(self) -> tuple[AttemptView, ...]:
        return tuple(a for a in self.attempts if a.open)


def load_nodes(db: Db) -> dict[str, NodeView]:
    """Every node by name, with the GPUs it still has (index >= 0) in index order."""
    gpus: dict[int, list[GpuView]] = defaultdict(list)
    for gpu_id, node_id, index, uuid, healthy, mig, memory in db.execute(
            select(Gpu.id, Gpu.node_id, Gpu.index, Gpu.uuid, Gpu.healthy, Gpu.mig_enabled,
                   Gpu.memory_mib)
            .where(Gpu.index >= 0).order_by(Gpu.node_id, Gpu.index)):
        gpus[node_id].append(GpuView(id=gpu_id, index=index, uuid=uuid, healthy=bool(healthy),
                                     mig=bool(mig), memory_mib=int(memory or 0)))
    out = {}
    for r in db.execute(select(Node.id, Node.name, Node.docker_endpoint, Node.gpu_type,
                               Node.gpu_count, Node.state, Node.profiling,
                               Node.last_heartbeat_s, Node.state_changed_s)
                       .order_by(Node.name)):
        out[r.name] = NodeView(id=r.id, name=r.name, endpoint=r.docker_endpoint,
                               gpu_type=r.gpu_type, gpu_count=r.gpu_count, state=r.state,
                               profiling=bool(r.profiling), gpus=tuple(gpus.get(r.id, ())),
                               last_heartbeat_s=r.last_heartbeat_s,
                               state_changed_s=r.state_changed_s)
    return out


def node_names(db: Db, ids: Collection[int | None]) -> dict[int, str]:
    """Node id -> name for the given ids (None and unknown ids are left out)."""
    out: dict[int, str] = {}
    for chunk in chunks(sorted({i for i in ids if i is not None})):
        out.update(db.execute(select(Node.id, Node.name).where(Node.id.in_(chunk))).all())
    return out


# Migration 0011: every open attempt of a live job, readable by people's own accounts.
NODE_JOBS = table("node_jobs", column("node_id"), column("job_id"), column("gpu_ids", JSON))


def node_jobs(db: Db) -> list[tuple[int, str, tuple[int, ...]]]:
    """(node id, job id, GPU indexes) of every open attempt of a running or stopping job
    (``andreas nodes``): everyone's, also for a MariaDB submitter (view ``node_jobs``)."""
    if restricted(db):
        rows = db.execute(select(NODE_JOBS.c.node_id, NODE_JOBS.c.job_id,
                                 NODE_JOBS.c.gpu_ids))
    else:
        a = job_attempts.c
        rows = db.execute(select(a.node_id, a.job_id, a.gpu_ids)
                          .join(jobs, jobs.c.id == a.job_id)
                          .where(a.end_s.is_(None), a.node_id.is_not(None),
                                 jobs.c.state.in_(LIVE)))
    return [(int(n), str(j), tuple(int(i) for i in (g or ()))) for n, j, g in rows]


_JOB_COLUMNS = ("id", "state", "image", "command", "env", "epochs", "epochs_done", "submit_s",
                "due_s", "weight", "application", "grace_s", "failures", "max_gpus",
                "predicted_cost", "state_changed_s", "reason", "gpu_milli", "gpu_memory_mib",
                "owner")
_ATTEMPT_COLUMNS = ("id", "job_id", "attempt", "node_id", "gpu_ids", "container_id", "start_s",
                    "end_s", "exit_code", "decision_id", "stop_decision_id",
                    "stop_requested_s", "reason", "gpu_milli", "profiling")


def load_jobs(db: Db, *, ids: Iterable[str] | None = None) -> dict[str, JobView]:
    """The jobs the manager acts on (default: active jobs plus terminal jobs with an open
    attempt), or exactly the given ids; each with all its attempts in order. A MariaDB
    submitter's session sees only its own jobs (:mod:`andreas.store.owners`)."""
    jobs, attempts = jobs_table(db).c, attempts_table(db).c
    if ids is None:
        open_ids = select(attempts.job_id).where(attempts.end_s.is_(None))
        return _with_attempts(db, _rows(db, or_(jobs.state.in_(ACTIVE),
                                                jobs.id.in_(open_ids))))
    rows: list[Any] = []
    for chunk in chunks(sorted(set(ids))):
        rows.extend(_rows(db, jobs.id.in_(chunk)))
    return _with_attempts(db, rows)


def load_queue(db: Db, *, include_finished: bool = False,
               owner: str | None = None) -> dict[str, JobView]:
    """Unfinished jobs (or every job), each with all its attempts; only ``owner``'s when
    given."""
    jobs = jobs_table(db).c
    where = [] if include_finished else [jobs.state.not_in(TERMINAL)]
    if owner is not None:
        where.append(owned_by(db, jobs.owner, owner))
    return _with_attempts(db, _rows(db, and_(*where) if where else None))


def _rows(db: Db, where: ColumnElement[bool] | None) -> list[Any]:
    t = jobs_table(db)
    stmt = select(*(t.c[name] for name in _JOB_COLUMNS))
    return list(db.execute(stmt if where is None else stmt.where(where)))


def _with_attempts(db: Db, rows: list[Any]) -> dict[str, JobView]:
    t = attempts_table(db)
    attempts: dict[str, list[AttemptView]] = defaultdict(list)
    for chunk in chunks([r.id for r in rows]):
        for a in db.execute(select(*(t.c[name] for name in _ATTEMPT_COLUMNS))
                            .where(t.c.job_id.in_(chunk))
                            .order_by(t.c.job_id, t.c.attempt)):
            attempts[a.job_id].append(_attempt(a))
    return {r.id: _job(r, tuple(attempts.get(r.id, ()))) for r in rows}


def _listed(value: Any, kind: type) -> tuple | None:
    """A JSON list whose items are all ``kind`` (bools are no ints), as a tuple; None for
    anything else (a value that did not parse reads as None: ``engine.read_json``)."""
    if not isinstance(value, list) or not all(
            isinstance(v, kind) and not isinstance(v, bool) for v in value):
        return None
    return tuple(value)


def _mapped(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return value


def _attempt(a: Any) -> AttemptView:
    gpu_ids = _listed(a.gpu_ids, int)
    if gpu_ids is None and a.id not in _UNREADABLE and len(_UNREADABLE) < 1000:
        _UNREADABLE.add(a.id)                     # said once, not at every tick
        log.error("attempt %s of job %s: stored gpu_ids %r are not a list of GPU indexes; "
                  "read as none", a.attempt, a.job_id, str(a.gpu_ids)[:40])
    return AttemptView(id=a.id, job_id=a.job_id, attempt=a.attempt, node_id=a.node_id,
                       gpu_ids=gpu_ids or (),
                       container_id=a.container_id, start_s=a.start_s, end_s=a.end_s,
                       exit_code=a.exit_code, decision_id=a.decision_id,
                       stop_decision_id=a.stop_decision_id, stop_requested_s=a.stop_requested_s,
                       reason=a.reason, gpu_milli=a.gpu_milli, profiling=bool(a.profiling))


def _job(r: Any, attempts: tuple[AttemptView, ...]) -> JobView:
    command, env = _listed(r.command, str), _mapped(r.env)
    unreadable = tuple(name for name, v in (("command", command), ("env", env)) if v is None)
    return JobView(id=r.id, state=r.state, image=r.image, command=command or (),
                   env=MappingProxyType(env or {}), unreadable=unreadable,
                   epochs=r.epochs, epochs_done=r.epochs_done or 0, submit_s=r.submit_s,
                   due_s=r.due_s, weight=r.weight, application=r.application,
                   grace_s=r.grace_s if r.grace_s is not None else DEFAULT_GRACE_S,
                   failures=r.failures or 0, max_gpus=r.max_gpus,
                   predicted_cost=r.predicted_cost, state_changed_s=r.state_changed_s,
                   reason=r.reason, attempts=attempts, gpu_milli=r.gpu_milli,
                   gpu_memory_mib=r.gpu_memory_mib, owner=r.owner)
