"""The comparison report: a terminal table, CSV and JSON files, and PNG plots.

Written atomically per file (:func:`andreas.infra.fileio.replace_atomic`) so an interrupted run
leaves no half-written output.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from andreas.infra import jsontext
from andreas.infra.fileio import replace_atomic
from andreas.simulator.compare import reduction_matrix
from andreas.simulator.results import SimResult

SUMMARY_FIELDS = ("policy", "total_cost", "energy_cost", "tardiness_cost", "energy_kwh",
                  "late_jobs", "makespan_s", "optimizer_calls", "optimizer_mean_s",
                  "optimizer_max_s", "preemptions", "migrations", "resizes", "wall_s",
                  "gpu_utilization", "gpu_utilization_scheduling", "device_hours",
                  "mean_jct_s", "mean_slowdown", "performance_retained")


def print_table(results: Sequence[SimResult], title: str, console=None) -> None:
    from rich.table import Table

    from andreas.console import console as default_console

    console = console or default_console()
    table = Table(title=title)
    for col in ("policy", "total €", "energy €", "tardiness €", "energy kWh", "late jobs",
                "makespan h", "opt. calls", "opt. mean ms", "opt. max ms", "stopped"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    best = min(r.total_cost for r in results)
    for r in results:
        style = "bold green" if r.total_cost == best else None
        table.add_row(r.policy, f"{r.total_cost:.2f}", f"{r.energy_cost:.2f}",
                      f"{r.tardiness_cost:.2f}", f"{r.energy_kwh:.1f}", str(r.late_jobs),
                      f"{r.makespan_s / 3600:.1f}", str(r.optimizer_calls),
                      f"{r.optimizer_mean_s * 1000:.1f}", f"{r.optimizer_max_s * 1000:.1f}",
                      str(r.preemptions + r.migrations + r.resizes), style=style)
    console.print(table)
    _placement_table(results, console)
    pct = reduction_matrix(results)
    names = [r.policy for r in results]
    matrix = Table(title="cost reduction of the column's policy against the row's, in % of "
                         "the row's total cost (path-relinking paper eq. 3)")
    matrix.add_column("vs")
    for n in names:
        matrix.add_column(n, justify="right")
    for a in names:
        matrix.add_row(a, *(f"{pct[a][b]:+.1f}" if a != b else "-" for b in names))
    console.print(matrix)


def _placement_table(results: Sequence[SimResult], console) -> None:
    """The packing papers' figures: GPU utilisation, device-hours, JCT, slowdown and the
    performance kept under interference."""
    from rich.table import Table

    table = Table(title="placement: GPU allocation over the makespan and over the scheduling "
                        "window (first submission to last start), GPUs in use x time, "
                        "mean completion time, slowdown and performance under interference")
    for col in ("policy", "GPU util %", "util % sched.", "device h", "mean JCT h",
                "mean slowdown", "performance %"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in results:
        table.add_row(r.policy, f"{r.gpu_utilization * 100:.1f}",
                      f"{r.gpu_utilization_scheduling * 100:.1f}", f"{r.device_hours:.1f}",
                      f"{r.mean_jct_s / 3600:.2f}", f"{r.mean_slowdown:.2f}",
                      f"{r.performance_retained * 100:.2f}")
    console.print(table)


def write_outputs(results: Sequence[SimResult], out_dir: Path, *, plots: bool = True) -> list[Path]:
    """summary.csv, jobs.csv, results.json, reduction.csv and the PNG plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SUMMARY_FIELDS, extrasaction="ignore")
    w.writeheader()
    for r in results:
        w.writerow(r.summary())
    written.append(replace_atomic(out_dir / "summary.csv", buf.getvalue()))
    buf = io.StringIO()
    jobs_w: csv.DictWriter[str] | None = None       # its columns are the first row's
    for r in results:
        for job in r.jobs:
            row = {"policy": r.policy, **asdict(job)}
            if jobs_w is None:
                jobs_w = csv.DictWriter(buf, fieldnames=list(row))
                jobs_w.writeheader()
            jobs_w.writerow(row)
    written.append(replace_atomic(out_dir / "jobs.csv", buf.getvalue()))
    pct = reduction_matrix(results)
    buf = io.StringIO()
    names = [r.policy for r in results]
    cw = csv.writer(buf)
    cw.writerow(["vs", *names])
    for a in names:
        cw.writerow([a, *(f"{pct[a][b]:.4f}" for b in names)])
    written.append(replace_atomic(out_dir / "reduction.csv", buf.getvalue()))
    doc = {"results": [r.summary() for r in results], "reduction_pct": pct,
           "jobs": {r.policy: [asdict(j) for j in r.jobs] for r in results}}
    written.append(replace_atomic(out_dir / "results.json", jsontext.dumps(doc, indent=1)))
    if plots:
        from andreas.simulator.plots import write_plots
        written.extend(write_plots(results, out_dir))
    return written
