"""``andreas report --validate``: predicted vs actual energy cost per rescheduling slot, as
in the ANDREAS paper's validation on a real cluster (Table III). Pure.

A *slot* is the time between two consecutive decisions, [t_k, t_{k+1}) (the last one ends at
the end of the window, or now). During a slot the cluster runs decision k's plan: every
change in what runs (a submission, a completion, a failure, a node going down or up, the
period H) is itself a rescheduling point and starts a new slot.

- **Predicted**: Σ over the plan's nodes of ``cost_per_hour`` × slot hours, where
  ``cost_per_hour`` = c_ng at the node's planned busy GPUs (``nodes`` of the plan
  document, idle nodes at g = 0). This is the power the optimizer assumed for exactly the
  configuration that was run, so it is compared with what the nodes really drew. The
  alternative, the assignments' ``predicted_cost`` pro-rated to the slot, was rejected:
  it charges every job its node's whole power at the job's own g (two jobs sharing a node
  count the node's base power twice), leaves idle nodes out, and mixes in tardiness.
  Energy predicted = Σ power_w[busy_gpus] × hours.
  With a tariff in the plan document (``energy.tariff``), ``cost_per_hour`` (quoted at
  the tariff's mean rate) is charged for ∫ price·PUE dt over the slot / that rate.
- **Actual**: the same nodes' measured energy in the slot × the plan's own PUE and price
  (with a tariff, price(t)·PUE(t) at the time each minute or sample was used):
  raw samples (GPU + host energy, a sample at t counting for (t_prev, t]) for a slot
  shorter than ``RAW_SLOT_MAX_S`` while they are kept (``resolution`` "samples"), else
  the minute aggregates pro-rated at the slot's edges ("minutes"; a minute's energy is
  spread evenly over it, far too coarse for a slot of a few seconds), so a change of settings
  does not show up as a prediction error. Only nodes with samples in the slot are
  compared on both sides; the others are counted in ``nodes_unmeasured``.
- **Deviation** (Table III): ``(predicted − actual) / predicted`` in %, positive when the
  prediction was higher (the paper reports 12.29 % over the whole run: (1.08438 −
  0.95111) / 1.08438). Per slot; ``mean_abs_deviation_pct`` = mean of |deviation| over
  slots ("average deviation for each optimizer call"); overall = the same formula on the
  sums over all compared slots. Restart and transition costs are in the actual figure and
  not in the prediction, as in the paper. Tardiness is not part of the validation (the
  per-job report shows it).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from itertools import chain
from dataclasses import dataclass, replace
from typing import Any

from andreas.costs import energy_time_s
from andreas.accounting import MJ_PER_KWH, Prices, spread
from andreas.manager.plandoc import read_energy
from andreas.report.compute import MINUTE_S, group_by, minute_energy_mj, minute_pieces
from andreas.report.read import NodeMinute, ReportData
from andreas.report.window import overlap_s


@dataclass(frozen=True, kw_only=True)
class SlotRow:
    decision_id: int
    trigger: str
    policy: str
    start_s: float
    end_s: float
    hours: float
    nodes: int                          # nodes compared (in the plan, with samples)
    nodes_unmeasured: int               # in the plan, no samples in the slot
    busy_gpus: int                      # planned busy GPUs on the compared nodes
    predicted_energy_kwh: float | None  # None: the plan has no power curve for a node
    actual_energy_kwh: float
    predicted_cost: float
    actual_cost: float
    deviation_pct: float | None         # (predicted - actual) / predicted
    note: str                           # why a slot is not compared ("" when it is)
    resolution: str = "minutes"         # of the actual energy: "samples" | "minutes"


@dataclass(frozen=True, kw_only=True)
class Validation:
    slots: tuple[SlotRow, ...]
    compared: int                       # slots with a deviation
    predicted_cost: float               # sums over compared slots
    actual_cost: float
    deviation_pct: float | None         # overall, from the sums
    mean_abs_deviation_pct: float | None
    mean_deviation_pct: float | None


def validate(data: ReportData) -> Validation:
    """Slots between the decisions of ``data`` and their deviations (see module docstring)."""
    w = data.window
    names = {n.name: n.id for n in data.nodes}
    minutes = group_by(data.minutes, lambda m: m.node_id)
    decisions = list(data.decisions)
    end_of_window = min(w.until_s, w.now_s)
    slots = []
    for k, d in enumerate(decisions):
        start = d.t_s
        end = decisions[k + 1].t_s if k + 1 < len(decisions) else end_of_window
        raw = data.raw if any(a <= start and end <= b for a, b in data.raw_intervals) else None
        slots.append(_gap_note(_slot(d, start, max(start, end), names, minutes, raw),
                               d, data))
    compared = [s for s in slots if s.deviation_pct is not None]
    pred = sum(s.predicted_cost for s in compared)
    act = sum(s.actual_cost for s in compared)
    devs = [s.deviation_pct for s in slots if s.deviation_pct is not None]
    return Validation(
        slots=tuple(slots), compared=len(compared), predicted_cost=pred, actual_cost=act,
        deviation_pct=100.0 * (pred - act) / pred if pred > 0 else None,
        mean_abs_deviation_pct=sum(abs(x) for x in devs) / len(devs) if devs else None,
        mean_deviation_pct=sum(devs) / len(devs) if devs else None)


def _slot(d, start: float, end: float, names: Mapping[str, int],
          minutes: Mapping[int, list[NodeMinute]],
          raw: Mapping[int, tuple[tuple[float, ...], tuple[int, ...]]] | None = None
          ) -> SlotRow:
    hours = (end - start) / 3600.0
    plan = d.plan or {}
    nodes = plan.get("nodes")
    energy = read_energy(plan)
    base = dict(decision_id=d.id, trigger=d.trigger, policy=d.policy, start_s=start, end_s=end,
                hours=hours)
    if not isinstance(nodes, Mapping) or energy is None:
        return _skipped(base, "plan document has no nodes / energy")
    # cost_per_hour is c_ng at the reference rate: over the slot it is charged for this
    # many hours (the slot's own length without a tariff)
    charged_h = energy_time_s(energy, start, end - start) / 3600.0
    if hours <= 0:
        return _skipped(base, "empty slot")
    pred_cost = 0.0
    pred_kwh: float | None = 0.0
    act_mj = 0.0
    busy = measured = unmeasured = 0
    resolution = "minutes"
    pieces: list[Iterable[tuple[float, float, float]]] = []
    for name, doc in nodes.items():
        node_id = names.get(name)
        mine = [m for m in (minutes.get(node_id, ()) if node_id is not None else ())
                if overlap_s(m.minute_s, m.minute_s + MINUTE_S, start, end) > 0]
        series = raw.get(node_id) if raw is not None and node_id is not None else None
        samples = _in_slot(series, start, end) if raw is not None else None
        if (not mine and samples is None) or not isinstance(doc, Mapping):
            unmeasured += 1
            continue
        cph = _num(doc.get("cost_per_hour"))
        g = doc.get("busy_gpus")
        if cph is None or not isinstance(g, int):
            unmeasured += 1
            continue
        measured += 1
        busy += g
        pred_cost += cph * charged_h
        curve = doc.get("power_w")
        watts = _num(curve[g]) if isinstance(curve, list) and 0 <= g < len(curve) else None
        pred_kwh = None if pred_kwh is None or watts is None else pred_kwh + watts * hours / 1e3
        act_mj += samples if samples is not None else minute_energy_mj(mine, start, end)
        pieces.append(_sample_pieces(series, start, end) if samples is not None
                      else minute_pieces(mine, start, end))
        resolution = "samples" if samples is not None else "minutes"
    act_kwh = act_mj / MJ_PER_KWH
    act_cost = Prices(pue=energy.pue, price_per_kwh=energy.price_per_kwh,
                      tariff=energy.tariff).bill(act_kwh, chain.from_iterable(pieces))
    note = "" if measured else "no samples from the plan's nodes"
    return SlotRow(**base, nodes=measured, nodes_unmeasured=unmeasured, busy_gpus=busy,
                   predicted_energy_kwh=pred_kwh, actual_energy_kwh=act_kwh,
                   predicted_cost=pred_cost, actual_cost=act_cost,
                   deviation_pct=(100.0 * (pred_cost - act_cost) / pred_cost
                                  if measured and pred_cost > 0 else None),
                   note=note, resolution=resolution)


def _gap_note(slot: SlotRow, d: Any, data: ReportData) -> SlotRow:
    """A slot during which an agent of the plan's nodes was not sampling: not compared
    when that energy was not measured; when it was charged from the GPUs' counters (all
    of it at the gap's end) compared, with a note."""
    planned = set((d.plan or {}).get("nodes") or ()) if isinstance(d.plan, Mapping) else set()
    names = {n.id: n.name for n in data.nodes}
    hit = [g for g in data.gaps if names.get(g.node_id) in planned
           and overlap_s(g.start_s, max(g.end_s, g.start_s + 1e-9), slot.start_s,
                         slot.end_s) > 0]
    if not hit:
        return slot
    words = "; ".join(f"agent of {names[g.node_id]} not running {g.end_s - g.start_s:.0f} s"
                      + (": energy from the GPU counters" if g.charged else ": not measured")
                      for g in hit)
    if all(g.charged for g in hit):
        return replace(slot, note=words)
    return replace(slot, deviation_pct=None, note=words)


def _in_slot(series: tuple[tuple[float, ...], tuple[int, ...]] | None, start: float,
             end: float) -> float | None:
    """mJ of the raw samples in (start, end]; None when the node has none there."""
    if not series:
        return None
    times, mj = series
    lo, hi = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
    return float(sum(mj[lo:hi])) if hi > lo else None


def _sample_pieces(series: tuple[tuple[float, ...], tuple[int, ...]] | None, start: float,
                   end: float) -> Iterable[tuple[float, float, float]]:
    """The raw samples in (start, end] as billing pieces: each at its own time (a sample
    covers the second or so before it, billed at the rate of the hour it ends in)."""
    if not series:
        return ()
    times, mj = series
    lo, hi = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
    return spread((float(mj[i]), times[i], times[i]) for i in range(lo, hi))


def _skipped(base: dict[str, Any], note: str) -> SlotRow:
    return SlotRow(**base, nodes=0, nodes_unmeasured=0, busy_gpus=0, predicted_energy_kwh=None,
                   actual_energy_kwh=0.0, predicted_cost=0.0, actual_cost=0.0,
                   deviation_pct=None, note=note)


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
