"""``andreas trace``: generate reproducible workload traces and look inside one.

Thin like the rest of the CLI: the work is in ``andreas.simulator.generate`` and
``andreas.formats.trace``; errors are ``AndreasError`` and become one line and exit code 2
through the main group.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

import click

from andreas.simulator.generate import ARRIVALS, SCENARIOS


@click.group("trace")
def trace_group() -> None:
    """Generate and inspect workload traces (format andreas-trace/1, docs/FORMAT.md)."""


@trace_group.command("generate")
@click.option("--nodes", "n_nodes", type=click.IntRange(min=1), required=True,
              help="Number of nodes N; the trace has jobs-per-node * N jobs.")
@click.option("--scenario", type=click.Choice([str(s) for s in SCENARIOS]), default="1",
              show_default=True,
              help="1: nodes with 2 V100 or 1 T4; 2: 4 V100 or 2 T4 (ignored with --cloud).")
@click.option("--arrival", type=click.Choice(ARRIVALS), default="exponential",
              show_default=True, help="Inter-arrival law (path-relinking paper, section 4.1).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed: the same options and seed give the same trace, bit for bit.")
@click.option("--cloud", is_flag=True,
              help="Cloud mode: bare nodes and the paper's VM catalog (K80/M60, Table 2).")
@click.option("--jobs-per-node", type=click.IntRange(min=1), default=10, show_default=True,
              help="Jobs per node (the papers use 10).")
@click.option("--mu", type=click.FloatRange(min=0, max=1e6), default=None,
              help="Idle-GPU penalty mu of P1a per idle GPU of a node that runs jobs, "
                   "written to the trace's params [default: 1 with --cloud, as the "
                   "path-relinking paper's experiments; 0 on premise, as ANDREAS eq. 1].")
@click.option("--out", "out_path", required=True,
              type=click.Path(dir_okay=False, writable=True, path_type=str),
              help="Where to write the trace (written atomically).")
def generate_cmd(n_nodes: int, scenario: str, arrival: str, seed: int, cloud: bool,
                 jobs_per_node: int, mu: float | None, out_path: str) -> None:
    """Write a reproducible trace in the ANDREAS scenarios and print a one-line summary."""
    from andreas.simulator.generate import generate_trace
    from andreas.formats.trace import dump_trace, summary

    trace = generate_trace(n_nodes=n_nodes, scenario=int(scenario), arrival=arrival, seed=seed,
                           cloud=cloud, jobs_per_node=jobs_per_node, mu=mu)
    dump_trace(trace, out_path)
    s = summary(trace)
    gpus = f"up to {s['gpus']} GPUs" if s["cloud"] else f"{s['gpus']} GPUs"
    click.echo(f"wrote {out_path}: {trace.name}: {s['jobs']} jobs, {s['nodes']} nodes ({gpus}), "
               f"submissions over {s['span_s'] / 3600:.1f} h, mean inter-arrival "
               f"{_num(s['mean_interarrival_s'], '{:.0f} s')}, load {_num(s['load'], '{:.2f}')}")


@trace_group.command("show")
@click.argument("trace_path", metavar="TRACE.json", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def show_cmd(trace_path: str, as_json: bool) -> None:
    """Summarise a trace: nodes by type, jobs by application, arrivals and load.

    The load estimate is the jobs' least GPU-time (best g and GPU type for each job)
    divided by the cluster's GPUs times the span of submissions: near or above 1 the
    cluster cannot keep up without running late.
    """
    from andreas.formats.trace import load_trace, summary

    trace = load_trace(trace_path)
    s = summary(trace)
    if as_json:
        click.echo(json.dumps({**s, "nodes_by_type": _nodes_by_type(trace),
                               "jobs_by_app": _jobs_by_app(trace)}))
        return
    _print_show(trace, s)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _nodes_by_type(trace: Any) -> list[dict[str, Any]]:
    if trace.cloud:
        return [{"vm": c.name, "gpu_type": c.gpu_type, "gpus": c.gpus,
                 "cost_per_hour": c.cost_per_hour} for c in trace.catalog]
    groups: Counter = Counter((n.gpu_type, n.gpus, n.power_w) for n in trace.nodes)
    return [{"gpu_type": t, "gpus": g, "nodes": k, "power_w": list(p)}
            for (t, g, p), k in groups.items()]


def _jobs_by_app(trace: Any) -> list[dict[str, Any]]:
    from andreas.formats.snapshot import hardware as hardware_of

    hardware = hardware_of(trace.nodes, trace.catalog)
    by_app: dict[str, list] = defaultdict(list)
    for job in trace.jobs:
        by_app[job.app or "-"].append(job)
    out = []
    for app, jobs in sorted(by_app.items()):
        fastest = [min(j.remaining_s(t, g) or float("inf") for t, cap in hardware.items()
                       for g in range(1, cap + 1)) for j in jobs]
        out.append({"app": app, "jobs": len(jobs), "epochs_min": min(j.epochs for j in jobs),
                    "epochs_max": max(j.epochs for j in jobs),
                    "mean_fastest_h": sum(fastest) / len(fastest) / 3600,
                    "gpu_types": sorted({t for j in jobs for t in j.epoch_time_s})})
    return out


def _print_show(trace: Any, s: dict[str, Any]) -> None:
    from rich.table import Table

    from andreas.console import console

    out = console()
    nodes = Table(title=f"{trace.name or 'trace'}: {s['nodes']} nodes"
                        + (" (cloud: each runs one VM of this catalog)" if trace.cloud else ""))
    if trace.cloud:
        for col in ("VM", "GPU type", "GPUs", "cost per hour"):
            nodes.add_column(col, justify="right" if col in ("GPUs", "cost per hour") else "left")
        for row in _nodes_by_type(trace):
            nodes.add_row(row["vm"], row["gpu_type"], str(row["gpus"]),
                          f"{row['cost_per_hour']:.2f}")
    else:
        for col in ("GPU type", "nodes", "GPUs per node", "power W (0..G busy)"):
            nodes.add_column(col, justify="right" if col in ("nodes", "GPUs per node") else "left")
        for row in _nodes_by_type(trace):
            nodes.add_row(row["gpu_type"], str(row["nodes"]), str(row["gpus"]),
                          ", ".join(f"{w:g}" for w in row["power_w"]))
    out.print(nodes)
    jobs = Table(title=f"{s['jobs']} jobs by application")
    for col in ("app", "jobs", "epochs", "mean fastest h", "GPU types"):
        jobs.add_column(col, justify="right" if col in ("jobs", "mean fastest h") else "left")
    for row in _jobs_by_app(trace):
        jobs.add_row(row["app"], str(row["jobs"]), f"{row['epochs_min']}-{row['epochs_max']}",
                     f"{row['mean_fastest_h']:.1f}", ", ".join(row["gpu_types"]))
    out.print(jobs)
    out.print(f"submissions: {s['first_submit_s'] / 3600:.1f} h to "
              f"{s['last_submit_s'] / 3600:.1f} h (span {s['span_s'] / 3600:.1f} h), "
              f"mean inter-arrival {_num(s['mean_interarrival_s'], '{:.0f} s')}\n"
              f"load estimate: {_num(s['load'], '{:.2f}')} = least GPU-seconds of all jobs / "
              f"({s['gpus']} GPUs x span)", markup=False, highlight=False, soft_wrap=True)
