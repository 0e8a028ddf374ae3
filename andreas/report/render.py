"""From the rows of a window to the text the user asked for: pure.

``render(data, prices, by=..., fmt=..., validate=...)`` returns either the output (a table
renderable for the terminal, or CSV / JSON / HTML text) or, for a window with nothing in
it, the one-line message "no jobs/samples between X and Y" (``--validate``: "no
decisions between X and Y"), which is not an error. The HTML page always carries every
section (per day, node, job, the validation when there are decisions); ``--by`` picks the
rows of the table, CSV and JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from andreas.accounting import Prices
from andreas.errors import InputError
from andreas.report import formats
from andreas.report.compute import (JobRow, NodeRow, PeriodRow, build_report,
                                    period_rows, power_series)
from andreas.report.read import ReportData
from andreas.report.validate import SlotRow, validate as validate_slots
from andreas.infra.timefmt import stamp

BY_CHOICES = ("job", "node", "day", "week")
FORMAT_CHOICES = ("table", "csv", "json", "html")


@dataclass(frozen=True, kw_only=True)
class Output:
    """``text`` (csv/json/html), or ``tables`` + ``lines`` (rich, for the terminal), or
    ``message`` alone for an empty window."""

    text: str | None = None
    tables: tuple[Any, ...] = ()
    lines: tuple[str, ...] = ()
    message: str | None = None


def check_choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InputError(f"{option} {value!r}: must be one of {', '.join(choices)}")
    return value


def render(data: ReportData, prices: Prices, *, by: str = "job", fmt: str = "table",
           validate: bool = False) -> Output:
    check_choice("--by", by, BY_CHOICES)
    check_choice("--format", fmt, FORMAT_CHOICES)
    w = data.window
    between = f"between {stamp(w.since_s)} and {stamp(w.until_s)}"
    report = build_report(data, prices)
    if validate and fmt != "html":
        if not data.decisions:
            return Output(message=f"no decisions {between}")
        v = validate_slots(data)
        if fmt == "json":
            return Output(text=formats.validation_json(w, v))
        if fmt == "csv":
            return Output(text=formats.rows_csv(v.slots, SlotRow))
        return Output(tables=(formats.slot_table(w, v),),
                      lines=(formats.validation_summary(v),))
    if report.empty:
        return Output(message=f"no jobs/samples {between}")
    if fmt == "html":
        from andreas.report.html import render_html

        checked = validate_slots(data) if data.decisions else None
        return Output(text=render_html(report, period_rows(data, prices, "day"),
                                       power_series(data), checked))
    rows: tuple[Any, ...]
    row_type: type
    periods: tuple[PeriodRow, ...] = ()
    if by == "job":
        rows, row_type = report.jobs, JobRow
    elif by == "node":
        rows, row_type = report.nodes, NodeRow
    else:
        periods = period_rows(data, prices, by)
        rows, row_type = periods, PeriodRow
    if fmt == "json":
        return Output(text=formats.report_json(report, by, rows))
    if fmt == "csv":
        return Output(text=formats.rows_csv(rows, row_type))
    table = (formats.job_table(report) if by == "job" else formats.node_table(report)
             if by == "node" else formats.period_table(report, periods, by))
    return Output(tables=(table,), lines=(formats.summary_line(report),
                                          *formats.gap_lines(report)))
