"""The decision's plan document (``decisions.plan``, JSON) and the target read back from it.

Schema (every key always present)::

    {"format": "andreas-decision/1", "now_s": T,
     "assignments": [{"job", "node", "gpus", "gpu_ids", "expected_end_s", "epoch_time_s",
                      "predicted_cost"[, "power_limit_w"]}],   # gpu_ids: positions in the
                                             # node's usable GPUs the policy chose ([]: any
                                             # free ones); power_limit_w: the GPUs' limit,
                                             # only where the plan sets one
     "postponed": [job ids],
     "actions": [{"job", "kind", "node", "gpus", "reason"}],   # kind: Plan.actions' kinds,
                                             # or "profile" (a run of automatic profiling)
     "profiling": [{"job", "node", "gpus", "reason"}],   # profiling runs wanted or running
     "nodes": {name: {"busy_gpus", "power_w": [P0..PG], "power_source", "samples",
                      "cost_per_hour"}},            # busy_gpus: distinct GPUs in use
     "energy": {"pue", "price_per_kwh"[, "tariff": {"file", "price_per_kwh": [24],
                "pue": [24]}]},   # with [manager] tariff: pue/price are its means
     "pinned": [job ids left running on nodes that take no new work],
     "unreachable": [nodes the manager marked down itself],
     "revisit_s": T or null,    # decide again then though nothing happens (Plan.revisit_s)
     "stats": {policy counters, "jobs", "nodes", "snapshot_s", "decide_s"}}

Stored documents are read back here only: :meth:`Target.from_doc` (the manager's target)
and :func:`read_assignments` (the user views), tolerantly (a malformed entry is skipped or
its field is None, never fatal).

``stats`` values are numbers (null where not finite) or short strings: policies report
labels there too (milp's ``status``, rg's ``best_strategy``, pr's ``chosen``).
``read_stats`` reads them back from any stored document, old or malformed.

``predicted_cost`` = energy cost of the planned configuration (t / 3600 * c_ng at the
job's own g, as pi_j; with a tariff its power x the integral of price x PUE over [now,
now + t), ``costs.run_energy_cost``) + w * tardiness (seconds), i.e. the job's share of
the objective. With a tariff, a node's ``cost_per_hour`` is at the reference rate (the
tariff's means); the validation integrates the document's tariff over each slot.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NotRequired, TypedDict

import numpy as np

from andreas.costs import c_ng_per_hour, job_time_s, node_classes, run_energy_cost
from andreas.deferral import deferrals
from andreas.levels import DEFAULT, option_at
from andreas.manager.estimates import PowerCurve
from andreas.model import Action, ActionKind, Config, Energy, Job, Plan, Snapshot, Tariff

FORMAT = "andreas-decision/1"


class AssignmentDoc(TypedDict):
    """One placed job of a decision (``power_limit_w`` only below the node's default)."""

    job: str
    node: str | None
    gpus: int
    gpu_ids: list[int]
    expected_end_s: float | None
    epoch_time_s: float | None
    predicted_cost: float | None
    estimate_source: str | None
    confidence: float | None
    power_limit_w: NotRequired[float | None]


class ActionDoc(TypedDict):
    """One job's action and its reason, as ``andreas show`` prints it."""

    job: str
    kind: str
    node: str | None
    gpus: int
    reason: str


class DecisionDoc(TypedDict):
    """The JSON stored in ``decisions.plan``: what :func:`plan_document` writes. Readers
    take it as ``Mapping[str, Any]``: a stored document is checked, not trusted."""

    format: str
    now_s: float
    assignments: list[AssignmentDoc]
    postponed: list[str]
    actions: list[ActionDoc]
    nodes: dict[str, dict[str, Any]]
    energy: dict[str, Any]
    pinned: list[str]
    profiling: list[dict[str, Any]]
    unreachable: list[str]
    revisit_s: float | None
    stats: dict[str, float | str | None]


@dataclass(frozen=True, kw_only=True)
class PlanEntry:
    """A job's assignment in a stored plan document (every field may be missing)."""

    decision_id: int | None
    node: str | None = None
    gpus: int | None = None
    gpu_ids: tuple[int, ...] = ()       # positions in the node's usable GPUs (when named)
    expected_end_s: float | None = None
    predicted_cost: float | None = None
    estimate_source: str | None = None  # of the epoch time: measured, profiler, model, ...
    confidence: float | None = None     # a model's, in [0, 1]
    reason: str | None = None           # the decision's action for the job, and why
    power_limit_w: float | None = None  # the GPUs' power limit (None: their default)


def describe_estimate(source: str | None, confidence: float | None) -> str | None:
    """A plan entry's estimate source in words: measured / profiled / model with its
    confidence / a guess (None: not known, e.g. an old decision)."""
    if source is None:
        return None
    if source == "unprofiled":
        return "guess (application not measured or profiled)"
    if source.startswith("model"):
        return (f"model, confidence {confidence:.2f}" if confidence is not None
                else "model")
    return {"measured": "measured (recent epochs)", "profiler": "profiled",
            "profiles": "profiles/ (shipped estimate)"}.get(source, source)


def read_assignments(decision_id: int | None, doc: Mapping[str, Any] | None
                     ) -> dict[str, PlanEntry]:
    """The assignments of a stored plan document by job id, in plan order ({} for a
    missing or malformed document)."""
    items = doc.get("assignments") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        return {}
    out = {}
    for a in items:
        if isinstance(a, Mapping) and isinstance(a.get("job"), str):
            gpus = a.get("gpus")
            ids = a.get("gpu_ids")
            out[a["job"]] = PlanEntry(
                gpu_ids=(tuple(ids) if isinstance(ids, list) and all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)
                    else ()),
                decision_id=decision_id,
                node=a["node"] if isinstance(a.get("node"), str) else None,
                gpus=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
                expected_end_s=_finite(a.get("expected_end_s")),
                predicted_cost=_finite(a.get("predicted_cost")),
                estimate_source=(a["estimate_source"][:64]
                                 if isinstance(a.get("estimate_source"), str) else None),
                confidence=_finite(a.get("confidence")),
                power_limit_w=_finite(a.get("power_limit_w")))
    assert doc is not None             # items were a list
    actions = doc.get("actions")
    for x in actions if isinstance(actions, list) else ():
        if not (isinstance(x, Mapping) and isinstance(x.get("job"), str)
                and isinstance(x.get("reason"), str)):
            continue
        job = x["job"]
        why = x["reason"][:MAX_STAT_CHARS]
        out[job] = (replace(out[job], reason=why) if job in out
                    else PlanEntry(decision_id=decision_id, reason=why))
    return out


@dataclass(frozen=True, kw_only=True)
class JobAction:
    """What one stored decision did with one job: its action, where, and why."""

    kind: str
    node: str | None
    gpus: int | None
    reason: str


def read_job_action(doc: Mapping[str, Any] | None, job_id: str) -> JobAction | None:
    """The job's action in a stored plan document (None: not in it, or malformed)."""
    actions = doc.get("actions") if isinstance(doc, Mapping) else None
    for x in actions if isinstance(actions, list) else ():
        if isinstance(x, Mapping) and x.get("job") == job_id and isinstance(x.get("kind"), str):
            gpus = x.get("gpus")
            return JobAction(kind=x["kind"][:32],
                             node=x["node"][:128] if isinstance(x.get("node"), str) else None,
                             gpus=gpus if isinstance(gpus, int)
                             and not isinstance(gpus, bool) else None,
                             reason=(x["reason"][:MAX_STAT_CHARS]
                                     if isinstance(x.get("reason"), str) else ""))
    return None


@dataclass(frozen=True, kw_only=True)
class NodeForecast:
    """What a plan expects of one node: power with its busy GPUs, and its cost per hour."""

    busy_gpus: int
    power_w: float | None
    cost_per_hour: float | None


def read_node_forecasts(doc: Mapping[str, Any] | None) -> dict[str, NodeForecast]:
    """The plan's ``nodes`` by name ({} for a missing or malformed document; a malformed
    entry is left out)."""
    items = doc.get("nodes") if isinstance(doc, Mapping) else None
    if not isinstance(items, Mapping):
        return {}
    out = {}
    for name, n in items.items():
        if not isinstance(name, str) or not isinstance(n, Mapping):
            continue
        g, curve = n.get("busy_gpus"), n.get("power_w")
        if not isinstance(g, int) or isinstance(g, bool) or g < 0:
            continue
        power = _finite(curve[g]) if isinstance(curve, list) and g < len(curve) else None
        out[name] = NodeForecast(busy_gpus=g, power_w=power,
                                 cost_per_hour=_finite(n.get("cost_per_hour")))
    return out


@dataclass(frozen=True, kw_only=True)
class Target:
    """The desired state: where each planned job should run, which jobs wait, and why."""

    decision_id: int | None = None
    assignments: Mapping[str, Config] = field(default_factory=dict)
    postponed: frozenset[str] = frozenset()
    reasons: Mapping[str, str] = field(default_factory=dict)
    unreachable: frozenset[str] = frozenset()
    order: tuple[str, ...] = ()          # assignment order (starts follow it)
    stats: Mapping[str, float | str | None] = field(default_factory=dict)
    profiling: Mapping[str, Config] = field(default_factory=dict)   # automatic profiling
    revisit_s: float | None = None       # decide again then (the plan's revisit_s)

    def covers(self, job_id: str) -> bool:
        return (job_id in self.assignments or job_id in self.postponed
                or job_id in self.profiling)

    @classmethod
    def from_doc(cls, decision_id: int | None, doc: Mapping[str, Any] | None) -> Target:
        doc = doc or {}
        assignments = {job: Config(node=e.node, gpus=e.gpus,
                                   gpu_ids=e.gpu_ids if len(e.gpu_ids) == e.gpus else (),
                                   power_limit_w=e.power_limit_w)
                       for job, e in read_assignments(decision_id, doc).items()
                       if e.node is not None and e.gpus is not None}
        return cls(decision_id=decision_id, assignments=MappingProxyType(assignments),
                   postponed=frozenset(doc.get("postponed", ())),
                   reasons=MappingProxyType({a["job"]: a.get("reason", "")
                                             for a in doc.get("actions", ())}),
                   unreachable=frozenset(doc.get("unreachable", ())),
                   order=tuple(assignments),
                   stats=MappingProxyType(read_stats(doc)),
                   profiling=MappingProxyType(_profiling(doc)),
                   revisit_s=_finite(doc.get("revisit_s")))


def _profiling(doc: Mapping[str, Any]) -> dict[str, Config]:
    """The profiling runs of a stored document (malformed entries skipped)."""
    out = {}
    items = doc.get("profiling")
    for p in items if isinstance(items, list) else ():
        if (isinstance(p, Mapping) and isinstance(p.get("job"), str)
                and isinstance(p.get("node"), str) and isinstance(p.get("gpus"), int)
                and not isinstance(p.get("gpus"), bool) and p["gpus"] >= 1):
            out[p["job"]] = Config(node=p["node"], gpus=p["gpus"],
                                   power_limit_w=_finite(p.get("power_limit_w")))
    return out


def _num(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def _finite(value: Any) -> float | None:
    """A number read from a stored document: finite int or float (not bool), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _finite_list(value: Any) -> tuple[float, ...] | None:
    """A list of finite numbers read from a stored document, as floats; else None."""
    if not isinstance(value, list):
        return None
    out = tuple(_finite(x) for x in value)
    return None if None in out else tuple(x for x in out if x is not None)


MAX_STAT_CHARS = 200


def stat_value(value: Any) -> float | str | None:
    """One stats value as JSON can hold it: numbers (bools and numpy scalars too) as finite
    floats or null, strings as they are (capped), anything else as its text, so that a
    policy's label never breaks the decision that carries it."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float)):
        return _finite_float(value)
    if isinstance(value, str):
        return value[:MAX_STAT_CHARS]
    return str(value)[:MAX_STAT_CHARS]


def _finite_float(value: bool | int | float | None) -> float | None:
    try:
        return _num(float(value)) if value is not None else None
    except OverflowError:                      # an int beyond float's range
        return None


def read_stats(doc: Mapping[str, Any] | None) -> dict[str, float | str | None]:
    """The stats of a stored plan document: numbers as floats, strings as strings; entries
    of any other shape (or a missing or non-mapping ``stats``) are dropped, not fatal."""
    raw = doc.get("stats") if isinstance(doc, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, float | str | None] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            continue
        if isinstance(value, str):
            out[key] = value
        elif value is None or isinstance(value, (bool, int, float)):
            out[key] = _finite_float(value)
    return out


def job_estimate(snapshot: Snapshot, job: Job, node_name: str, gpus: int, *,
                 nodes: Mapping[str, Any] | None = None,
                 classes: Mapping[str, tuple] | None = None,
                 power_limit_w: float | None = None
                 ) -> tuple[float | None, float | None, float | None]:
    """(remaining seconds, seconds per epoch, predicted cost) of ``job`` on (node, gpus),
    at its power level (``andreas/levels.py``: time stretched, the GPUs' draw changed)."""
    nodes = nodes if nodes is not None else {n.name: n for n in snapshot.nodes}
    classes = classes if classes is not None else node_classes(snapshot)
    node = nodes[node_name]
    level = option_at(job, node, power_limit_w) or DEFAULT
    t = job_time_s(snapshot, job, classes[node_name], node.gpu_type, gpus, classes,
                   level.time_factor)
    times = job.epoch_time_s.get(node.gpu_type, ())
    epoch = times[gpus - 1] * level.time_factor if 0 < gpus <= len(times) else None
    if t is None:
        return None, epoch, None
    energy = run_energy_cost(snapshot, node.power_w[gpus] + gpus * level.delta_w, t)
    tardiness = max(0.0, snapshot.now_s + t - job.due_s)
    return t, epoch, energy + job.weight * tardiness


def _below_default(node: Any, limit_w: float | None) -> bool:
    """A limit worth recording: set, and not the node's default (which needs no setting)."""
    lim = node.power_limits
    return limit_w is not None and lim is not None and abs(limit_w - lim.default_w) > 1e-9


def _assignments(snapshot: Snapshot, plan: Plan,
                 sources: Mapping[tuple[str, str, int], tuple[str, float | None]]
                 ) -> tuple[list[AssignmentDoc], dict[str, tuple[int, float]]]:
    """The plan's assignments as documents, and per node the GPUs they keep busy (named
    GPUs counted once, shares too) and their power levels' change of draw."""
    jobs = {j.id: j for j in snapshot.jobs}
    assignments: list[AssignmentDoc] = []
    named: dict[str, set[int]] = {}     # GPUs a plan names, per node (shares count once)
    unnamed: dict[str, int] = {}        # GPUs of assignments that name none
    by_name = {n.name: n for n in snapshot.nodes}
    classes = node_classes(snapshot)
    level_w: dict[str, float] = {}      # per node: its jobs' power levels' change of draw
    for a in plan.assignments:
        t, epoch, cost = job_estimate(snapshot, jobs[a.job], a.node, a.gpus, nodes=by_name,
                                      classes=classes, power_limit_w=a.power_limit_w)
        level = option_at(jobs[a.job], by_name[a.node], a.power_limit_w) or DEFAULT
        level_w[a.node] = level_w.get(a.node, 0.0) + a.gpus * level.delta_w
        if a.gpu_ids:
            named.setdefault(a.node, set()).update(a.gpu_ids)
        else:
            unnamed[a.node] = unnamed.get(a.node, 0) + a.gpus
        gpu_type = by_name[a.node].gpu_type      # None in the cloud: no source
        source, conf = (sources.get((jobs[a.job].app, gpu_type, a.gpus), (None, None))
                        if gpu_type is not None else (None, None))
        doc: AssignmentDoc = {
            "job": a.job, "node": a.node, "gpus": a.gpus, "gpu_ids": list(a.gpu_ids),
            "expected_end_s": _num(snapshot.now_s + t) if t is not None else None,
            "epoch_time_s": _num(epoch), "predicted_cost": _num(cost),
            "estimate_source": source, "confidence": _num(conf)}
        if _below_default(by_name[a.node], a.power_limit_w):
            doc["power_limit_w"] = a.power_limit_w
        assignments.append(doc)
    busy = {n: (len(named.get(n, ())) + unnamed.get(n, 0), level_w.get(n, 0.0))
            for n in {*named, *unnamed, *level_w}}
    return assignments, busy


def _reasons(snapshot: Snapshot, plan: Plan) -> dict[str, str]:
    """A short human reason for every job's action."""
    jobs = {j.id: j for j in snapshot.jobs}
    nodes = {n.name: n for n in snapshot.nodes}
    classes = node_classes(snapshot)
    reps: dict[tuple, Any] = {}
    for n in nodes.values():
        reps.setdefault(classes[n.name], n)
    arrivals: dict[str, set[str]] = {}
    for a in plan.assignments:
        run = jobs[a.job].running
        if run is None or run.node != a.node:
            arrivals.setdefault(a.node, set()).add(a.job)
    held = ({d.job: d for d in deferrals(snapshot)} if plan.stats.get("deferred")
            else {})
    out = {}
    for action in plan.actions(snapshot):
        job = jobs[action.job]
        kind = action.kind
        if kind is ActionKind.WAIT:
            d = held.get(job.id)
            out[job.id] = ("wait: no free GPUs" if d is None else
                           f"wait: tariff, a start at {_hhmm(d.start_s)} UTC costs "
                           f"{d.saving:.0%} less")
            continue
        if kind is ActionKind.PREEMPT:
            taken = arrivals.get(job.running.node) if job.running else None
            out[job.id] = ("preempt: GPUs given to more urgent job" if taken
                           else "preempt: postponed by the policy")
            continue
        if kind is ActionKind.CONTINUE:
            out[job.id] = "continue"
            continue
        why = _placed_why(snapshot, job, action, reps, classes)
        run = job.running
        if run is None:                  # the one placed kind of a job that does not run
            out[job.id] = f"start: {why}"
        elif kind is ActionKind.MOVE and run.node == action.node:
            out[job.id] = _slot_move(snapshot, run, action)
        elif kind is ActionKind.MOVE:
            out[job.id] = f"move: {run.node} -> {action.node}, {why}"
        else:
            out[job.id] = f"resize: {run.gpus} -> {action.gpus} GPUs, {why}"
    return out


def _placed_why(snapshot: Snapshot, job: Job, action: Action, reps: Mapping[tuple, Any],
                classes: Mapping[str, tuple]) -> str:
    """Why a started, moved or resized job got its configuration: the cheapest one that
    meets its due date, the fastest one, or what the other jobs left."""
    options = []
    for cls, n in reps.items():      # identical nodes have identical options
        for g in range(1, n.gpus + 1):
            t = job_time_s(snapshot, job, cls, n.gpu_type, g, classes)
            if t is not None:
                cost = run_energy_cost(snapshot, n.power_w[g], t)
                options.append((cls, g, t, cost))
    on_time = [o for o in options if snapshot.now_s + o[2] < job.due_s]
    assert action.node is not None      # a placed action names its node (Plan.actions)
    mine = next((o for o in options
                 if o[0] == classes[action.node] and o[1] == action.gpus), None)
    if mine is None:
        return "placed by the policy"
    if on_time:
        best = min(o[3] for o in on_time)
        return ("cheapest config meeting due" if mine in on_time and mine[3] <= best + 1e-9
                else "meets due, cheaper configs are taken" if mine in on_time
                else "late, configs meeting due are taken")
    fastest = min(o[2] for o in options)
    return ("fastest config, due cannot be met" if mine[2] <= fastest + 1e-9
            else "due cannot be met, faster configs are taken")


def _slot_move(snapshot: Snapshot, run: Config, action: Action) -> str:
    """A share (running as ``run``) moved to other GPUs of its node: by interference, or
    by the policy."""
    here = (run.node, run.gpu_ids)
    theta = max(j.running.slowdown for j in snapshot.jobs if j.running is not None
                and (j.running.node, j.running.gpu_ids) == here)
    return (f"move: GPU slot {','.join(map(str, run.gpu_ids))} -> "
            f"{','.join(map(str, action.gpu_ids))} on {action.node}, "
            + (f"interference (measured slowdown on its GPU {theta:.0%})" if theta > 0
               else "placed by the policy"))


def _hhmm(t_s: float) -> str:
    return time.strftime("%H:%M", time.gmtime(t_s))


def energy_doc(energy: Energy, tariff_path: str | None = None) -> dict[str, Any]:
    """The ``energy`` section: the reference PUE and price (with a tariff its means, the
    rate ``cost_per_hour`` is quoted at) and, with a tariff, its 24 hours (UTC) and file."""
    doc: dict[str, Any] = {"pue": energy.pue, "price_per_kwh": energy.price_per_kwh}
    if energy.tariff is not None:
        doc["tariff"] = {"file": tariff_path, "price_per_kwh": list(energy.tariff.price_per_kwh),
                         "pue": list(energy.tariff.pue)}
    return doc


def read_energy(doc: Mapping[str, Any] | None) -> Energy | None:
    """The prices a stored plan document planned with (None when its ``energy`` section is
    missing or malformed; a malformed ``tariff`` too: a bill must not guess)."""
    energy = doc.get("energy") if isinstance(doc, Mapping) else None
    if not isinstance(energy, Mapping):
        return None
    pue, price = _finite(energy.get("pue")), _finite(energy.get("price_per_kwh"))
    if pue is None or price is None:
        return None
    raw = energy.get("tariff")
    if raw is None:
        return Energy(pue=pue, price_per_kwh=price)
    if not isinstance(raw, Mapping):
        return None
    prices, pues = _finite_list(raw.get("price_per_kwh")), _finite_list(raw.get("pue"))
    if prices is None or pues is None:
        return None
    try:
        tariff = Tariff(price_per_kwh=prices, pue=pues)
    except ValueError:
        return None
    return Energy(pue=pue, price_per_kwh=price, tariff=tariff)


def plan_document(snapshot: Snapshot, plan: Plan, curves: Mapping[str, PowerCurve], *,
                  extra_postponed: tuple[str, ...] = (), pinned: tuple[str, ...] = (),
                  unreachable: tuple[str, ...] = (), stats: Mapping[str, Any] | None = None,
                  extra_reasons: Mapping[str, str] | None = None,
                  profiling: tuple[Mapping[str, Any], ...] = (),
                  sources: Mapping[tuple[str, str, int], tuple[str, float | None]]
                  | None = None, tariff_path: str | None = None) -> DecisionDoc:
    """The JSON stored in ``decisions.plan`` (see the module docstring). ``profiling``:
    the automatic profiling's runs ({job, node, gpus, reason, start}: ``start`` true for a
    run to start, which becomes a "profile" action); ``sources``: (app, GPU type, g) ->
    (estimate source, confidence) of the epoch times, stored with each assignment;
    ``tariff_path``: the tariff file the snapshot's energy was read from (recorded)."""
    reasons = _reasons(snapshot, plan) if snapshot.nodes else {}
    assignments, busy = _assignments(snapshot, plan, sources or {})
    actions: list[ActionDoc] = [{"job": x.job, "kind": x.kind.value, "node": x.node,
                                 "gpus": x.gpus, "reason": reasons.get(x.job, "")}
                                for x in plan.actions(snapshot)]
    for p in profiling:
        if p.get("start"):
            actions.append({"job": p["job"], "kind": "profile", "node": p["node"],
                            "gpus": p["gpus"], "reason": p["reason"]})
    for job_id in extra_postponed:
        actions.append({"job": job_id, "kind": ActionKind.WAIT.value, "node": None, "gpus": 0,
                        "reason": (extra_reasons or {}).get(
                            job_id, "wait: no epoch time for any schedulable node")})
    nodes: dict[str, dict[str, Any]] = {}
    for n in snapshot.nodes:
        curve = curves[n.name]
        g, level_w = busy.get(n.name, (0, 0.0))
        g = min(g, n.gpus)
        nodes[n.name] = {"busy_gpus": g, "power_w": list(n.power_w),
                         "power_source": curve.source, "samples": curve.samples,
                         "cost_per_hour": c_ng_per_hour(n.power_w[g] + level_w,
                                                        snapshot.energy)}
    return {
        "format": FORMAT,
        "now_s": snapshot.now_s,
        "assignments": assignments,
        "postponed": list(plan.postponed) + list(extra_postponed),
        "actions": actions,
        "nodes": nodes,
        "energy": energy_doc(snapshot.energy, tariff_path),
        "pinned": list(pinned),
        "profiling": [{"job": p["job"], "node": p["node"], "gpus": p["gpus"],
                       "reason": p["reason"],
                       **({"power_limit_w": p["power_limit_w"]} if p.get("power_limit_w")
                          is not None else {})} for p in profiling],
        "unreachable": sorted(unreachable),
        "revisit_s": _num(plan.revisit_s),
        "stats": {str(k): stat_value(v) for k, v in {**plan.stats, **(stats or {})}.items()},
    }
