"""``andreas trace``: generate reproducible workload traces and look inside one.

Thin like the rest of the CLI: the work is in ``andreas.simulator.generate`` and
``andreas.formats.trace``; errors are ``AndreasError`` and become one line and exit code 2
through the main group.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import click

from andreas.infra import jsontext
from andreas.cli.common import Finite, SEED, Whole
from andreas.formats.alibaba_csv import MAX_TIME
from andreas.simulator.alibaba_load import MAX_LOAD
from andreas.simulator.generate import MAX_JOBS_PER_NODE, MAX_NODES

from andreas.simulator.generate import ARRIVALS, SCENARIOS


@click.group("trace")
def trace_group() -> None:
    """Generate, import and inspect workload traces (format andreas-trace/1, docs/FORMAT.md)."""


@trace_group.command("generate")
@click.option("--nodes", "n_nodes", type=Whole(min=1, max=MAX_NODES), required=True,
              help="Number of nodes N; the trace has jobs-per-node * N jobs.")
@click.option("--scenario", type=click.Choice([str(s) for s in SCENARIOS]), default="1",
              show_default=True,
              help="1: nodes with 2 V100 or 1 T4; 2: 4 V100 or 2 T4 (ignored with --cloud).")
@click.option("--arrival", type=click.Choice(ARRIVALS), default="exponential",
              show_default=True, help="Inter-arrival law (path-relinking paper, section 4.1).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed: the same options and seed give the same trace, bit for bit.")
@click.option("--cloud", is_flag=True,
              help="Cloud mode: bare nodes and the paper's VM catalog (K80/M60, Table 2).")
@click.option("--jobs-per-node", type=Whole(min=1, max=MAX_JOBS_PER_NODE), default=10,
              show_default=True,
              help="Jobs per node (the papers use 10).")
@click.option("--mu", type=Finite(min=0, max=1e6), default=None,
              help="Idle-GPU penalty mu of P1a per idle GPU of a node that runs jobs, "
                   "written to the trace's params [default: 1 with --cloud, as the "
                   "path-relinking paper's experiments; 0 on premise, as ANDREAS eq. 1].")
@click.option("--workloads", type=click.Choice(("default", "zeus")), default="default",
              show_default=True,
              help="default: the applications of profiles/apps.toml; zeus: the six Zeus "
                   "NSDI '23 workloads with measured GPU power limits, on V100 and P100 "
                   "nodes whose limits the policies choose (docs/power-limits.md).")
@click.option("--out", "out_path", required=True,
              type=click.Path(dir_okay=False, writable=True, path_type=str),
              help="Where to write the trace (written atomically).")
def generate_cmd(n_nodes: int, scenario: str, arrival: str, seed: int, cloud: bool,
                 jobs_per_node: int, mu: float | None, workloads: str, out_path: str) -> None:
    """Write a reproducible trace in the ANDREAS scenarios and print a one-line summary."""
    from andreas.simulator.generate import generate_trace
    from andreas.formats.trace import dump_trace, summary

    trace = generate_trace(n_nodes=n_nodes, scenario=int(scenario), arrival=arrival, seed=seed,
                           cloud=cloud, jobs_per_node=jobs_per_node, mu=mu, workloads=workloads)
    dump_trace(trace, out_path)
    s = summary(trace)
    gpus = f"up to {s['gpus']} GPUs" if s["cloud"] else f"{s['gpus']} GPUs"
    click.echo(f"wrote {out_path}: {trace.name}: {s['jobs']} jobs, {s['nodes']} nodes ({gpus}), "
               f"submissions over {s['span_s'] / 3600:.1f} h, mean inter-arrival "
               f"{_num(s['mean_interarrival_s'], '{:.0f} s')}, load {_num(s['load'], '{:.2f}')}")


@trace_group.command("import-alibaba")
@click.option("--pods", "pods_path", required=True, type=click.Path(dir_okay=False),
              help="Alibaba pod list (openb_pod_list_*.csv of cluster-trace-gpu-v2023).")
@click.option("--nodes", "nodes_path", required=True, type=click.Path(dir_okay=False),
              help="Alibaba node list (openb_node_list_gpu_node.csv; CPU-only nodes of "
                   "openb_node_list_all_node.csv are skipped).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Where to write the trace (written atomically, only if all went well).")
@click.option("--sample", type=Whole(max=10**9), default=None,
              help="Keep N of the pods that fit a kept node, uniformly at random (seeded) "
                   "[default: all].")
@click.option("--seed", type=Whole(max=2**63 - 1), default=0, show_default=True,
              help="Seed of node and pod sampling and of the synthetic GPU memory.")
@click.option("--max-nodes", type=Whole(max=10**9), default=None,
              help="Keep K GPU nodes, stratified by GPU type (the type mix stays) "
                   "[default: all].")
@click.option("--slack", type=Finite(max=1e6), default=2.0, show_default=True,
              help="Due date = submit + slack x duration.")
@click.option("--epoch-s", type=Finite(max=1e9), default=600.0,
              show_default=True,
              help="Epoch length: a pod of duration d has ceil(d / epoch-s) epochs.")
@click.option("--load", type=Finite(max=MAX_LOAD), default=None,
              help="Offered load, as `andreas trace show` reports it: the tasks' GPU-seconds "
                   "over (GPUs x submission span); submission times are scaled to give it "
                   "[default: 1, a replay where placement matters].")
@click.option("--busy-share", default=None, metavar="SHARE|full",
              help="Instead of --load: scale to this mean share of GPUs busy while tasks "
                   "are submitted, each run from its submission ('full': the full trace's, "
                   "kept per GPU; openb replays are then 0.2-0.6 %% busy).")
@click.option("--keep-times", is_flag=True,
              help="Instead of --load: keep the file's own submission times.")
@click.option("--arrival-rate", type=Finite(max=1e9), default=None, metavar="PER_HOUR",
              help="A pod list without time columns (openb_pod_list_multigpu*.csv): tasks "
                   "arrive in file order at this rate [default: the rate that gives --load].")
@click.option("--duration-s", type=Finite(max=MAX_TIME), default=3600.0, show_default=True,
              help="A pod list without time columns: every task's run time.")
@click.option("--since", type=Finite(max=MAX_TIME), default=0.0, show_default=True,
              help="Replay from this trace time (s) on: pods created before are submitted "
                   "then with the run time they had left (the openb default trace's first "
                   "24 pods are months-long survivors; arrivals are steady from ~9.9e6 s).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def import_alibaba_cmd(pods_path: str, nodes_path: str, out_path: str, sample: int | None,
                       seed: int, max_nodes: int | None, slack: float, epoch_s: float,
                       load: float | None, busy_share: str | None, keep_times: bool,
                       arrival_rate: float | None, duration_s: float, since: float,
                       as_json: bool) -> None:
    """Import Alibaba's GPU trace (cluster-trace-gpu-v2023, CC BY 4.0; Weng et al., USENIX
    ATC '23) as an andreas trace of rigid multi-resource tasks.

    Reads every published pod list (openb_pod_list_*.csv; the multigpu* ones have no
    times: their tasks arrive in file order, see --arrival-rate). Keeps scheduled GPU pods
    with a run time (Running, Succeeded, Failed); derives epochs, due dates, QoS weights,
    node power and synthetic GPU memory (docs/FORMAT.md, "Alibaba GPU trace"). Prints what
    it kept and dropped, and why, and how it spaced the submissions.
    """
    from andreas.errors import options
    from andreas.simulator.alibaba import import_alibaba
    from andreas.formats.trace import dump_trace, parse_trace, trace_to_dict

    share: float | str | None = busy_share
    if busy_share is not None and busy_share != "full":
        try:
            share = float(busy_share)
        except ValueError:
            share = busy_share               # refused below, naming the option
    with options(sample="--sample", seed="--seed", max_nodes="--max-nodes", slack="--slack",
                 epoch_s="--epoch-s", load="--load", since="--since", busy_share="--busy-share",
                 keep_times="--keep-times", arrival_rate_per_h="--arrival-rate",
                 duration_s="--duration-s"):
        trace, report = import_alibaba(pods_path, nodes_path, sample=sample, seed=seed,
                                       max_nodes=max_nodes, slack=slack, epoch_s=epoch_s,
                                       load=load, busy_share=share, keep_times=keep_times,
                                       arrival_rate_per_h=arrival_rate,
                                       duration_s=duration_s, since=since)
    parse_trace(trace_to_dict(trace))      # what is written loads: a failure here is a bug
    dump_trace(trace, out_path)
    if as_json:
        click.echo(jsontext.dumps({"out": out_path, "name": trace.name, **report.as_dict()}))
        return
    r = report
    dropped = ", ".join(f"{k} {v}" for k, v in r.dropped.items()) or "none"
    types = ", ".join(f"{t} {k}" for t, k in r.nodes_by_type.items())
    phases = ", ".join(f"{p} {k}" for p, k in r.phases.items())
    click.echo(f"wrote {out_path}: {trace.name}: {r.jobs} jobs ({r.slices} GPU slices, "
               f"{r.jobs - r.slices} whole-GPU; {phases}), {r.nodes} nodes with {r.gpus} GPUs "
               f"({types})")
    click.echo(f"dropped {r.pods - r.jobs} of {r.pods} pods: {dropped}")
    click.echo(f"submissions over {r.span_s / 3600:.1f} h: {r.spacing}; offered load "
               f"{_num(r.offered, '{:.4g}')} (all GPU-seconds / (GPUs x span), as trace "
               f"show), busy share while submitting {_num(r.load, '{:.4g}')} (full trace "
               f"{_num(r.load_full, '{:.4g}')})")
    for note in r.notes:
        click.echo(f"note: {note}")


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
        click.echo(jsontext.dumps({**s, "nodes_by_type": _nodes_by_type(trace),
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
