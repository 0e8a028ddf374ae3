"""The agent's side of the database: node registration and idempotent batch writes.

Why it is shaped like this:

- **One transaction per batch**, every table at once (GPU and host samples with their
  1-minute aggregates, gaps, epochs, job energy, the heartbeat): a batch is either stored
  whole or not at all, which is what lets the spool's committed sequence mean "stored".
- **Every insert skips rows already stored** (``skip_duplicates``): after a lost
  connection the agent cannot know whether its last commit arrived, so it may send a
  batch twice; the second time changes nothing.
- **Errors are sorted by what to do about them** (:func:`classify`): ``transient``
  (server down, connection lost, lock timeout: spool and retry with back-off),
  ``refused`` (the database answers but will not take writes from this agent: wrong
  password, missing privilege, schema not at head, node not registered; spool, retry
  slowly and log an error naming the fix, since no record is wrong) and ``data`` (this
  batch holds a row the store rejects: retrying cannot help, so the delivery side sets
  the bad entries aside). Only the first two are retried.
- **Registration** (node row: name, Docker endpoint, GPU type and count; GPU rows keyed
  by UUID) happens before the first write. The ``andreas_agent`` MariaDB account may read
  the inventory but not change it (least privilege: a compromised node must not add
  nodes for the manager to schedule on), so on MariaDB a new node is registered once
  with the manager's account (``andreas-agent --register``, or the install script);
  afterwards the agent only checks that the inventory still matches. On SQLite (one
  machine) the agent registers itself.
- The agent never overrides an operator: it sets its node ``up`` at start only if it was
  ``down``, and ``down`` at a clean stop only if it was ``up`` (``draining`` stays).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError

from agents.entries import HEARTBEAT, Entry
from agents.records import GpuInfo
from andreas.config import mask_url
from andreas.errors import InputError
from andreas.store.engine import describe_error, error_code, is_sqlite, make_engine
from andreas.store.errors import StoreError
from andreas.store.models import Gpu, Node, NodeState
from andreas.store.samples import (GapRow, HostRow, JobEnergyRow, PowerRow, insert_epoch_events,
                                   insert_gpu_gaps, insert_host_samples, insert_job_energy,
                                   insert_power_samples)

log = logging.getLogger(__name__)

# Server gone, unreachable, overloaded, shutting down, read-only during a fail-over,
# lock wait timeout, deadlock, connection killed.
TRANSIENT_CODES = frozenset({2002, 2003, 2005, 2006, 2013, 2055, 1040, 1053, 1205, 1213, 1290,
                             1836, 1927, 4031})
# The server answers but refuses this account or this schema.
REFUSED_CODES = frozenset({1044, 1045, 1049, 1142, 1143, 1146, 1054, 1227, 1370})


class DeliveryError(Exception):
    """A batch was not stored; ``kind`` says what to do (see :func:`classify`)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class RegistrationRefused(StoreError):
    """The node's inventory must be written but this account may not write it."""


def classify(e: BaseException) -> str:
    """``transient`` | ``refused`` | ``data`` for an exception raised while writing."""
    if isinstance(e, DeliveryError):
        return e.kind
    if isinstance(e, RegistrationRefused):
        return "refused"
    if isinstance(e, (IntegrityError, InputError)):
        return "data"
    if isinstance(e, DBAPIError):
        if e.connection_invalidated or isinstance(e, InterfaceError):
            return "transient"
        code = error_code(e)
        if code in TRANSIENT_CODES:
            return "transient"
        if code in REFUSED_CODES:
            return "refused"
        text = str(getattr(e, "orig", e)).lower()
        if "database is locked" in text or "database is busy" in text:   # SQLite
            return "transient"
        if code is None and ("unable to open" in text or "disk i/o" in text
                             or "readonly" in text):
            return "refused"
        if code is not None and code >= 2000:    # client-side: connection trouble
            return "transient"
        return "data"
    if isinstance(e, (ConnectionError, TimeoutError, OSError)):
        return "transient"
    return "data"


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """What registration writes: the node and its GPUs (MIG-refused ones included)."""

    name: str
    docker_endpoint: str
    gpu_type: str
    gpus: tuple[GpuInfo, ...]
    unhealthy: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Registration:
    node_id: int
    gpu_ids: dict[str, int]
    changed: tuple[str, ...] = ()      # what registration wrote (empty: all matched)


def register(conn: Connection, spec: NodeSpec, *, write: bool = True) -> Registration:
    """Make the store's inventory match ``spec``; with ``write=False`` only check it.

    Raises RegistrationRefused (naming ``andreas-agent --register``) when rows must change
    and ``write`` is off or the account lacks the privilege.
    """
    changes: list[str] = []

    def need(what: str) -> None:
        changes.append(what)
        if not write:
            raise RegistrationRefused(
                f"node {spec.name}: {what}; the agent's database account may not change the "
                "inventory: run `andreas-agent --register` once with the manager's account "
                "(ANDREAS_DB_URL / ANDREAS_DB_PASSWORD_FILE of andreas_manager)")

    node = conn.execute(select(Node.id, Node.docker_endpoint, Node.gpu_type, Node.gpu_count)
                        .where(Node.name == spec.name)).one_or_none()
    values = dict(docker_endpoint=spec.docker_endpoint, gpu_type=spec.gpu_type[:64],
                  gpu_count=len(spec.gpus))
    if node is None:
        need("not registered")
        node_id = conn.execute(insert(Node).values(name=spec.name, state=NodeState.UP,
                                                   **values)).inserted_primary_key[0]
    else:
        node_id = node.id
        differs = [k for k, v in values.items() if getattr(node, k) != v]
        if differs:
            need("inventory changed (" + ", ".join(
                f"{k}: {getattr(node, k)!r} -> {values[k]!r}" for k in differs) + ")")
            conn.execute(update(Node).where(Node.id == node_id).values(**values))
    stored = {r.uuid: r for r in conn.execute(
        select(Gpu.id, Gpu.uuid, Gpu.node_id, Gpu.index.label("gpu_index"), Gpu.model,
               Gpu.memory_mib,
               Gpu.power_limit_w, Gpu.has_energy_counter, Gpu.healthy, Gpu.mig_enabled)
        .where(Gpu.uuid.in_([g.uuid for g in spec.gpus])))} if spec.gpus else {}
    # (Row.index is tuple.index: the GPU index is read as gpu_index)
    mine = {r.uuid: r for r in conn.execute(select(Gpu.id, Gpu.uuid,
                                                   Gpu.index.label("gpu_index"))
                                            .where(Gpu.node_id == node_id))}
    wanted_index = {g.index for g in spec.gpus}
    for uuid, r in mine.items():      # GPUs that left this node: free their index
        if uuid not in {g.uuid for g in spec.gpus} and r.gpu_index in wanted_index:
            need(f"GPU {uuid} is gone")
            conn.execute(update(Gpu).where(Gpu.id == r.id).values({Gpu.index: -r.id,
                                                                   Gpu.healthy: False}))
    moved = [r for g in spec.gpus if (r := stored.get(g.uuid)) is not None
             and (r.gpu_index != g.index or r.node_id != node_id)]
    for r in moved:                   # indices permuted: step aside first (unique index)
        need(f"GPU {r.uuid} moved to another index or node")
        conn.execute(update(Gpu).where(Gpu.id == r.id).values({Gpu.index: -r.id}))
    moved_ids = {r.id for r in moved}
    gpu_ids: dict[str, int] = {}
    for g in spec.gpus:
        values = dict(node_id=node_id, index=g.index, model=g.model[:64],  # attribute names
                      memory_mib=g.memory_mib, power_limit_w=g.power_limit_w,
                      has_energy_counter=g.has_energy_counter,
                      healthy=g.uuid not in spec.unhealthy, mig_enabled=g.mig_enabled)
        r = stored.get(g.uuid)
        if r is None:
            need(f"GPU {g.uuid} not registered")
            gpu_ids[g.uuid] = conn.execute(insert(Gpu).values(uuid=g.uuid, **values)
                                           ).inserted_primary_key[0]
            continue
        gpu_ids[g.uuid] = r.id
        was_moved = r.id in moved_ids
        differs = [k for k, v in values.items()
                   if k != "healthy" and getattr(r, "gpu_index" if k == "index" else k) != v]
        if differs or was_moved:
            need(f"GPU {g.uuid} changed ({', '.join(differs) or 'index'})")
            conn.execute(update(Gpu).where(Gpu.id == r.id)
                         .values({getattr(Gpu, k): v for k, v in values.items()}))
        elif write and r.healthy != values["healthy"]:
            changes.append(f"GPU {g.uuid} healthy={values['healthy']}")
            conn.execute(update(Gpu).where(Gpu.id == r.id).values(healthy=values["healthy"]))
    return Registration(node_id=node_id, gpu_ids=gpu_ids, changed=tuple(changes))


_REVISION = re.compile(r"""^revision\s*=\s*["']([^"']+)["']""", re.MULTILINE)
_DOWN_REVISION = re.compile(r"""^down_revision\s*=\s*["']([^"']+)["']""", re.MULTILINE)


@functools.cache
def head_revision() -> str:
    """The newest migration, read from the migration scripts without importing Alembic:
    the long-running agent saves Alembic's ~10 MB of memory (the check is the same
    ``andreas.store.migrate.head_revision``; a test compares them)."""
    import andreas.store

    versions = Path(andreas.store.__file__).resolve().parent / "migrations" / "versions"
    revisions, parents = set(), set()
    for script in versions.glob("*.py"):
        text = script.read_text()
        if (m := _REVISION.search(text)) is not None:
            revisions.add(m.group(1))
        if (m := _DOWN_REVISION.search(text)) is not None:
            parents.add(m.group(1))
    heads = revisions - parents
    if len(heads) != 1:
        raise StoreError(f"migration scripts in {versions} have {len(heads)} heads")
    return heads.pop()


def schema_problem(engine: Engine) -> str | None:
    """None when the database is at this agent's head revision, else what to do."""
    shown = mask_url(engine.url)
    try:
        with engine.connect() as conn:
            revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except DBAPIError as e:
        text = str(getattr(e, "orig", e)).lower()
        if error_code(e) == 1146 or "no such table" in text:
            return f"database {shown} is not migrated; run `andreas db upgrade`"
        raise
    head = head_revision()
    if revision != head:
        return (f"database {shown} is at revision {revision or 'none'}, this agent needs "
                f"{head}; run `andreas db upgrade` (or use the agent of that version)")
    return None


def agent_engine(url: str, password_file: str | None = None) -> Engine:
    """An engine for the agent: MariaDB reads and writes time out (30 s) so a hung server
    cannot stall the delivery thread forever; connect_timeout is the store's 10 s."""
    from andreas.store.engine import parse_url

    parsed = parse_url(url, password_file)
    if not is_sqlite(parsed):
        extra = {k: "30" for k in ("read_timeout", "write_timeout") if k not in parsed.query}
        parsed = parsed.update_query_dict(extra)
    return make_engine(parsed)


@dataclass
class StoreWriter:
    """Writes delivery entries for one node; used by the delivery thread only.

    ``spec()`` gives the current inventory (it can change when NVML re-initialises);
    ``self_register``: whether this account may write the inventory (SQLite: yes; the
    MariaDB agent account: no, see the module docstring).
    """

    engine: Engine
    spec: Callable[[], NodeSpec]
    self_register: bool = True
    _registration: Registration | None = None
    _schema_ok: bool = False
    _unhealthy: frozenset[str] = frozenset()

    @property
    def url(self) -> str:
        return mask_url(self.engine.url)

    @property
    def registration(self) -> Registration | None:
        return self._registration

    def ensure_registered(self) -> Registration:
        """Check the schema, then register (or check) the node; cached until the GPU
        inventory or health changes. Raises DeliveryError."""
        spec = self.spec()
        reg = self._registration
        if reg is not None and set(reg.gpu_ids) == {g.uuid for g in spec.gpus} \
                and spec.unhealthy == self._unhealthy:
            return reg
        try:
            if not self._schema_ok:
                problem = schema_problem(self.engine)
                if problem is not None:
                    raise DeliveryError(problem, "refused")
                self._schema_ok = True
            with self.engine.begin() as conn:
                reg = register(conn, spec, write=self.self_register)
                if reg.changed:
                    log.info("node %s registered in %s: %s", spec.name, self.url,
                             "; ".join(reg.changed))
                conn.execute(update(Node).where(Node.id == reg.node_id,
                                                Node.state == NodeState.DOWN)
                             .values(state=NodeState.UP))
        except DeliveryError:
            raise
        except Exception as e:  # noqa: BLE001 - sorted and re-raised as DeliveryError
            kind = classify(e)
            raise DeliveryError(f"registration of node {spec.name} in {self.url} failed: "
                                f"{_describe(e)}", "refused" if kind == "data" else kind
                                ) from e
        self._registration, self._unhealthy = reg, spec.unhealthy
        return reg

    def write(self, entries: Sequence[Entry], heartbeat_t: float | None = None) -> None:
        """Store entries (any kinds) and the heartbeat in one transaction; idempotent.

        Raises DeliveryError with kind ``transient``, ``refused`` or ``data``.
        """
        reg = self.ensure_registered()
        spec = self.spec()
        try:
            rows = _rows(entries, reg, spec)
            with self.engine.begin() as conn:
                insert_power_samples(conn, rows["gpu"], skip_duplicates=True)
                insert_host_samples(conn, rows["host"], skip_duplicates=True)
                insert_gpu_gaps(conn, rows["gap"], skip_duplicates=True)
                insert_epoch_events(conn, rows["epoch"], skip_duplicates=True)
                insert_job_energy(conn, rows["job_energy"], skip_duplicates=True)
                if heartbeat_t is not None:
                    conn.execute(update(Node).where(Node.id == reg.node_id)
                                 .values(last_heartbeat_s=heartbeat_t))
        except Exception as e:  # noqa: BLE001 - sorted and re-raised as DeliveryError
            kind = classify(e)
            if kind == "transient":
                self._schema_ok = False    # a restarted server may come back migrated
            raise DeliveryError(_describe(e), kind) from e

    def mark_down(self) -> None:
        """Clean shutdown: ``up`` -> ``down`` (best effort; an operator's state stays)."""
        reg = self._registration
        if reg is None:
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(update(Node).where(Node.id == reg.node_id,
                                                Node.state == NodeState.UP)
                             .values(state=NodeState.DOWN))
        except Exception as e:  # noqa: BLE001 - shutting down anyway
            log.warning("could not mark node %s down: %s", self.spec().name, _describe(e))

    def close(self) -> None:
        self.engine.dispose()


def _describe(e: BaseException) -> str:
    if isinstance(e, DBAPIError):
        return describe_error(e)
    return str(e) or type(e).__name__


def _rows(entries: Sequence[Entry], reg: Registration, spec: NodeSpec) -> dict[str, list]:
    """Store rows of the entries, by kind; InputError for an entry that cannot be one."""
    rows: dict[str, list] = {"gpu": [], "host": [], "gap": [], "epoch": [], "job_energy": []}
    node_id = reg.node_id
    for e in entries:
        kind = e.get("kind")
        try:
            if kind == "gpu":
                gpu_id = _gpu_id(reg, e["uuid"])
                power, energy = e.get("power_w"), e.get("energy_mj")
                if power is None and energy is not None and e.get("interval_s"):
                    # no power reading: the interval's mean power, marked by a NULL source
                    power = energy / 1000.0 / e["interval_s"]
                if power is None:
                    rows["gap"].append(GapRow(gpu_id, e["t"], "no power or energy reading"))
                    continue
                rows["gpu"].append(PowerRow(
                    gpu_id, e["t"], node_id, e.get("busy_gpus", 0), power, energy,
                    e.get("utilization"), e.get("memory_used_mib"), e.get("energy_source"),
                    e.get("power_source") if e.get("power_w") is not None else None,
                    bool(e.get("counter_reset", False))))
            elif kind == "host":
                rows["host"].append(HostRow(
                    node_id, e["t"], e.get("busy_gpus", 0), e["cpu_utilization"],
                    e["memory_used_mib"], e.get("host_power_w"), e.get("energy_mj"),
                    e.get("power_source"), e.get("energy_source"), e.get("agent_cpu_percent"),
                    e.get("agent_rss_mib")))
            elif kind == "gap":
                rows["gap"].append(GapRow(_gpu_id(reg, e["uuid"]), e["t"], e["reason"]))
            elif kind == "epoch":
                uuids = e.get("gpu_uuids") or []
                rows["epoch"].append(dict(job_id=e["job_id"], attempt=e["attempt"],
                                          epoch=e["epoch"], start_s=e["start_s"],
                                          end_s=e["end_s"], node_id=node_id,
                                          gpu_type=spec.gpu_type[:64], gpus=len(uuids)))
            elif kind == "job_energy":
                rows["job_energy"].append(JobEnergyRow(
                    e["job_id"], e["attempt"], e["t"], node_id, e["interval_s"],
                    len(e.get("gpu_uuids") or []), e.get("gpu_energy_mj"),
                    e.get("host_energy_mj")))
            elif kind != HEARTBEAT:
                raise InputError(f"unknown entry kind {kind!r}")
        except (KeyError, TypeError) as err:
            raise InputError(f"entry {e}: malformed ({err!r})") from None
    return rows


def _gpu_id(reg: Registration, uuid: str) -> int:
    gpu_id = reg.gpu_ids.get(uuid)
    if gpu_id is None:
        raise InputError(f"GPU {uuid} is not in this node's registered inventory")
    return gpu_id
