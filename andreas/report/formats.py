"""The report as text: a rich table for the terminal, CSV and JSON. Pure (strings out).

- Table: one row per job / node / period / slot and a TOTAL row (sums of the rows, except
  energy, whose total is the nodes' measured energy; the line under the table reconciles
  jobs' energy + unattributed = energy). Numbers are rounded for reading.
- CSV: the rows only (no total row, so every line parses the same way), one column per
  field with its unit in its name, full precision; times are unix seconds (``*_s``) with
  an ISO 8601 UTC copy next to each (``*_utc``); an empty cell is "no value".
- JSON: ``{"format": "andreas-report/1", "by", "window", "prices", "totals", "rows"}``, or
  ``"andreas-validation/1"`` with ``"slots"`` and ``"summary"``; times in unix seconds.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from andreas.console import money
from andreas.accounting import Prices
from andreas.report.compute import JobRow, NodeRow, PeriodRow, Report
from andreas.report.validate import SlotRow, Validation
from andreas.report.window import Window
from andreas.infra.timefmt import duration, iso, stamp

REPORT_FORMAT = "andreas-report/1"
VALIDATION_FORMAT = "andreas-validation/1"
TIME_FIELDS = ("submit_s", "due_s", "end_s", "start_s")


def window_doc(window: Window) -> dict[str, Any]:
    return {"since_s": window.since_s, "until_s": window.until_s, "now_s": window.now_s,
            "since": iso(window.since_s), "until": iso(window.until_s)}


def prices_doc(p: Prices) -> dict[str, Any]:
    """The report's prices; with a tariff (then pue and price_per_kwh are its means) its
    file and 24 hours (UTC) too."""
    doc: dict[str, Any] = {"pue": p.pue, "price_per_kwh": p.price_per_kwh,
                           "co2_g_per_kwh": p.co2_g_per_kwh}
    if p.tariff is not None:
        doc["tariff"] = {"file": p.tariff_path, "price_per_kwh": list(p.tariff.price_per_kwh),
                         "pue": list(p.tariff.pue)}
    return doc


def report_json(report: Report, by: str, rows: Sequence[Any]) -> str:
    doc = {"format": REPORT_FORMAT, "by": by, "window": window_doc(report.window),
           "prices": prices_doc(report.prices), "totals": asdict(report.totals),
           "rows": [asdict(r) for r in rows], "agent_gaps": [asdict(g) for g in report.gaps]}
    return json.dumps(doc, allow_nan=False, indent=1) + "\n"


def validation_json(window: Window, v: Validation) -> str:
    summary = {k: getattr(v, k) for k in ("compared", "predicted_cost", "actual_cost",
                                          "deviation_pct", "mean_abs_deviation_pct",
                                          "mean_deviation_pct")}
    doc = {"format": VALIDATION_FORMAT, "window": window_doc(window),
           "slots": [asdict(s) for s in v.slots], "summary": summary}
    return json.dumps(doc, allow_nan=False, indent=1) + "\n"


def rows_csv(rows: Sequence[Any], row_type: type) -> str:
    """The rows as CSV (header from the row type, so an empty list still has one)."""
    names = [f.name for f in fields(row_type)]
    header = []
    for n in names:
        header.append(n)
        if n in TIME_FIELDS:
            header.append(n[:-2] + "_utc")
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(header)
    for r in rows:
        line = []
        for n in names:
            value = getattr(r, n)
            line.append("" if value is None else repr(value) if isinstance(value, float)
                        else value)
            if n in TIME_FIELDS:
                line.append(iso(value) or "")
        out.writerow(line)
    return buf.getvalue()


# --------------------------------------------------------------------------- tables


def _n(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def cost_text(x: float | None) -> str:
    """Money: cents from 1 up, three significant digits below (never a bare 0.00)."""
    return money(x, grouping=True)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def title(report: Report) -> str:
    p = report.prices
    co2 = f", {p.co2_g_per_kwh:g} g CO2/kWh" if p.co2_g_per_kwh is not None else ""
    return (f"{stamp(report.window.since_s)} .. {stamp(report.window.until_s)} "
            f"({duration(report.window.until_s - report.window.since_s)}); "
            + (f"PUE {p.pue:g} x {p.price_per_kwh:g} per kWh" if p.tariff is None else
               f"tariff {p.tariff_path or '(hourly)'}: price x PUE by the hour, mean "
               f"PUE {p.pue:.3g} x {p.price_per_kwh:.4g} per kWh") + co2)


def summary_line(report: Report) -> str:
    t = report.totals
    co2 = f"; CO2 {t.co2_kg:,.2f} kg" if t.co2_kg is not None else ""
    return (f"energy {t.energy_kwh:,.3f} kWh = jobs {t.jobs_energy_kwh:,.3f} + unattributed "
            f"{t.unattributed_energy_kwh:,.3f} (idle, no job); energy cost "
            f"{cost_text(t.energy_cost)} + tardiness {cost_text(t.tardiness_cost)} = total "
            f"{cost_text(t.total_cost)}; {t.gpu_hours:,.2f} GPU-h, {t.jobs} job(s), "
            f"{t.nodes} node(s){co2}")


def gap_lines(report: Report) -> tuple[str, ...]:
    """One line per time an agent was not sampling in the window (charged or a hole)."""
    return tuple(
        f"agent of {g.node} not running {duration(g.seconds)} from {stamp(g.start_s)}: "
        + ("GPU energy charged from the energy counters" if g.charged
           else "energy NOT measured (figures of that node are low)") + f" [{g.reason}]"
        for g in report.gaps)


def _table(heading: str, columns: Sequence[tuple[str, bool]], keys: Sequence[str] = ()):
    """A rich table whose first column holds ``keys`` (names: never cut nor wrapped; a
    narrow terminal wraps the headers of the other columns instead)."""
    from rich.table import Table

    table = Table(title=heading, show_footer=False)
    width = max((len(k) for k in keys), default=0)
    for i, (name, right) in enumerate(columns):
        table.add_column(name, justify="right" if right else "left", no_wrap=i == 0,
                         min_width=max(width, len(name)) if i == 0 else None)
    return table


def job_table(report: Report):
    from rich.text import Text

    co2 = report.prices.co2_g_per_kwh is not None
    cols = [("JOB", False), ("STATE", False), ("NODES", False), ("kWh", True),
            ("ENERGY COST", True), ("LATE", True), ("PENALTY", True), ("GPU-h", True),
            ("PREDICTED", True), ("ACTUAL", True), ("DEV %", True)] + \
        ([("CO2 kg", True)] if co2 else [])
    table = _table(f"jobs: {title(report)}", cols, [r.job for r in report.jobs])
    for r in report.jobs:
        table.add_row(*map(Text, job_cells(r, co2)))
    t = report.totals
    table.add_section()
    table.add_row("TOTAL", "", "", _n(t.jobs_energy_kwh), cost_text(t.jobs_energy_cost), "",
                  cost_text(t.tardiness_cost), _n(t.gpu_hours, 2), cost_text(t.predicted_cost),
                  cost_text(sum(r.actual_cost for r in report.jobs)), "",
                  *([_n(sum(r.co2_kg or 0 for r in report.jobs), 2)] if co2 else []))
    return table


def job_cells(r: JobRow, co2: bool) -> list[str]:
    cells = [r.job, r.state, r.nodes or "-", _n(r.energy_kwh), cost_text(r.energy_cost),
             duration(r.tardiness_s) if r.tardiness_s else "-", cost_text(r.tardiness_cost),
             _n(r.gpu_hours, 2), cost_text(r.predicted_cost), cost_text(r.actual_cost),
             _pct(r.deviation_pct)]
    return cells + ([_n(r.co2_kg, 2)] if co2 else [])


def node_table(report: Report):
    from rich.text import Text

    co2 = report.prices.co2_g_per_kwh is not None
    cols = [("NODE", False), ("TYPE", False), ("GPUs", True), ("kWh", True), ("GPU kWh", True),
            ("HOST kWh", True), ("JOBS kWh", True), ("UNATTR kWh", True), ("COST", True),
            ("GPU-h", True), ("BUSY %", True), ("MEAN W", True)] + \
        ([("CO2 kg", True)] if co2 else [])
    table = _table(f"nodes: {title(report)}", cols, [r.node for r in report.nodes])
    for r in report.nodes:
        table.add_row(*map(Text, node_cells(r, co2)))
    t = report.totals
    nodes = report.nodes
    table.add_section()
    table.add_row("TOTAL", "", str(sum(r.gpus for r in nodes)), _n(t.energy_kwh),
                  _n(sum(r.gpu_energy_kwh for r in nodes)),
                  _n(sum(r.host_energy_kwh for r in nodes)),
                  _n(sum(r.jobs_energy_kwh for r in nodes)),
                  _n(sum(r.unattributed_energy_kwh for r in nodes)), cost_text(t.energy_cost),
                  _n(sum(r.gpu_hours for r in nodes), 2), "", "",
                  *([_n(t.co2_kg, 2)] if co2 else []))
    return table


def node_cells(r: NodeRow, co2: bool) -> list[str]:
    cells = [r.node, r.gpu_type, str(r.gpus), _n(r.energy_kwh), _n(r.gpu_energy_kwh),
             _n(r.host_energy_kwh), _n(r.jobs_energy_kwh), _n(r.unattributed_energy_kwh),
             cost_text(r.energy_cost), _n(r.gpu_hours, 2), f"{100 * r.busy_share:.1f}",
             _n(r.mean_power_w, 0) if r.measured_minutes else "no samples"]
    return cells + ([_n(r.co2_kg, 2)] if co2 else [])


def period_table(report: Report, rows: Sequence[PeriodRow], by: str):
    co2 = report.prices.co2_g_per_kwh is not None
    cols = [(by.upper(), False), ("kWh", True), ("JOBS kWh", True), ("UNATTR kWh", True),
            ("ENERGY COST", True), ("PENALTY", True), ("TOTAL COST", True), ("GPU-h", True),
            ("JOBS", True)] + ([("CO2 kg", True)] if co2 else [])
    table = _table(f"per {by}: {title(report)}", cols)
    for r in rows:
        table.add_row(r.period, _n(r.energy_kwh), _n(r.jobs_energy_kwh),
                      _n(r.unattributed_energy_kwh), cost_text(r.energy_cost),
                      cost_text(r.tardiness_cost), cost_text(r.total_cost), _n(r.gpu_hours, 2),
                      str(r.jobs), *([_n(r.co2_kg, 2)] if co2 else []))
    t = report.totals
    table.add_section()
    table.add_row("TOTAL", _n(t.energy_kwh), _n(sum(r.jobs_energy_kwh for r in rows)),
                  _n(sum(r.unattributed_energy_kwh for r in rows)), cost_text(t.energy_cost),
                  cost_text(t.tardiness_cost), cost_text(t.total_cost), _n(t.gpu_hours, 2),
                  str(t.jobs), *([_n(t.co2_kg, 2)] if co2 else []))
    return table


def slot_table(window: Window, v: Validation):
    from rich.text import Text

    cols = [("DECISION", True), ("TRIGGER", False), ("START", False), ("LENGTH", True),
            ("NODES", True), ("BUSY", True), ("PRED kWh", True), ("ACT kWh", True),
            ("PRED COST", True), ("ACT COST", True), ("DEV %", True), ("NOTE", False)]
    table = _table(f"validation per rescheduling slot: {stamp(window.since_s)} .. "
                   f"{stamp(window.until_s)}; deviation = (predicted - actual) / predicted",
                   cols)
    table.columns[2].no_wrap = True             # START: a whole time stamp
    table.columns[2].min_width = 17
    for s in v.slots:
        table.add_row(*map(Text, slot_cells(s)))
    table.add_section()
    table.add_row("ALL", "", "", "", "", "", "", "", _n(v.predicted_cost, 4),
                  _n(v.actual_cost, 4), _pct(v.deviation_pct), "")
    return table


def slot_cells(s: SlotRow) -> list[str]:
    return [str(s.decision_id), s.trigger, stamp(s.start_s), duration(s.end_s - s.start_s),
            f"{s.nodes}" + (f" (+{s.nodes_unmeasured} unmeasured)" if s.nodes_unmeasured
                            else ""),
            str(s.busy_gpus), _n(s.predicted_energy_kwh), _n(s.actual_energy_kwh),
            _n(s.predicted_cost, 4), _n(s.actual_cost, 4), _pct(s.deviation_pct),
            s.note or f"from {s.resolution}"]


def validation_summary(v: Validation) -> str:
    return (f"{len(v.slots)} slot(s), {v.compared} compared: predicted {v.predicted_cost:,.4f}, "
            f"actual {v.actual_cost:,.4f}, deviation {_pct(v.deviation_pct)} % overall, "
            f"mean |deviation| per slot {_n(v.mean_abs_deviation_pct, 2)} %")
