"""The agent's side of the database: registration before the first write, then
idempotent batch writes. The SQL is the store's (:mod:`andreas.store.registry`,
:mod:`andreas.store.samples`, :mod:`andreas.store.nodes`, :mod:`andreas.store.schema`);
here is what the delivery thread does with it.

Why it is shaped like this:

- **One transaction per batch**, every table at once (GPU and host samples with their
  1-minute aggregates, gaps, epochs, job energy, the heartbeat): a batch is either stored
  whole or not at all, which is what lets the spool's committed sequence mean "stored".
- **Every insert skips rows already stored** (``skip_duplicates``): after a lost
  connection the agent cannot know whether its last commit arrived, so it may send a
  batch twice; the second time changes nothing.
- **Errors are sorted by what to do about them** (:func:`classify`, database errors by
  :func:`andreas.store.faults.error_kind`): ``transient``
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
  ``down``, and ``down`` at a clean stop only if it was ``up`` (``draining`` stays), both
  through the node transition table (:func:`andreas.store.nodes.move_if`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agents.entries import Entry, EntryKind
from andreas.config import mask_url
from andreas.errors import InputError
from andreas.store.engine import Engine
from andreas.store.faults import FaultKind, describe, error_kind
from andreas.store.tables import NodeState
from andreas.store.nodes import move_if, touch_heartbeat
from andreas.store.registry import NodeSpec, Registration, RegistrationRefused, register
from andreas.store.samples import (AgentGapRow, GapRow, HostRow, JobEnergyRow, PowerRow,
                                   insert_agent_gaps, insert_epoch_events, insert_gpu_gaps,
                                   insert_host_samples, insert_job_energy,
                                   insert_power_samples)
from andreas.store.schema import schema_problem

# The agent's other modules import the registration names from here, with the writer.
__all__ = ["DeliveryError", "StoreWriter", "classify"]

log = logging.getLogger(__name__)


class DeliveryError(Exception):
    """A batch was not stored; ``kind`` says what to do (see :func:`classify`; given as
    a FaultKind or its text)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = FaultKind(kind)


def classify(e: BaseException) -> FaultKind:
    """``transient`` | ``refused`` | ``data`` for an exception raised while writing."""
    if isinstance(e, DeliveryError):
        return e.kind
    if isinstance(e, RegistrationRefused):
        return FaultKind.REFUSED
    if isinstance(e, InputError):
        return FaultKind.DATA
    kind = error_kind(e)
    if kind is not None:
        return kind
    if isinstance(e, (ConnectionError, TimeoutError, OSError)):
        return FaultKind.TRANSIENT
    return FaultKind.DATA


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
                    raise DeliveryError(problem, FaultKind.REFUSED)
                self._schema_ok = True
            with self.engine.begin() as conn:
                reg = register(conn, spec, write=self.self_register)
                if reg.changed:
                    log.info("node %s registered in %s: %s", spec.name, self.url,
                             "; ".join(reg.changed))
                move_if(conn, reg.node_id, NodeState.DOWN, NodeState.UP)
        except DeliveryError:
            raise
        except Exception as e:
            kind = classify(e)
            raise DeliveryError(f"registration of node {spec.name} in {self.url} failed: "
                                f"{describe(e)}",
                                FaultKind.REFUSED if kind is FaultKind.DATA else kind) from e
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
                insert_agent_gaps(conn, rows["agent_gap"], skip_duplicates=True)
                if heartbeat_t is not None:
                    touch_heartbeat(conn, reg.node_id, heartbeat_t)
        except Exception as e:
            kind = classify(e)
            if kind is FaultKind.TRANSIENT:
                self._schema_ok = False    # a restarted server may come back migrated
            raise DeliveryError(describe(e), kind) from e

    def mark_down(self) -> None:
        """Clean shutdown: ``up`` -> ``down`` (best effort; an operator's state stays)."""
        reg = self._registration
        if reg is None:
            return
        try:
            with self.engine.begin() as conn:
                move_if(conn, reg.node_id, NodeState.UP, NodeState.DOWN)
        except Exception as e:  # noqa: BLE001 - shutting down anyway
            log.warning("could not mark node %s down: %s", self.spec().name, describe(e))

    def close(self) -> None:
        self.engine.dispose()


def _rows(entries: Sequence[Entry], reg: Registration, spec: NodeSpec) -> dict[str, list]:
    """Store rows of the entries, by kind; InputError for an entry that cannot be one."""
    rows: dict[str, list] = {"gpu": [], "host": [], "gap": [], "epoch": [], "job_energy": [],
                             "agent_gap": []}
    node_id = reg.node_id
    for e in entries:
        kind = e.get("kind")
        try:
            if kind == EntryKind.GPU:
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
                    bool(e.get("counter_reset", False)), e.get("power_limit_w")))
            elif kind == EntryKind.HOST:
                rows["host"].append(HostRow(
                    node_id, e["t"], e.get("busy_gpus", 0), e["cpu_utilization"],
                    e["memory_used_mib"], e.get("host_power_w"), e.get("energy_mj"),
                    e.get("power_source"), e.get("energy_source"), e.get("agent_cpu_percent"),
                    e.get("agent_rss_mib")))
            elif kind == EntryKind.GAP:
                rows["gap"].append(GapRow(_gpu_id(reg, e["uuid"]), e["t"], e["reason"]))
            elif kind == EntryKind.EPOCH:
                uuids = e.get("gpu_uuids") or []
                rows["epoch"].append(dict(job_id=e["job_id"], attempt=e["attempt"],
                                          epoch=e["epoch"], start_s=e["start_s"],
                                          end_s=e["end_s"], node_id=node_id,
                                          gpu_type=spec.gpu_type[:64], gpus=len(uuids)))
            elif kind == EntryKind.JOB_ENERGY:
                rows["job_energy"].append(JobEnergyRow(
                    e["job_id"], e["attempt"], e["t"], node_id, e["interval_s"],
                    len(e.get("gpu_uuids") or []), e.get("gpu_energy_mj"),
                    e.get("host_energy_mj")))
            elif kind == EntryKind.AGENT_GAP:
                rows["agent_gap"].append(AgentGapRow(node_id, e["start_s"], e["end_s"],
                                                     bool(e["charged"]), e["reason"]))
            elif kind != EntryKind.HEARTBEAT:
                raise InputError(f"unknown entry kind {kind!r}")
        except (KeyError, TypeError) as err:
            raise InputError(f"entry {e}: malformed ({err!r})") from None
    return rows


def _gpu_id(reg: Registration, uuid: str) -> int:
    gpu_id = reg.gpu_ids.get(uuid)
    if gpu_id is None:
        raise InputError(f"GPU {uuid} is not in this node's registered inventory")
    return gpu_id
