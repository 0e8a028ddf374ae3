"""Read and write ``andreas-trace/1`` documents (docs/FORMAT.md): a whole simulated workload.

A trace is read as strictly as a snapshot, with the same section readers from
``andreas/formats/snapshot.py``: a simulation that runs for minutes on a trace with a typo
would waste the operator's time and mislead the comparison. Beyond the snapshot rules
a trace job must not carry ``epochs_done`` or ``running`` (a trace describes jobs before
they are submitted), ``submit_s`` must be >= 0 and ``due_s`` >= ``submit_s``.

Jobs are returned sorted by ``submit_s`` (stable, so equal submit times keep the file's
order): files written by hand or merged from several sources need not be sorted, and
the simulator consumes submissions in time order.

``dump_trace`` writes a temporary file next to the target and renames it, so a crash
or a full disk never leaves a half-written trace under the target name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from andreas.errors import InputError
from andreas.infra.fileio import write_text_atomic
from andreas.model import GPU_MILLI, Job, Trace
from andreas.formats.snapshot import (Fields, check_job_placement, check_list, energy_to_dict,
                              hardware_to_dict, job_to_dict, params_to_dict, parse_catalog,
                              load_document, parse_energy, parse_job, parse_nodes, parse_params,
                              show)
from andreas.formats.snapshot import hardware as hardware_of

TRACE_FORMAT = "andreas-trace/1"
_TOP_KEYS = ("format", "name", "energy", "params", "catalog", "nodes", "jobs")
_PROGRESS_KEYS = ("epochs_done", "running")


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace file; error messages start with the path."""
    return load_document(path, parse_trace)


def parse_trace(doc: Any) -> Trace:
    """Validate a decoded ``andreas-trace/1`` document and build the model objects."""
    if isinstance(doc, Mapping) and doc.get("format") != TRACE_FORMAT:
        # before the unknown-key check: a snapshot given as a trace should say so
        if "format" not in doc:
            raise InputError("trace: field 'format' is missing "
                             f"(must be {show(TRACE_FORMAT)})")
        raise InputError(f"trace: field 'format' must be {show(TRACE_FORMAT)}, "
                         f"got {show(doc['format'])}")
    top = Fields(doc, "trace", _TOP_KEYS)
    name = top.text("name")
    energy = parse_energy(top.get("energy", None), "trace")
    params = parse_params(top.get("params", None), "trace")
    catalog = parse_catalog(top.get("catalog"), "trace") if top.has("catalog") else ()
    nodes = parse_nodes(top.get("nodes"), catalog, "trace")
    types = hardware_of(nodes, catalog)
    jobs: list[Job] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(check_list("trace", "jobs", top.get("jobs"), nonempty=True)):
        _no_progress(raw, i)
        job = parse_job(raw, i, progress=False)
        label = f"job {job.id}"
        if job.id in seen:
            raise InputError(f"{label}: field 'id' duplicates {seen[job.id]}, got {show(job.id)}")
        seen[job.id] = f"jobs[{i}]"
        if job.submit_s < 0:
            raise InputError(f"{label}: field 'submit_s' must be >= 0, got {show(job.submit_s)}")
        if job.due_s < job.submit_s:
            raise InputError(f"{label}: field 'due_s' must be >= submit_s "
                             f"({show(job.submit_s)}), got {show(job.due_s)}")
        check_job_placement(job, nodes, catalog, types)
        jobs.append(job)
    jobs.sort(key=lambda j: j.submit_s)
    return Trace(name=name, nodes=nodes, jobs=tuple(jobs), energy=energy, params=params,
                 catalog=catalog)


def _no_progress(raw: Any, index: int) -> None:
    """A clearer message than "unknown field" for the snapshot-only progress fields."""
    if not isinstance(raw, Mapping):
        return
    for key in _PROGRESS_KEYS:
        if key in raw:
            job_id = raw.get("id")
            label = f"job {job_id}" if isinstance(job_id, str) and job_id else f"jobs[{index}]"
            raise InputError(f"{label}: field '{key}' is not allowed in a trace (jobs in a trace "
                             f"have not started; progress belongs in a snapshot), "
                             f"got {show(raw[key])}")


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """The JSON document of a trace; ``parse_trace`` of it gives back an equal trace."""
    doc: dict[str, Any] = {
        "format": TRACE_FORMAT,
        "name": trace.name,
        "energy": energy_to_dict(trace.energy),
        "params": params_to_dict(trace.params),
        **hardware_to_dict(trace.nodes, trace.catalog),
    }
    doc["jobs"] = [job_to_dict(j) for j in trace.jobs]
    return doc


def dumps_trace(trace: Trace) -> str:
    """JSON text with one node, catalog entry or job per line: diffable and greppable."""
    doc = trace_to_dict(trace)
    lines = ["{"]
    keys = list(doc)
    for k, key in enumerate(keys):
        end = "," if k < len(keys) - 1 else ""
        value = doc[key]
        if isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            lines += [f"    {json.dumps(item)}{',' if i < len(value) - 1 else ''}"
                      for i, item in enumerate(value)]
            lines.append(f"  ]{end}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dump_trace(trace: Trace, path: str | Path) -> None:
    """Write atomically: a temporary file in the same directory, then a rename over ``path``."""
    write_text_atomic(path, dumps_trace(trace))


def gpu_count(trace: Trace) -> int:
    """GPUs of the cluster; cloud: every node configured with the largest VM."""
    if trace.cloud:
        return len(trace.nodes) * max(c.gpus for c in trace.catalog)
    return sum(n.gpus for n in trace.nodes)


def min_gpu_seconds(job: Job, hardware: Mapping[str, int]) -> float:
    """The least GPU-time the job needs: min over (type, g) of g * epochs * t_g; a rigid
    task (``demand``) only with its own g, a GPU slice counting its share of each GPU."""
    if job.demand is not None:
        g = job.demand.gpus
        share = job.demand.gpu_milli / GPU_MILLI if job.demand.shared else 1.0
        return min((g * share * job.epochs * times[g - 1]
                    for gpu_type, times in job.epoch_time_s.items()
                    if len(times) >= g and hardware.get(gpu_type, 0) >= g), default=0.0)
    return min(g * job.epochs * t for gpu_type, times in job.epoch_time_s.items()
               for g, t in enumerate(times[: hardware.get(gpu_type, 0)], start=1))


def summary(trace: Trace) -> dict[str, Any]:
    """The figures `andreas trace generate` and `trace show` print; load = work / capacity."""
    hardware = hardware_of(trace.nodes, trace.catalog)
    submits = [j.submit_s for j in trace.jobs]
    span = max(submits) - min(submits)
    gpus = gpu_count(trace)
    work = sum(min_gpu_seconds(j, hardware) for j in trace.jobs)
    return {"name": trace.name, "jobs": len(trace.jobs), "nodes": len(trace.nodes),
            "gpus": gpus, "cloud": trace.cloud, "first_submit_s": min(submits),
            "last_submit_s": max(submits), "span_s": span,
            "mean_interarrival_s": span / (len(submits) - 1) if len(submits) > 1 else None,
            "load": work / (gpus * span) if span > 0 else None}
