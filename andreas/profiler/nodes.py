"""Which nodes profile, with which GPUs, and their ``profiling`` flag.

Named nodes (``--node``) must be up; they are marked ``profiling`` in the transaction that
chooses them and restored afterwards (only those this run marked). Without names: the up
nodes already marked, one per GPU type (most usable GPUs, then name). Usable GPUs:
healthy, not MIG, in index order; at each start the ones held by open production attempts
(jobs pinned on the node) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from andreas.errors import InputError
from andreas.executor.base import NodeRef
from andreas.job import valid_job_id
from andreas.store.engine import Store
from andreas.store.models import NodeState
from andreas.store.nodes import (Db, NodeInfo, held_gpu_indexes, list_nodes, set_profiling,
                                 usable_gpus)

APP_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")   # as andreas.service.submit
FAKE_PREFIX = "GPU-fake-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, kw_only=True)
class ProfilingNode:
    """A node chosen for profiling: its usable GPUs (index, UUID), the g to run, and
    whether this run set its profiling flag (and so must restore it)."""

    id: int
    name: str
    ref: NodeRef
    gpu_type: str
    usable: tuple[tuple[int, str], ...]
    counts: tuple[int, ...]
    fake_gpus: bool
    marked: bool


def check_app(app: str) -> str:
    if not isinstance(app, str) or not APP_RE.fullmatch(app):
        raise InputError(f"app {app!r}: an application name is 1-128 letters, digits, '_', "
                         "'.', '+', '-', starting with a letter or digit", field="app")
    return app


def profile_job_id(app: str, node: str, g: int, rng: np.random.Generator) -> str:
    """``profile-<app>-<node>-g<g>-<6 hex>``, a valid job id and container name."""
    part = lambda s: _UNSAFE.sub("-", s)[:20].strip("-.") or "x"   # noqa: E731
    job_id = f"profile-{part(app)}-{part(node)}-g{g}-{int(rng.integers(0, 16 ** 6)):06x}"
    assert valid_job_id(job_id), job_id
    return job_id


def select_targets(s: Db, *, nodes: Sequence[str] = (),
                   gpus: Sequence[int] | None = None) -> list[ProfilingNode]:
    """The nodes to profile on and their g (InputError naming the field otherwise); the
    caller marks them in the same transaction (:func:`mark`)."""
    rows = {n.name: n for n in list_nodes(s)}
    if nodes:
        chosen = []
        for name in dict.fromkeys(nodes):
            n = rows.get(name)
            if n is None:
                raise InputError(f"node {name!r}: no such node (known: "
                                 f"{', '.join(rows) or 'none'})", field="node")
            if n.state is not NodeState.UP:
                raise InputError(f"node {name!r}: node is {n.state.value}; only an up node "
                                 "can profile", field="node")
            chosen.append(n)
    else:
        marked = [n for n in rows.values() if n.profiling and n.state is NodeState.UP]
        if not marked:
            raise InputError("node: no profiling node (no up node has its profiling flag "
                             "set); name the nodes to profile on",
                             field="node")
        per_type: dict[str, NodeInfo] = {}
        for n in marked:
            best = per_type.get(n.gpu_type)
            if best is None or len(usable_gpus(s, n.id)) > len(usable_gpus(s, best.id)):
                per_type[n.gpu_type] = n
        chosen = sorted(per_type.values(), key=lambda n: n.name)
    out = []
    for n in chosen:
        usable = usable_gpus(s, n.id)
        if not usable:
            raise InputError(f"node {n.name!r}: node has no usable GPU (healthy, not MIG)",
                             field="node")
        counts = tuple(range(1, len(usable) + 1)) if not gpus else tuple(sorted(set(gpus)))
        for g in counts:
            if g < 1 or g > len(usable):
                raise InputError(f"gpus {g}: node {n.name} has {len(usable)} usable GPUs",
                                 field="gpus")
        out.append(ProfilingNode(id=n.id, name=n.name,
                          ref=NodeRef(name=n.name, docker_endpoint=n.docker_endpoint),
                          gpu_type=n.gpu_type, usable=usable, counts=counts,
                          fake_gpus=all(u.startswith(FAKE_PREFIX) for _, u in usable),
                          marked=not n.profiling))
    return out


def mark(s: Db, targets: Sequence[ProfilingNode]) -> None:
    """Set the profiling flag of the targets this run marks, in the choosing transaction."""
    set_profiling(s, (t.id for t in targets if t.marked), True)


def restore(store: Store, targets: Sequence[ProfilingNode]) -> None:
    """Clear the flag this run set (only on the targets it marked)."""
    ids = [t.id for t in targets if t.marked]
    if ids:
        with store.session() as s:
            set_profiling(s, ids, False)


def free_gpus(store: Store, target: ProfilingNode, g: int) -> tuple[str, ...] | None:
    """UUIDs of the first g usable GPUs no production attempt holds (None: too few)."""
    with store.session() as s:
        held = held_gpu_indexes(s, target.id)
    free = [u for i, u in target.usable if i not in held]
    return tuple(free[:g]) if len(free) >= g else None
