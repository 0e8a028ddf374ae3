"""A submitted job's mutable state during a simulation.

The engine, its accounts and the interference truth all read and advance it, so it lives
apart from each of them (andreas/simulator/engine.py owns its life cycle).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from andreas import levels
from andreas.model import Demand, Job
from andreas.resources import held_milli


@dataclass(eq=False)
class JobRun:
    """A submitted job's mutable state."""

    spec: Job
    done: float = 0.0            # epochs checkpointed before the current attempt
    node: int = -1
    gpus: int = 0
    gpu_ids: tuple[int, ...] = ()
    demand: Demand | None = None  # what the current attempt holds in the ledger
    epoch_s: float = 0.0         # now: its epoch time alone x its interference slowdown
    solo_epoch_s: float = 0.0    # its epoch time alone on these GPUs
    slow: float = 1.0            # 1 + theta while it shares GPUs (andreas.interference)
    start_s: float = 0.0         # attempt start; work begins after the overhead
    overhead_s: float = 0.0
    base: float = 0.0            # exact progress at base_s, when the current pace began
    base_s: float = 0.0
    starts: int = 0
    preemptions: int = 0
    first_start_s: float = math.nan
    energy_j: float = 0.0
    cost: float = 0.0
    gpu_s: float = 0.0
    run_s: float = 0.0           # wall time of its attempts
    solo_s: float = 0.0          # of which, the time it would have taken alone on its GPUs
    level: levels.LevelOption = levels.DEFAULT   # its GPUs' power limit (andreas/levels.py)
    default_epoch_s: float = 0.0  # its epoch time alone at the default limit

    def progress(self, now: float, exact: bool) -> float:
        """Epochs done; ``exact=False``: what its checkpoints hold (whole epochs)."""
        if self.node < 0:
            return self.done
        done = self.base + max(0.0, now - self.base_s) / self.epoch_s
        return done if exact else math.floor(done + 1e-9)

    def finish_s(self, exact: bool) -> float:
        return self.base_s + (self.spec.epochs - self.base) * self.epoch_s

    def repace(self, now: float, slow: float) -> None:
        """Co-residents changed: keep the progress made, go on at the new pace."""
        self.base = self.progress(now, exact=True)
        self.base_s = max(now, self.base_s)
        self.slow = slow
        self.epoch_s = self.solo_epoch_s * slow

    def milli(self) -> int:
        """Milli-GPU the attempt holds: slices of GPUs, or whole GPUs."""
        return held_milli(self.demand) if self.demand is not None else 0
