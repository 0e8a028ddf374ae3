"""How an Alibaba import spaces its submissions: the time scale and the loads it reports.

Two loads describe a replay, and the importer reports both:

- the **offered load** (``andreas trace show``'s ``load``): all the GPU-seconds the tasks
  ask for over (GPUs x the submission span). Submission times multiplied by a scale s
  divide it by s, so a target is met exactly: s = offered(1) / target. ``--load`` sets it
  (default 1: the tasks ask for as much as the cluster holds over the span, queues form
  whenever fragmentation strands GPUs, so placement matters).
- the **busy share** while submitting: the mean share of the GPUs busy between the first
  and the last submission if every task ran when submitted (a slice holding
  gpu_milli / 1000 of a GPU; a task's run after the last submission does not count, so
  the months-long pods of the trace do not swamp a short window). The share does not
  grow with the scale, so a target is found by bisection, and it cannot exceed the share
  with every task submitted at once. ``--busy-share`` sets it (``full``: the full trace's,
  kept per GPU, which leaves openb replays nearly idle); ``--keep-times`` keeps the
  file's own times (scale 1).

A pod list without time columns (``openb_pod_list_multigpu*.csv``) has tasks in file
order only: they arrive one after another at even gaps, as the fragmentation paper's
simulator feeds them, the gap set by the target load or by ``--arrival-rate``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from andreas.errors import InputError
from andreas.formats.snapshot import show

if TYPE_CHECKING:
    from andreas.simulator.alibaba import Pod

DEFAULT_LOAD = 1.0
MAX_LOAD = 100.0
MAX_RATE_PER_H = 3.6e6
LOW_OFFERED = 0.5            # below: most GPUs idle most of the time, placement hardly matters


@dataclass(frozen=True, kw_only=True)
class Spacing:
    """What the user asked for: one of offered ``load``, ``busy_share`` (a number or
    "full"), ``keep_times``, ``arrival_rate_per_h``; the rest None/False."""

    load: float | None = None
    busy_share: float | str | None = None
    keep_times: bool = False
    arrival_rate_per_h: float | None = None

    def check(self, timed: bool) -> Spacing:
        """The checked spacing, with the default (offered load 1) filled in."""
        given = [name for name, v in (("load", self.load), ("busy_share", self.busy_share),
                                      ("keep_times", self.keep_times or None),
                                      ("arrival_rate_per_h", self.arrival_rate_per_h))
                 if v is not None]
        if len(given) > 1:
            raise InputError(f"{given[0]}: cannot be combined with {given[1]} (each sets the "
                             "submission times)", field=given[0])
        for name, value, top in (("load", self.load, MAX_LOAD),
                                 ("arrival_rate_per_h", self.arrival_rate_per_h,
                                  MAX_RATE_PER_H)):
            if value is not None:
                _positive(name, value, top)
        if isinstance(self.busy_share, str):
            if self.busy_share != "full":
                raise InputError(f"busy_share: must be a number > 0 or 'full', got "
                                 f"{show(self.busy_share)}", field="busy_share")
        elif self.busy_share is not None:
            _positive("busy_share", self.busy_share, MAX_LOAD)
        if not timed and (self.keep_times or self.busy_share == "full"):
            what = "keep_times" if self.keep_times else "busy_share"
            raise InputError(f"{what}: the pod list has no time columns: there are no times "
                             "to keep (use --load or --arrival-rate)", field=what)
        if timed and self.arrival_rate_per_h is not None:
            raise InputError("arrival_rate_per_h: the pod list has creation times; "
                             "--arrival-rate is for files without them (use --load)",
                             field="arrival_rate_per_h")
        if not given:
            return Spacing(load=DEFAULT_LOAD)
        return self


def _positive(name: str, value: Any, top: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise InputError(f"{name}: must be a number > 0, got {show(value)}", field=name)
    if value > top:
        raise InputError(f"{name}: must be <= {top:g}, got {show(value)}", field=name)


class BusyWindow:
    """The busy share over the submission window at a time scale (module docstring)."""

    def __init__(self, items: Sequence[tuple[Pod, int]], gpus: int) -> None:
        import numpy as np

        from andreas.simulator.alibaba import held_gpus

        created = np.array([p.creation for p, _ in items], dtype=float)
        self.created = created - created.min()
        self.span = float(self.created.max())
        self.duration = np.array([d for _, d in items], dtype=float)
        self.held = np.array([held_gpus(p) for p, _ in items])
        self.gpus = gpus

    def share(self, scale: float) -> float | None:
        import numpy as np

        if self.span <= 0:
            return None
        window = self.span * scale
        busy = np.minimum(self.duration, window - self.created * scale)
        return float((self.held * busy).sum() / (self.gpus * window))

    def most(self) -> float:
        """The limit as the scale goes to 0: every task submitted at once."""
        return float((self.held * (self.span - self.created)).sum() / (self.gpus * self.span))

    def scale_for(self, target: float) -> float:
        """The scale whose share is ``target`` (0 < target < most()): bisect (on a log
        scale) between a scale that gives most() and one that gives at most ``target``."""
        if abs((self.share(1.0) or 0.0) - target) <= 1e-12 * target:
            return 1.0          # the whole trace, or a sample as loaded as it: keep its times
        left = self.span - self.created
        lo = float((self.duration[left > 0] / left[left > 0]).min())
        hi = max(float((self.held * self.duration).sum() / (self.gpus * self.span * target)),
                 lo)
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if (self.share(mid) or 0.0) > target:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + 1e-12:
                break
        return hi


def time_scale(spacing: Spacing, window: BusyWindow, full_share: float | None,
               offered_at_1: float | None, *, what: str) -> float:
    """The factor submissions are multiplied by (``offered_at_1``: the offered load at
    scale 1; ``full_share``: the full trace's busy share; ``what``: the pods, for
    messages)."""
    if window.span <= 0:
        return 1.0
    if spacing.keep_times:
        return 1.0
    if spacing.arrival_rate_per_h is not None:          # created = file index
        return 3600.0 / spacing.arrival_rate_per_h
    if spacing.load is not None:
        assert offered_at_1 is not None
        return offered_at_1 / spacing.load
    target = full_share if spacing.busy_share == "full" else spacing.busy_share
    if not isinstance(target, float | int) or target <= 0:
        return 1.0
    if target >= window.most():
        if spacing.busy_share != "full":
            raise InputError(f"busy_share: must be < {window.most():.4g} for these pods on "
                             f"these {window.gpus} GPUs (all of them submitted at once), got "
                             f"{target:g}", field="busy_share")
        raise InputError(f"{what}: cannot keep the full trace's busy share {target:.4g} on "
                         f"{window.gpus} GPUs (at most {window.most():.4g}): keep fewer nodes "
                         "(--max-nodes), more pods (--sample) or set --load")
    return window.scale_for(float(target))


def describe(spacing: Spacing, timed: bool, scale: float, offered: float | None,
             duration_s: float) -> tuple[str, tuple[str, ...]]:
    """(how the submissions were spaced, notes for the summary), in words."""
    notes: list[str] = []
    if not timed:
        how = (f"no time columns: tasks arrive in file order every {scale:.4g} s"
               + (f" ({spacing.arrival_rate_per_h:g} per hour)"
                  if spacing.arrival_rate_per_h is not None else "")
               + f", each running --duration-s {duration_s:g} s")
    elif spacing.keep_times:
        how = "the file's own times (scale x1)"
    elif spacing.busy_share is not None:
        how = (f"times x{scale:.4g} for a busy share of "
               + ("the full trace's" if spacing.busy_share == "full"
                  else f"{spacing.busy_share:g}"))
    else:
        how = f"times x{scale:.4g}"
    if spacing.load is not None:
        how += f" for offered load {spacing.load:g}"
    if offered is not None and offered < LOW_OFFERED:
        notes.append(f"offered load {offered:.3g}: most GPUs stay idle most of the time, so "
                     "placement hardly matters in this replay; --load 1 (the default) "
                     "replays the same tasks where it does")
    return how, tuple(notes)
