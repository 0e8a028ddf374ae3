"""The agent's node in the store: its registration (the node row and its GPU rows, keyed
by UUID) and the engine it writes through.

The ``andreas_agent`` MariaDB account may read the inventory but not change it (least
privilege: a compromised node must not add nodes for the manager to schedule on), so on
MariaDB a new node is registered once with the manager's account (``andreas-agent
--register``, or the install script); afterwards the agent only checks that the inventory
still matches (``write=False``). On SQLite (one machine) the agent registers itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, insert, select, update

from andreas.store.engine import is_sqlite, make_engine, parse_url
from andreas.store.errors import StoreError
from andreas.store.tables import gpus as Gpu
from andreas.store.tables import nodes as Node
from andreas.store.nodes import insert_node, inserted_id


class GpuInventory(Protocol):
    """What registration reads of one GPU (the agent's ``GpuInfo``)."""

    @property
    def uuid(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def model(self) -> str: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def power_limit_w(self) -> float | None: ...
    @property
    def has_energy_counter(self) -> bool: ...
    @property
    def mig_enabled(self) -> bool: ...


class RegistrationRefused(StoreError):
    """The node's inventory must be written but this account may not write it."""


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """What registration writes: the node and its GPUs (MIG-refused ones included)."""

    name: str
    docker_endpoint: str
    gpu_type: str
    gpus: tuple[GpuInventory, ...]
    unhealthy: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class Registration:
    """The node's row id and its GPUs' row ids by UUID."""

    node_id: int
    gpu_ids: dict[str, int]
    changed: tuple[str, ...] = ()      # what registration wrote (empty: all matched)


def register(conn: Connection, spec: NodeSpec, *, write: bool = True) -> Registration:
    """Make the store's inventory match ``spec``; with ``write=False`` only check it.

    Raises RegistrationRefused (naming ``andreas-agent --register``) when rows must change
    and ``write`` is off or the account lacks the privilege.
    """
    changes: list[str] = []

    def need(what: str, done: str) -> None:
        """``what`` is missing or differs; ``done``: what the write then did."""
        changes.append(done)
        if not write:
            raise RegistrationRefused(
                f"node {spec.name}: {what}; the agent's database account may not change the "
                "inventory: run `andreas-agent --register` once with the manager's account "
                "(ANDREAS_DB_URL / ANDREAS_DB_PASSWORD_FILE of andreas_manager)")

    node = conn.execute(select(Node.c.id, Node.c.docker_endpoint, Node.c.gpu_type,
                               Node.c.gpu_count).where(Node.c.name == spec.name)).one_or_none()
    values: dict[str, Any] = dict(docker_endpoint=spec.docker_endpoint, gpu_type=spec.gpu_type[:64],
                  gpu_count=len(spec.gpus))
    if node is None:
        need("not registered", "node registered")
        node_id = insert_node(conn, name=spec.name, **values)
    else:
        node_id = node.id
        differs = [k for k, v in values.items() if getattr(node, k) != v]
        if differs:
            diff = ", ".join(f"{k}: {getattr(node, k)!r} -> {values[k]!r}" for k in differs)
            need(f"inventory changed ({diff})", f"inventory updated ({diff})")
            conn.execute(update(Node).where(Node.c.id == node_id).values(**values))
    stored = {r.uuid: r for r in conn.execute(
        select(Gpu.c.id, Gpu.c.uuid, Gpu.c.node_id, Gpu.c.gpu_index, Gpu.c.model,
               Gpu.c.memory_mib, Gpu.c.power_limit_w, Gpu.c.has_energy_counter, Gpu.c.healthy,
               Gpu.c.mig_enabled)
        .where(Gpu.c.uuid.in_([g.uuid for g in spec.gpus])))} if spec.gpus else {}
    # (the column is gpu_index: Row.index would be tuple.index)
    mine = {r.uuid: r for r in conn.execute(select(Gpu.c.id, Gpu.c.uuid, Gpu.c.gpu_index)
                                            .where(Gpu.c.node_id == node_id))}
    wanted_index = {g.index for g in spec.gpus}
    r: Any
    for uuid, r in mine.items():      # GPUs that left this node: free their index
        if uuid not in {g.uuid for g in spec.gpus} and r.gpu_index in wanted_index:
            need(f"GPU {uuid} is gone", f"GPU {uuid} gone (its index freed)")
            conn.execute(update(Gpu).where(Gpu.c.id == r.id).values(gpu_index=-r.id,
                                                                    healthy=False))
    moved = [r for g in spec.gpus if (r := stored.get(g.uuid)) is not None
             and (r.gpu_index != g.index or r.node_id != node_id)]
    for r in moved:                   # indices permuted: step aside first (unique index)
        need(f"GPU {r.uuid} moved to another index or node",
             f"GPU {r.uuid} moved to its new index or node")
        conn.execute(update(Gpu).where(Gpu.c.id == r.id).values(gpu_index=-r.id))
    moved_ids = {r.id for r in moved}
    gpu_ids: dict[str, int] = {}
    for g in spec.gpus:
        values = dict(node_id=node_id, gpu_index=g.index, model=g.model[:64],  # column names
                      memory_mib=g.memory_mib, power_limit_w=g.power_limit_w,
                      has_energy_counter=g.has_energy_counter,
                      healthy=g.uuid not in spec.unhealthy, mig_enabled=g.mig_enabled)
        r = stored.get(g.uuid)
        if r is None:
            need(f"GPU {g.uuid} not registered", f"GPU {g.uuid} registered")
            gpu_ids[g.uuid] = inserted_id(conn.execute(insert(Gpu).values(uuid=g.uuid,
                                                                          **values)))
            continue
        gpu_ids[g.uuid] = r.id
        was_moved = r.id in moved_ids
        differs = [k for k, v in values.items() if k != "healthy" and getattr(r, k) != v]
        if differs or was_moved:
            what = ", ".join("index" if k == "gpu_index" else k for k in differs)
            need(f"GPU {g.uuid} changed ({what or 'index'})",
                 f"GPU {g.uuid} updated ({what or 'index'})")
            conn.execute(update(Gpu).where(Gpu.c.id == r.id)
                         .values(**values))
        elif write and r.healthy != values["healthy"]:
            changes.append(f"GPU {g.uuid} healthy={values['healthy']}")
            conn.execute(update(Gpu).where(Gpu.c.id == r.id).values(healthy=values["healthy"]))
    return Registration(node_id=node_id, gpu_ids=gpu_ids, changed=tuple(changes))


def agent_engine(url: str, password_file: str | None = None) -> Engine:
    """An engine for the agent: MariaDB reads and writes time out (30 s) so a hung server
    cannot stall the delivery thread forever; connect_timeout is the store's 10 s."""
    parsed = parse_url(url, password_file)
    if not is_sqlite(parsed):
        extra = {k: "30" for k in ("read_timeout", "write_timeout") if k not in parsed.query}
        parsed = parsed.update_query_dict(extra)
    return make_engine(parsed)
