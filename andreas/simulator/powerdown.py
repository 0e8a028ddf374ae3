"""The power-down of idle nodes in a simulation (``SimOptions.power_off_idle``).

A node idle for ``idle_s`` is off and draws nothing; a job placed on an off node
switches it on, and the node draws its idle power for ``wake_s`` before the job's work
begins. The policies do not know about it, so it is state the engine keeps beside the
plan: when each node became idle, until when a switched-on node wakes, and how many
wake-ups there were. On a cloud trace, or with the option off, nodes never sleep.
"""

from __future__ import annotations

import math

import numpy as np

EPS = 1e-6


class PowerDown:
    """When each node went idle and wakes; the power it draws with the power-down."""

    def __init__(self, *, nodes: int, enabled: bool, idle_s: float, wake_s: float,
                 idle_w: np.ndarray) -> None:
        """``idle_w``: each node's idle draw ``power_w[0]`` (unused when not enabled)."""
        self.enabled, self.idle_s, self.wake_s = enabled, idle_s, wake_s
        self.idle_w = idle_w
        self.idle_since = np.zeros(nodes)          # idle since (set at the first event)
        self.wake_end = np.full(nodes, -math.inf)  # a switched-on node is waking until then
        self.wakeups = 0

    def begin(self, t0: float) -> None:
        """Every node is idle at the first event."""
        self.idle_since[:] = t0

    def went_idle(self, node: int, t: float) -> None:
        self.idle_since[node] = t

    def mean_power(self, power: np.ndarray, busy: np.ndarray, t0: float,
                   dt: float) -> np.ndarray:
        """Mean power per node over [t0, t0 + dt): a busy node draws ``power_w[0]`` while
        it wakes, then its busy ``power``; an idle one ``power_w[0]`` until it goes off
        (``idle_s`` after its last job, not before its wake-up ends), then nothing."""
        idle = self.idle_w
        waking = np.clip(self.wake_end - t0, 0.0, dt)
        off_at = np.maximum(self.idle_since + self.idle_s, self.wake_end)
        on_idle = np.clip(off_at - t0, 0.0, dt)
        return np.where(busy > 0, (idle * waking + power * (dt - waking)) / dt,
                        idle * on_idle / dt)

    def wake_delay(self, node: int, t: float, idle: bool) -> float:
        """Seconds before a job placed on ``node`` (``idle``: no busy GPU) at ``t`` can
        work: the node's wake-up when it is off (it starts now), what is left of one in
        progress, else 0."""
        if not self.enabled:
            return 0.0
        if self.wake_end[node] > t:
            return float(self.wake_end[node] - t)
        off_at = max(self.idle_since[node] + self.idle_s, self.wake_end[node])
        if idle and t > off_at + EPS:
            self.wakeups += 1
            self.wake_end[node] = t + self.wake_s
            return self.wake_s
        return 0.0
