"""The interference truth of a simulation: what GPU sharing really costs each job.

The policies plan with the interference model's prediction (``andreas.interference``);
the simulator charges its truth. With ``interference_error`` e > 0 each job suffers
exp(N(0, e)) times the predicted slowdown and every slowdown it reports is noisy by a
further N(0, e), drawn from a generator of its own (seeded ``[seed, 1]``) so the truth
never moves the policies' random stream. Only nodes whose sharing changed are re-paced.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from andreas.interference import Sharing, thetas
from andreas.resources import Ledger
from andreas.simulator.jobrun import JobRun


class SharingTruth:
    """Per-job sensitivities, measurement noise and the nodes to re-pace."""

    def __init__(self, *, sharing: Sharing, error: float, seed: int) -> None:
        self.sharing, self.error = sharing, error
        self.rng = np.random.default_rng([seed, 1])
        self.sensitivity: dict[str, float] = {}
        self.dirty: set[int] = set()      # nodes whose GPU sharing changed since the last pace

    def changed(self, node: int) -> None:
        """A shared GPU of ``node`` gained or lost a resident."""
        self.dirty.add(node)

    def repace(self, t: float, runs: Iterable[JobRun], ledger: Ledger) -> None:
        """Charge interference: each job on a node whose sharing changed runs at the pace
        of its slowest worker, 1 + theta (``andreas.interference``)."""
        if not self.dirty:
            return
        for run in runs:
            if run.node not in self.dirty:
                continue
            theta = 0.0
            for slot in run.gpu_ids:
                residents = ledger.on_gpu(run.node, slot)
                if len(residents) > 1:
                    k = next(k for k, (owner, _) in enumerate(residents)
                             if owner == run.spec.id)
                    theta = max(theta, thetas(residents, self.sharing)[k]
                                * self._sensitivity(run.spec.id))
            if abs(1.0 + theta - run.slow) > 1e-12:
                run.repace(t, 1.0 + theta)
        self.dirty.clear()

    def _sensitivity(self, job_id: str) -> float:
        """How much more (or less) than predicted this job suffers from sharing."""
        if self.error <= 0:
            return 1.0
        if job_id not in self.sensitivity:
            self.sensitivity[job_id] = float(np.exp(self.rng.normal(0.0, self.error)))
        return self.sensitivity[job_id]

    def measured(self, run: JobRun) -> float:
        """The slowdown the running attempt reports now (epoch times are noisy)."""
        theta = run.slow - 1.0
        if theta <= 0 or self.error <= 0:
            return max(theta, 0.0)
        return max(0.0, theta * (1.0 + self.rng.normal(0.0, self.error)))
