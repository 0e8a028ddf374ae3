"""The store as the manager reads it at one instant: nodes with their GPUs, the jobs it acts
on and their attempts (the store's read model, :mod:`andreas.store.read`), so the
reconciliation and the snapshot never touch ORM objects (and never lazy-load)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from andreas.executor.base import NodeRef
from andreas.store.nodes import Db
from andreas.store.read import AttemptView, JobView, NodeView, load_jobs, load_nodes


@dataclass(frozen=True, kw_only=True)
class StoreState:
    nodes: Mapping[str, NodeView]
    jobs: Mapping[str, JobView]
    nodes_by_id: Mapping[int, NodeView] = field(default_factory=dict)

    def node_of(self, attempt: AttemptView) -> NodeView | None:
        return self.nodes_by_id.get(attempt.node_id) if attempt.node_id is not None else None


def node_ref(node: NodeView) -> NodeRef:
    """Where the executor reaches the node's engine, and its GPUs by index."""
    return NodeRef(name=node.name, docker_endpoint=node.endpoint,
                   gpus=tuple((g.index, g.uuid) for g in node.gpus))


def load_state(db: Db) -> StoreState:
    nodes = load_nodes(db)
    return StoreState(nodes=MappingProxyType(nodes), jobs=MappingProxyType(load_jobs(db)),
                      nodes_by_id=MappingProxyType({n.id: n for n in nodes.values()}))
