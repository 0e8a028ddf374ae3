"""Read and write ``andreas-snapshot/1`` documents (docs/FORMAT.md) as model objects.

A snapshot drives real container starts and stops, so it is read strictly: a typo, a
missing field or an impossible value stops the run with one line that names the object
(job id, node name, catalog entry or ``snapshot``), the field and the bad value, rather
than letting a policy plan on half-right data. Unknown keys are rejected for the same
reason (a misspelt ``epochs_done`` would silently restart a job's clock).

The per-section readers (``parse_energy``, ``parse_params``, ``parse_catalog``,
``parse_nodes``, ``parse_job``, ``check_job_placement``) and writers (``energy_to_dict``,
``params_to_dict``, ``hardware_to_dict``, ``job_to_dict``) know nothing about snapshots
as a whole, so the trace reader and writer (``andreas/formats/trace.py``) share them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from andreas.errors import InputError
from andreas.infra.fileio import read_text_capped
from andreas.limits import (MAX_EPOCHS, MAX_GPUS_PER_JOB, MAX_GPUS_PER_NODE, MAX_PENALTY,
                            MAX_PERIOD_S, MAX_PRICE_PER_KWH, MAX_PUE, MAX_WEIGHT,
                            MAX_POWER_W, MIN_PUE, MIN_TRACE_PERIOD_S)
from andreas.model import (GPU_MILLI, POSTPONEMENT_KINDS, PROGRESS_KINDS, CatalogEntry, Config,
                           Demand, Energy, Job, Node, Params, Snapshot)
from andreas.formats import power as powerdoc
from andreas.formats.checks import (Fields, _fail, check_integer, check_list, check_name,
                                   check_number, show)
from andreas.formats.strict import RepeatedKey, json_loads

T = TypeVar("T")

SNAPSHOT_FORMAT = "andreas-snapshot/1"

_TOP_KEYS = ("format", "name", "now_s", "energy", "params", "nodes", "jobs", "catalog")
_ENERGY_KEYS = ("pue", "price_per_kwh")
_PARAMS_KEYS = ("rho", "period_s", "mu", "progress", "restart_overhead_s", "postponement")
_NODE_KEYS = ("name", "gpu_type", "gpus", "power_w", "cpu_milli", "memory_mib", "gpu_memory_mib",
              "power_limits")

_CAPACITY_KEYS = ("cpu_milli", "memory_mib", "gpu_memory_mib")
_CLOUD_NODE_KEYS = ("name", "config")
_CATALOG_KEYS = ("name", "gpu_type", "gpus", "cost_per_hour")
_TRACE_JOB_KEYS = ("id", "app", "submit_s", "due_s", "weight", "epochs", "epoch_time_s",
                   "demand", "power_levels")
_DEMAND_KEYS = ("gpus", "gpu_milli", "cpu_milli", "memory_mib", "gpu_memory_mib",
                "gpu_memory_peak_mib", "peak_probability")
# Bounds of every number in a document: finite is not enough, a 10**9-epoch job
# or a node with 10**6 GPUs hangs the simulator or allocates gigabytes, and sums of
# 1e308 overflow to inf and turn the objective into NaN.
MAX_TIME_S = 1e11               # |unix seconds|: about year 5138
MAX_DURATION_S = 1e7            # an epoch, a restart overhead: about 4 months
MAX_RUN_S = 366 * 86400.0       # a job's run time on its fastest configuration
MAX_CAPACITY = 10**9    # bound on milli-cores and MiB: finite, and far above any machine
_SNAPSHOT_JOB_KEYS = _TRACE_JOB_KEYS + ("epochs_done", "running")
_RUNNING_KEYS = ("node", "gpus", "gpu_ids", "slowdown", "power_limit_w")
MAX_SLOWDOWN = 1e3


# --------------------------------------------------------------------------- sections

def parse_energy(raw: Any, label: str = "snapshot") -> Energy:
    """Site energy parameters; absent fields take the ANDREAS testbed defaults."""
    if raw is None:
        return Energy()
    f = Fields(raw, label, _ENERGY_KEYS, prefix="energy.")
    d = Energy()
    return Energy(pue=f.number("pue", ge=MIN_PUE, le=MAX_PUE, default=d.pue),
                  price_per_kwh=f.number("price_per_kwh", gt=0, le=MAX_PRICE_PER_KWH,
                                         default=d.price_per_kwh))


def parse_params(raw: Any, label: str = "snapshot") -> Params:
    """Optimizer parameters; absent fields take the model defaults."""
    if raw is None:
        return Params()
    f = Fields(raw, label, _PARAMS_KEYS, prefix="params.")
    d = Params()
    progress = f.get("progress", d.progress)
    if progress not in PROGRESS_KINDS:
        _fail(label, "params.progress", f"must be one of {', '.join(PROGRESS_KINDS)}", progress)
    postponement = f.get("postponement", d.postponement)
    if postponement not in POSTPONEMENT_KINDS:
        _fail(label, "params.postponement",
              f"must be one of {', '.join(POSTPONEMENT_KINDS)}", postponement)
    return Params(rho=f.number("rho", gt=0, le=MAX_PENALTY, default=d.rho),
                  period_s=f.number("period_s", ge=MIN_TRACE_PERIOD_S, le=MAX_PERIOD_S,
                                    default=d.period_s),
                  mu=f.number("mu", ge=0, le=MAX_PENALTY, default=d.mu), progress=progress,
                  restart_overhead_s=f.number("restart_overhead_s", ge=0, le=MAX_DURATION_S,
                                              default=d.restart_overhead_s),
                  postponement=postponement)


def _label(kind: str, plural: str, index: int, raw: Any, key: str) -> str:
    """``job j001`` once the id is known to be good, else ``jobs[3]`` so the message stays clear."""
    if isinstance(raw, Mapping):
        try:
            return f"{kind} {check_name('', key, raw.get(key))}"
        except InputError:
            pass
    return f"{plural}[{index}]"


def _no_duplicates(label: str, field: str, name: str, seen: dict[str, str]) -> None:
    if name in seen:
        _fail(label, field, f"duplicates {seen[name]}", name)


def parse_catalog(raw: Any, label: str = "snapshot") -> tuple[CatalogEntry, ...]:
    """Cloud VM types; a positive price keeps f_bar's per-job cost term non-zero."""
    items = check_list(label, "catalog", raw, nonempty=True)
    out: list[CatalogEntry] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        f = Fields(item, _label("catalog entry", "catalog", i, item, "name"), _CATALOG_KEYS)
        name = f.name("name")
        _no_duplicates(f.label, "name", name, seen)
        seen[name] = f"catalog[{i}]"
        out.append(CatalogEntry(name=name, gpu_type=f.name("gpu_type"),
                                gpus=f.integer("gpus", ge=1, le=MAX_GPUS_PER_NODE),
                                cost_per_hour=f.number("cost_per_hour", gt=0,
                                                       le=MAX_POWER_W)))
    return tuple(out)


def parse_nodes(raw: Any, catalog: Sequence[CatalogEntry] = (),
                label: str = "snapshot") -> tuple[Node, ...]:
    """Nodes with their hardware, or (cloud mode: a catalog) bare names plus the VM they run."""
    items = check_list(label, "nodes", raw, nonempty=True)
    entries = {c.name for c in catalog}
    out: list[Node] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        f = Fields(item, _label("node", "nodes", i, item, "name"),
                   _CLOUD_NODE_KEYS if catalog else _NODE_KEYS)
        name = f.name("name")
        _no_duplicates(f.label, "name", name, seen)
        seen[name] = f"nodes[{i}]"
        if catalog:
            config = None
            if f.has("config"):
                config = f.name("config")
                if config not in entries:
                    _fail(f.label, "config", "names an unknown catalog entry "
                          f"(known: {', '.join(sorted(entries))})", config)
            out.append(Node(name=name, config=config))
            continue
        gpus = f.integer("gpus", ge=1, le=MAX_GPUS_PER_NODE)
        power = check_list(f.label, "power_w", f.get("power_w"))
        if len(power) != gpus + 1:
            _fail(f.label, "power_w", f"must have gpus+1 = {gpus + 1} entries "
                  "(power with 0..gpus GPUs busy)", power)
        # Busy power must be positive: c_ng = 0 would make f_bar's per-job term divide by zero.
        watts = tuple(check_number(f.label, f"power_w[{g}]", p, ge=0 if g == 0 else None,
                                   le=MAX_POWER_W,
                                   gt=None if g == 0 else 0) for g, p in enumerate(power))
        cpu, mem, gpu_mem = (f.integer(key, ge=0, le=MAX_CAPACITY, default=0)
                             for key in _CAPACITY_KEYS)
        limits = powerdoc.parse_limits(f) if f.has("power_limits") else None
        out.append(Node(name=name, gpu_type=f.name("gpu_type"), gpus=gpus, power_w=watts,
                        cpu_milli=cpu, memory_mib=mem, gpu_memory_mib=gpu_mem,
                        power_limits=limits))
    return tuple(out)


def parse_demand(f: Fields) -> Demand | None:
    """A job's ``demand`` object: a rigid task's GPUs (or a fraction of one), CPU and memory."""
    if not f.has("demand"):
        return None
    d = Fields(f.get("demand"), f.label, _DEMAND_KEYS, prefix="demand.")
    gpus = d.integer("gpus", ge=1, le=MAX_GPUS_PER_JOB, default=1)
    milli = d.integer("gpu_milli", ge=1, le=GPU_MILLI, le_what=f"{GPU_MILLI} (one whole GPU)",
                      default=GPU_MILLI)
    cpu, mem, gpu_mem, peak = (d.integer(key, ge=0, le=MAX_CAPACITY, default=0)
                               for key in ("cpu_milli", "memory_mib", "gpu_memory_mib",
                                           "gpu_memory_peak_mib"))
    p = d.number("peak_probability", ge=0, default=0.0)
    if p > 1:
        _fail(f.label, "demand.peak_probability", "must be <= 1", p)
    if p > 0 and not peak:
        _fail(f.label, "demand.peak_probability", "needs demand.gpu_memory_peak_mib > 0 (the "
              "variable part that occurs with this probability)", p)
    return Demand(gpus=gpus, gpu_milli=milli, cpu_milli=cpu, memory_mib=mem,
                  gpu_memory_mib=gpu_mem, gpu_memory_peak_mib=peak, peak_probability=p)


def parse_job(raw: Any, index: int, *, progress: bool = True) -> Job:
    """One job's own fields; ``progress`` admits ``epochs_done`` and ``running`` (not in traces)."""
    f = Fields(raw, _label("job", "jobs", index, raw, "id"),
               _SNAPSHOT_JOB_KEYS if progress else _TRACE_JOB_KEYS)
    job_id = f.name("id")
    epochs = f.integer("epochs", ge=1, le=MAX_EPOCHS)
    times_raw = f.get("epoch_time_s")
    if not isinstance(times_raw, Mapping):
        _fail(f.label, "epoch_time_s",
              "must be an object {gpu_type: [seconds per epoch on 1.. GPUs]}", times_raw)
    if not times_raw:
        _fail(f.label, "epoch_time_s", "must name at least one GPU type", times_raw)
    times: dict[str, tuple[float, ...]] = {}
    for gpu_type, seq in times_raw.items():
        check_name(f.label, "epoch_time_s", gpu_type)
        field = f"epoch_time_s.{gpu_type}"
        check_list(f.label, field, seq, nonempty=True)
        times[gpu_type] = tuple(check_number(f.label, f"{field}[{k}]", t, gt=0,
                                             le=MAX_DURATION_S) for k, t in enumerate(seq))
    fastest_s = epochs * min(min(seq) for seq in times.values())
    if fastest_s > MAX_RUN_S:
        # A simulation reschedules every period until the job ends: a job of 10**9 epochs
        # would keep it busy for ever.
        _fail(f.label, "epochs", f"x the fastest epoch time is {fastest_s / 86400:.0f} days, "
              f"more than {MAX_RUN_S / 86400:.0f}", epochs)
    running = None
    if progress and f.has("running"):
        r = Fields(f.get("running"), f.label, _RUNNING_KEYS, prefix="running.")
        gpus = r.integer("gpus", ge=1)
        ids: tuple[int, ...] = ()
        if r.has("gpu_ids"):
            raw_ids = check_list(f.label, "running.gpu_ids", r.get("gpu_ids"))
            ids = tuple(check_integer(f.label, f"running.gpu_ids[{k}]", v, ge=0,
                                      le=MAX_GPUS_PER_JOB - 1) for k, v in enumerate(raw_ids))
            if len(ids) != gpus or len(set(ids)) != len(ids):
                _fail(f.label, "running.gpu_ids", f"must name {gpus} distinct GPU indexes "
                      "(running.gpus)", list(ids))
        slowdown = r.number("slowdown", ge=0, default=0.0)
        if slowdown > MAX_SLOWDOWN:
            _fail(f.label, "running.slowdown", f"must be <= {MAX_SLOWDOWN:g}", slowdown)
        limit = r.number("power_limit_w", gt=0, le=MAX_POWER_W, default=None)
        running = Config(node=r.name("node"), gpus=gpus, gpu_ids=ids, slowdown=slowdown,
                         power_limit_w=limit)
    # fractional progress is allowed: a running job part-way through an epoch
    done = f.number("epochs_done", ge=0, default=0) if progress else 0
    if done > epochs:
        _fail(f.label, "epochs_done", f"must be <= epochs ({epochs})", done)
    demand = parse_demand(f)
    if demand is not None:
        for gpu_type, seq in times.items():
            if len(seq) < demand.gpus:
                _fail(f.label, f"epoch_time_s.{gpu_type}", f"must have an entry for "
                      f"demand.gpus = {demand.gpus} GPUs", list(seq))
    levels = powerdoc.parse_levels(f) if f.has("power_levels") else {}
    return Job(id=job_id, app=f.text("app"),
               submit_s=f.number("submit_s", ge=-MAX_TIME_S, le=MAX_TIME_S),
               due_s=f.number("due_s", ge=-MAX_TIME_S, le=MAX_TIME_S),
               weight=f.number("weight", ge=0, le=MAX_WEIGHT), epochs=epochs,
               epoch_time_s=times, epochs_done=int(done) if float(done).is_integer() else done,
               running=running, demand=demand, power_levels=levels)


def hardware(nodes: Iterable[Node], catalog: Sequence[CatalogEntry]) -> dict[str, int]:
    """GPU type -> the most GPUs of that type one job could get (one node or one VM)."""
    out: dict[str, int] = {}
    pairs = ([(c.gpu_type, c.gpus) for c in catalog] if catalog
             else [(n.gpu_type, n.gpus) for n in nodes if n.gpu_type])
    for gpu_type, gpus in pairs:
        out[gpu_type] = max(out.get(gpu_type, 0), gpus)
    return out


def check_job_placement(job: Job, nodes: Sequence[Node],
                        catalog: Sequence[CatalogEntry] = (),
                        types: Mapping[str, int] | None = None) -> None:
    """Cross-references of an unfinished job: known GPU types, a place to run, a real config.

    ``types`` is ``hardware(nodes, catalog)`` when the caller checks many jobs (traces).
    """
    label = f"job {job.id}"
    types = hardware(nodes, catalog) if types is None else types
    where = "catalog entry" if catalog else "node"
    if not any(min(types[t], len(times)) >= 1 for t, times in job.epoch_time_s.items()
               if t in types):
        _fail(label, "epoch_time_s",
              f"fits no {where}: it has epoch times only for {', '.join(sorted(job.epoch_time_s))}"
              f" (the cluster has: {', '.join(sorted(types))})")
    for gpu_type in job.epoch_time_s:
        if gpu_type not in types:
            _fail(label, "epoch_time_s", f"names GPU type {show(gpu_type)} that no {where} has "
                  f"(known: {', '.join(sorted(types))})")
    if job.demand is not None:
        _check_demand(label, job, nodes)
    if job.running is not None:
        gpu_type, capacity = _running_hardware(label, job.running.node, nodes, catalog)
        if job.running.gpus > capacity:
            _fail(label, "running.gpus", f"must be <= {capacity} (GPUs of {job.running.node})",
                  job.running.gpus)
        if job.remaining_s(gpu_type, job.running.gpus) is None:
            _fail(label, "running.gpus", f"has no epoch time for {job.running.gpus} x {gpu_type} "
                  f"on {job.running.node}", job.running.gpus)
        powerdoc.check_running_limit(label, job, nodes)


def _check_demand(label: str, job: Job, nodes: Sequence[Node]) -> None:
    """A rigid task must fit, whole, on at least one node of a GPU type it accepts: name the
    first resource no such node offers."""
    demand = job.demand
    assert demand is not None
    typed = [n for n in nodes if n.gpu_type and job.runs_on(n.gpu_type, demand.gpus)]
    if not typed:
        _fail(label, "demand.gpus", "fits no node of a GPU type in epoch_time_s (none has "
              "that many GPUs)", demand.gpus)
    gpu_mem = demand.gpu_memory_mib + demand.gpu_memory_peak_mib
    needs = {"cpu_milli": demand.cpu_milli, "memory_mib": demand.memory_mib,
             "gpu_memory_mib": gpu_mem}
    for key, need in needs.items():
        most = [getattr(n, key) for n in typed]
        if need and all(0 < m < need for m in most):
            field = key if key != "gpu_memory_mib" or not demand.gpu_memory_peak_mib \
                else "gpu_memory_mib + demand.gpu_memory_peak_mib"
            _fail(label, f"demand.{field}", f"fits no node (the most any accepted node has is "
                  f"{max(most)})", need)
    for n in typed:
        if all(getattr(n, k) == 0 or getattr(n, k) >= need for k, need in needs.items()):
            return
    _fail(label, "demand", "fits no single node (each lacks CPU, memory or GPU memory)",
          {k: getattr(demand, k) for k in ("gpus", "cpu_milli", "memory_mib",
                                           "gpu_memory_mib")})


def _running_hardware(label: str, node_name: str, nodes: Sequence[Node],
                      catalog: Sequence[CatalogEntry]) -> tuple[str, int]:
    node = next((n for n in nodes if n.name == node_name), None)
    if node is None:
        _fail(label, "running.node", "names an unknown node", node_name)
    if not catalog:
        return node.gpu_type or "", node.gpus
    entry = next((c for c in catalog if c.name == node.config), None)
    if entry is None:
        _fail(label, "running.node", "names a node with no 'config' (cloud mode: it runs no VM)",
              node_name)
    return entry.gpu_type, entry.gpus


def check_capacity(jobs: Iterable[Job], nodes: Sequence[Node],
                   catalog: Sequence[CatalogEntry] = ()) -> None:
    """Running jobs cannot hold more GPUs than their node has: that state cannot exist."""
    busy: dict[str, int] = {}
    for job in jobs:
        if job.running is not None:
            busy[job.running.node] = busy.get(job.running.node, 0) + job.running.gpus
    entries = {c.name: c for c in catalog}
    for node in nodes:
        capacity = entries[node.config].gpus if catalog and node.config else node.gpus
        if busy.get(node.name, 0) > capacity:
            raise InputError(f"node {node.name}: running jobs hold {busy[node.name]} GPUs, "
                             f"node has {capacity}")


# --------------------------------------------------------------------------- documents

def read_json(path: str | Path) -> Any:
    """The JSON value in a file; a read or syntax problem becomes an InputError naming the path."""
    text = read_text_capped(path, what="JSON document")
    try:
        return json_loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RepeatedKey as e:
        raise InputError(f"{path}: not valid: key {show(e.key)} appears twice in one object"
                         ) from None
    except RecursionError:
        raise InputError(f"{path}: not valid: JSON nested too deeply") from None


def load_document(path: str | Path, parse: Callable[[Any], T]) -> T:
    """Read a JSON document file and ``parse`` it; error messages start with the path."""
    doc = read_json(path)
    try:
        return parse(doc)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def load_snapshot(path: str | Path) -> Snapshot:
    """Read and validate a snapshot file; error messages start with the path."""
    return load_document(path, parse_snapshot)


def parse_snapshot(doc: Any) -> Snapshot:
    """Validate a decoded ``andreas-snapshot/1`` document and build the model objects.

    Finished jobs (``epochs_done == epochs``) are dropped: they need nothing. Jobs
    submitted after ``now_s`` are an error: a snapshot holds only submitted jobs.
    """
    top = Fields(doc, "snapshot", _TOP_KEYS)
    fmt = top.get("format")
    if fmt != SNAPSHOT_FORMAT:
        _fail("snapshot", "format", f"must be {show(SNAPSHOT_FORMAT)}", fmt)
    now = top.number("now_s", ge=-MAX_TIME_S, le=MAX_TIME_S)
    name = top.text("name")
    energy = parse_energy(top.get("energy", None))
    params = parse_params(top.get("params", None))
    catalog = parse_catalog(top.get("catalog")) if top.has("catalog") else ()
    nodes = parse_nodes(top.get("nodes"), catalog)
    jobs: list[Job] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(check_list("snapshot", "jobs", top.get("jobs"))):
        job = parse_job(raw, i)
        label = f"job {job.id}"
        _no_duplicates(label, "id", job.id, seen)
        seen[job.id] = f"jobs[{i}]"
        if job.submit_s > now:
            _fail(label, "submit_s", f"must be <= now_s ({now:g}): a snapshot holds only "
                  "submitted jobs", job.submit_s)
        if job.epochs_left == 0:
            continue
        check_job_placement(job, nodes, catalog)
        jobs.append(job)
    check_capacity(jobs, nodes, catalog)
    return Snapshot(now_s=now, nodes=nodes, jobs=tuple(jobs), catalog=catalog, energy=energy,
                    params=params, name=name)


def snapshot_to_dict(s: Snapshot) -> dict[str, Any]:
    """The JSON document of a snapshot; ``parse_snapshot`` of it gives back an equal snapshot."""
    doc: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "name": s.name,
        "now_s": s.now_s,
        "energy": energy_to_dict(s.energy),
        "params": params_to_dict(s.params),
        **hardware_to_dict(s.nodes, s.catalog),
    }
    doc["jobs"] = [job_to_dict(j) for j in s.jobs]
    return doc


def energy_to_dict(e: Energy) -> dict[str, Any]:
    return {"pue": e.pue, "price_per_kwh": e.price_per_kwh}


def params_to_dict(p: Params) -> dict[str, Any]:
    """Optional keys only when they differ from the defaults, so documents stay as the format
    shows them."""
    params: dict[str, Any] = {"rho": p.rho, "period_s": p.period_s}
    d = Params()
    for key in ("mu", "progress", "restart_overhead_s", "postponement"):
        if getattr(p, key) != getattr(d, key):
            params[key] = getattr(p, key)
    return params


def hardware_to_dict(nodes: Sequence[Node], catalog: Sequence[CatalogEntry]) -> dict[str, Any]:
    """``catalog`` and bare ``nodes`` in cloud mode, else ``nodes`` with their hardware."""
    if catalog:
        return {"catalog": [{"name": c.name, "gpu_type": c.gpu_type, "gpus": c.gpus,
                             "cost_per_hour": c.cost_per_hour} for c in catalog],
                "nodes": [{"name": n.name, **({"config": n.config} if n.config else {})}
                          for n in nodes]}
    return {"nodes": [{"name": n.name, "gpu_type": n.gpu_type, "gpus": n.gpus,
                       "power_w": list(n.power_w),
                       **{k: getattr(n, k) for k in _CAPACITY_KEYS if getattr(n, k)},
                       **powerdoc.limits_to_dict(n)}
                      for n in nodes]}


def job_to_dict(j: Job) -> dict[str, Any]:
    """A job's JSON object; progress fields only once it has started (never in a trace)."""
    out: dict[str, Any] = {"id": j.id, "app": j.app, "submit_s": j.submit_s, "due_s": j.due_s,
                           "weight": j.weight, "epochs": j.epochs,
                           "epoch_time_s": {t: list(v) for t, v in j.epoch_time_s.items()}}
    if j.epochs_done or j.running is not None:
        out["epochs_done"] = j.epochs_done
    if j.demand is not None:
        d = j.demand
        out["demand"] = {"gpus": d.gpus, "gpu_milli": d.gpu_milli,
                         **{k: getattr(d, k) for k in _DEMAND_KEYS[2:] if getattr(d, k)}}
    if j.power_levels:
        out["power_levels"] = powerdoc.levels_to_dict(j)
    if j.running is not None:
        out["running"] = {"node": j.running.node, "gpus": j.running.gpus}
        if j.running.gpu_ids:
            out["running"]["gpu_ids"] = list(j.running.gpu_ids)
        if j.running.slowdown:
            out["running"]["slowdown"] = j.running.slowdown
        if j.running.power_limit_w is not None:
            out["running"]["power_limit_w"] = j.running.power_limit_w
    return out
