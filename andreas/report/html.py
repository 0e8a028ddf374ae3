"""The report as one self-contained HTML page: summary, plots and tables. Pure (a string).

Self-contained so it can be mailed or archived: inline CSS, no script, PNG plots
(matplotlib, Agg backend) embedded as ``data:image/png;base64`` URIs. Every string that
comes from the store (job ids, node names, triggers, notes) goes through
``html.escape``. Plots: power over time per node, energy per job (the 30 largest), energy
per day, predicted vs actual cost per job (jobs whose whole life is in the window) and per
rescheduling slot (validation).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from andreas.report.compute import PeriodRow, PowerSeries, Report
from andreas.report.formats import (cost_text, job_cells, node_cells, slot_cells,
                                    summary_line, title, validation_summary)
from andreas.report.validate import Validation
from andreas.infra.timefmt import stamp

TOP_JOBS = 30
_DEFINITIONS = (
    "Node energy is measured (GPUs + host, idle included); a job's energy is what the agents "
    "attributed to it (its GPUs and its share of the host); unattributed = node energy - jobs' "
    "energy (idle GPUs, idle nodes). Cost = kWh x PUE x price; penalty = weight x seconds "
    "late within the window; actual = energy cost + penalty. Deviation = (predicted - actual) "
    "/ predicted, per job only when its whole life lies in the window.")
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em}
p.meta{color:#555;margin-top:0}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.l,th.l{text-align:left}
tr.total td{font-weight:bold;border-top:2px solid #999}
figure{display:inline-block;margin:.5em 1em .5em 0}figcaption{font-size:.85em;color:#555}
img{max-width:100%;border:1px solid #eee}
"""


def render_html(report: Report, days: Sequence[PeriodRow], series: Sequence[PowerSeries],
                validation: Validation | None) -> str:
    """The page; ``days``: the per-day rows, ``series``: power per node for the plot."""
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>andreas report {escape(stamp(report.window.since_s))} .. "
        f"{escape(stamp(report.window.until_s))}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>andreas energy and cost report</h1>",
        f'<p class="meta">{escape(title(report))}; generated {escape(stamp(report.window.now_s))}'
        "</p>",
        f'<p id="summary">{escape(summary_line(report))}</p>',
        f'<p class="meta">{escape(_DEFINITIONS)}</p>',
        '<section id="plots"><h2>Plots</h2>']
    for caption, draw in _plots(report, days, series, validation):
        parts.append(_figure(caption, draw))
    parts.append("</section>")
    parts.append(_section("periods", "Per day", _day_rows(days, report)))
    parts.append(_section("nodes", "Per node", _node_table(report)))
    parts.append(_section("jobs", "Per job", _job_table(report)))
    if validation is not None:
        parts.append(_section("validation", "Validation: predicted vs actual cost per "
                              "rescheduling slot", _slot_table(validation)
                              + f"<p>{escape(validation_summary(validation))}</p>"))
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --------------------------------------------------------------------------- tables


def _section(ident: str, heading: str, body: str) -> str:
    return f'<section id="{ident}"><h2>{escape(heading)}</h2>{body}</section>'


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int,
                total: Sequence[str] | None = None) -> str:
    """A table whose first ``left`` columns are left-aligned; every cell is escaped."""
    def cells(row: Sequence[str], tag: str) -> str:
        return "".join(f'<{tag}{" class=l" if i < left else ""}>{escape(str(c))}</{tag}>'
                       for i, c in enumerate(row))
    body = [f"<tr>{cells(r, 'td')}</tr>" for r in rows]
    if total is not None:
        body.append(f'<tr class="total">{cells(total, "td")}</tr>')
    return (f"<table><thead><tr>{cells(header, 'th')}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _job_table(report: Report) -> str:
    co2 = report.prices.co2_g_per_kwh is not None
    header = ["job", "state", "nodes", "kWh", "energy cost", "late", "penalty", "GPU-h",
              "predicted", "actual", "dev %"] + (["CO2 kg"] if co2 else [])
    if not report.jobs:
        return "<p>no jobs in this window</p>"
    t = report.totals
    total = ["TOTAL", "", "", f"{t.jobs_energy_kwh:,.3f}", cost_text(t.jobs_energy_cost), "",
             cost_text(t.tardiness_cost), f"{t.gpu_hours:,.2f}", cost_text(t.predicted_cost),
             cost_text(sum(r.actual_cost for r in report.jobs)), ""] + \
        ([f"{sum(r.co2_kg or 0 for r in report.jobs):,.2f}"] if co2 else [])
    return _html_table(header, [job_cells(r, co2) for r in report.jobs], 3, total)


def _node_table(report: Report) -> str:
    co2 = report.prices.co2_g_per_kwh is not None
    header = ["node", "type", "GPUs", "kWh", "GPU kWh", "host kWh", "jobs kWh",
              "unattributed kWh", "cost", "GPU-h", "busy %", "mean W"] + \
        (["CO2 kg"] if co2 else [])
    t = report.totals
    total = ["TOTAL", "", "", f"{t.energy_kwh:,.3f}", "", "", f"{t.jobs_energy_kwh:,.3f}",
             f"{t.unattributed_energy_kwh:,.3f}", cost_text(t.energy_cost), "", "", ""] + \
        ([f"{t.co2_kg:,.2f}"] if co2 else [])
    return _html_table(header, [node_cells(r, co2) for r in report.nodes], 2, total)


def _day_rows(days: Sequence[PeriodRow], report: Report) -> str:
    header = ["day", "kWh", "jobs kWh", "unattributed kWh", "energy cost", "penalty",
              "total cost", "GPU-h", "jobs"]
    rows = [[d.period, f"{d.energy_kwh:,.3f}", f"{d.jobs_energy_kwh:,.3f}",
             f"{d.unattributed_energy_kwh:,.3f}", cost_text(d.energy_cost),
             cost_text(d.tardiness_cost), cost_text(d.total_cost), f"{d.gpu_hours:,.2f}",
             str(d.jobs)] for d in days]
    t = report.totals
    total = ["TOTAL", f"{t.energy_kwh:,.3f}", f"{t.jobs_energy_kwh:,.3f}",
             f"{t.unattributed_energy_kwh:,.3f}", cost_text(t.energy_cost),
             cost_text(t.tardiness_cost), cost_text(t.total_cost), f"{t.gpu_hours:,.2f}",
             str(t.jobs)]
    return _html_table(header, rows, 1, total)


def _slot_table(v: Validation) -> str:
    if not v.slots:
        return "<p>no decisions in this window</p>"
    header = ["decision", "trigger", "start", "length", "nodes", "busy GPUs", "pred. kWh",
              "act. kWh", "predicted", "actual", "dev %", "note"]
    return _html_table(header, [slot_cells(s) for s in v.slots], 0)


# --------------------------------------------------------------------------- plots


def _plots(report: Report, days: Sequence[PeriodRow], series: Sequence[PowerSeries],
           validation: Validation | None) -> list[tuple[str, Callable[[Any], None]]]:
    out: list[tuple[str, Callable[[Any], None]]] = []
    if series:
        first = min(s.t_s[0] for s in series)
        last = max(s.t_s[-1] for s in series)
        out.append((f"Power per node (GPUs + host, mean per interval), measured "
                    f"{stamp(first)} .. {stamp(last)}", lambda ax: _power(ax, series)))
    if any(j.energy_kwh > 0 for j in report.jobs):
        out.append((f"Energy per job (largest {TOP_JOBS})", lambda ax: _job_energy(ax, report)))
    if days:
        out.append(("Energy per day: jobs and unattributed (idle)", lambda ax: _days(ax, days)))
    if any(j.deviation_pct is not None for j in report.jobs):
        out.append(("Predicted (at submission) vs actual cost per job",
                    lambda ax: _job_scatter(ax, report)))
    if validation is not None and validation.compared:
        out.append(("Predicted vs actual energy cost per rescheduling slot",
                    lambda ax: _slots(ax, validation)))
    return out


def _figure(caption: str, draw: Callable[[Any], None]) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Node and job names are data: "$x^$" is printed, never parsed as mathtext.
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        return _draw(caption, draw, plt)


def _draw(caption: str, draw: Callable[[Any], None], plt: Any) -> str:
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
    try:
        draw(ax)
        height = getattr(ax, "andreas_height_in", None)   # a chart that needs more room
        if height is not None:
            fig.set_size_inches(6.4, height)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def _dt(t_s: float) -> datetime:
    return datetime.fromtimestamp(t_s, UTC)


def _power(ax, series: Sequence[PowerSeries]) -> None:
    """Over the measured span (at least two minutes): matplotlib widens a span of one
    instant to four years, which drew an empty plot from 2025 to 2029."""
    import matplotlib.dates as mdates

    few = max(len(s.t_s) for s in series) <= 60
    for s in series:
        ax.plot([_dt(t) for t in s.t_s], s.power_w, label=s.node, linewidth=1,
                marker="o" if few else None, markersize=3)
    first = min(s.t_s[0] for s in series)
    last = max(s.t_s[-1] for s in series)
    pad = max(60.0, 0.02 * (last - first))
    ax.set_xlim(_dt(first - pad), _dt(last + pad))
    ax.set_ylim(0, 1.15 * max((max(s.power_w) for s in series), default=1.0) or 1.0)
    ax.set_ylabel("W")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    if len(series) <= 12:
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)


def _job_energy(ax, report: Report) -> None:
    """One bar per job, the figure as tall as its labels need (0.19 in per bar: 7-point
    labels never overlap), long ids shortened in the middle (the table has them whole)."""
    jobs = sorted((j for j in report.jobs if j.energy_kwh > 0),
                  key=lambda j: -j.energy_kwh)[:TOP_JOBS][::-1]
    ax.barh(range(len(jobs)), [j.energy_kwh for j in jobs], color="#4477aa")
    ax.set_yticks(range(len(jobs)), [_short(j.job) for j in jobs])
    ax.set_ylim(-0.6, len(jobs) - 0.4)
    ax.set_xlabel("kWh")
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.andreas_height_in = max(3.2, 0.9 + 0.19 * len(jobs))


def _short(label: str, width: int = 28) -> str:
    if len(label) <= width:
        return label
    keep = (width - 1) // 2
    return f"{label[:keep]}…{label[-(width - 1 - keep):]}"


def _days(ax, days: Sequence[PeriodRow]) -> None:
    labels = [d.period for d in days]
    jobs = [d.jobs_energy_kwh for d in days]
    ax.bar(labels, jobs, label="jobs", color="#4477aa")
    ax.bar(labels, [max(0.0, d.unattributed_energy_kwh) for d in days], bottom=jobs,
           label="unattributed", color="#bbbbbb")
    ax.set_ylabel("kWh")
    ax.legend(fontsize="small")
    ax.tick_params(axis="x", labelsize=7, rotation=45)


def _job_scatter(ax, report: Report) -> None:
    pairs = [(j.predicted_cost, j.actual_cost) for j in report.jobs
             if j.deviation_pct is not None and j.predicted_cost is not None]
    pred = [p for p, _ in pairs]
    act = [a for _, a in pairs]
    ax.scatter(pred, act, color="#aa3377", s=14)
    top = max(pred + act) * 1.05
    ax.plot([0, top], [0, top], color="#999", linewidth=1, label="actual = predicted")
    ax.set_xlabel("predicted cost")
    ax.set_ylabel("actual cost")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)


def _slots(ax, v: Validation) -> None:
    slots = [s for s in v.slots if s.deviation_pct is not None]
    x = list(range(len(slots)))
    ax.bar([i - 0.2 for i in x], [s.predicted_cost for s in slots], width=0.4,
           label="predicted", color="#4477aa")
    ax.bar([i + 0.2 for i in x], [s.actual_cost for s in slots], width=0.4, label="actual",
           color="#ee6677")
    ax.set_xticks(x, [str(s.decision_id) for s in slots], fontsize=7)
    ax.set_xlabel("decision")
    ax.set_ylabel("energy cost")
    ax.legend(fontsize="small")
