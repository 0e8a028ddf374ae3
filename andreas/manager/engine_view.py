"""The engine's inventory laid over the store's view of the nodes (Capability.INVENTORY).

An engine like Slurm runs other people's jobs and has its own idea of its nodes. Once
per tick the manager reads its inventory (:meth:`Executor.inventory`) and, in memory
only, marks GPUs the manager must not plan on nor start on (``GpuView.engine_held``):

- every GPU of a node the engine does not have (not in its partition: one warning line),
  has marked down, or drains (an operator's ``scontrol update state=DRAIN``): nothing new
  goes there, and what runs there is left alone (pinned) until it ends;
- the GPUs jobs that are not andreas' hold (Slurm's GRES in use minus andreas' own jobs'):
  pinned capacity, neither planned nor started on;
- GPUs beyond the count the engine has configured for the node (the agent registered
  more than Slurm's ``Gres=`` gives andreas); a GPU type that differs is logged once.

A node the engine has powered down (or is powering up) keeps its GPUs: the engine wakes
it for a job sent there. When the engine does not answer, the last inventory stays in
force. A change of what is usable is a rescheduling trigger (``node-down`` /
``node-up``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from andreas.executor.base import Capability, EngineNodeState, Executor, NodeInventory
from andreas.executor.errors import ExecutorError
from andreas.manager.state import StoreState, node_ref
from andreas.manager.triggers import Trigger
from andreas.store.read import NodeView

log = logging.getLogger("andreas.manager")

_CLOSED = (EngineNodeState.UNKNOWN, EngineNodeState.DOWN, EngineNodeState.DRAINING)


def held_indexes(node: NodeView, inv: NodeInventory | None) -> tuple[frozenset[int], str]:
    """The GPU indexes of ``node`` the engine holds back, and why (one phrase; '' for
    none). Pure."""
    if inv is None:
        return frozenset(), ""
    every = frozenset(g.index for g in node.gpus)
    if inv.state in _CLOSED:
        why: Any = {EngineNodeState.UNKNOWN: "unknown to the engine",
               EngineNodeState.DOWN: "down in the engine",
               EngineNodeState.DRAINING: "drained in the engine"}[inv.state]
        return every, why + (f" ({inv.reason})" if inv.reason else "")
    held = set(inv.foreign_gpus) & every
    why = [f"GPU(s) {','.join(map(str, sorted(held)))} held by jobs of others"] if held else []
    extra = {g.index for g in node.gpus if g.index >= inv.gpus}
    if extra:
        held |= extra
        why.append(f"the engine has {inv.gpus} GPU(s) of the {len(node.gpus)} registered")
    return frozenset(held), "; ".join(why)


class EngineView:
    """Reads the inventory each tick and applies it to a :class:`StoreState`."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.enabled = Capability.INVENTORY in executor.capabilities
        self.inventory: Mapping[str, NodeInventory] = {}
        self._held: dict[str, frozenset[int]] = {}
        self._said: dict[str, str] = {}
        self._failing = False

    def refresh(self, state: StoreState) -> set[Trigger]:
        """Read the inventory; returns the triggers a change of usable GPUs raises."""
        if not self.enabled:
            return set()
        try:
            self.inventory = dict(self.executor.inventory(
                [node_ref(n) for n in state.nodes.values()]))
            if self._failing:
                log.info("engine inventory readable again")
            self._failing = False
        except ExecutorError as e:
            if not self._failing:
                log.warning("engine inventory not readable (%s); the last one stays in force",
                            e)
            self._failing = True
            return set()
        triggers: set[Trigger] = set()
        for node in state.nodes.values():
            inv = self.inventory.get(node.name)
            held, why = held_indexes(node, inv)
            before = self._held.get(node.name, frozenset())
            if held - before:
                triggers.add(Trigger.NODE_DOWN)
            if before - held:
                triggers.add(Trigger.NODE_UP)
            self._held[node.name] = held
            self._say(node, inv, why)
        return triggers

    def _say(self, node: NodeView, inv: NodeInventory | None, why: str) -> None:
        if inv is not None and inv.gpu_type and node.gpu_type \
                and inv.gpu_type.lower() != node.gpu_type.lower():
            why = (why + "; " if why else "") + (f"GPU type {inv.gpu_type!r} in the engine, "
                                                  f"{node.gpu_type!r} registered")
        if why != self._said.get(node.name, ""):
            if why:
                log.warning("node %s: %s", node.name, why)
            else:
                log.info("node %s: every GPU usable again for the engine", node.name)
            self._said[node.name] = why

    def apply(self, state: StoreState) -> StoreState:
        """``state`` with the held GPUs marked (nothing else changes)."""
        if not self.enabled or not self._held:
            return state
        nodes = {}
        for name, node in state.nodes.items():
            held = self._held.get(name)
            if held:
                node = replace(node, gpus=tuple(replace(g, engine_held=True)
                                                if g.index in held else g
                                                for g in node.gpus))
            nodes[name] = node
        return StoreState(nodes=MappingProxyType(nodes), jobs=state.jobs,
                          nodes_by_id=MappingProxyType({n.id: n for n in nodes.values()}))
