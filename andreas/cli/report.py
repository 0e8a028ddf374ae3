"""``andreas report``: energy, cost and CO2 per job, node, day or week; ``--validate``
compares predicted with actual cost per rescheduling slot. The library is
:mod:`andreas.report`; this module parses options, reads the store once, and writes.

Tests (and embedders) pass ``obj={"clock": ...}`` to the click context for "now".
"""

from __future__ import annotations

import io
import time
from typing import Any

import click

from andreas.cli.common import db_errors
from andreas.errors import InputError
from andreas.infra.fileio import check_output_file, write_text_atomic


def _now(ctx: click.Context) -> float:
    obj = ctx.find_object(dict) or {}
    return float(obj.get("clock", time.time)())


def parse_co2(value: str | None, default: float | None) -> float | None:
    if value is None:
        return default
    try:
        co2 = float(value)
    except ValueError:
        co2 = float("nan")
    if not co2 >= 0 or co2 == float("inf"):
        raise InputError(f"--co2-g-per-kwh {value!r}: must be a number >= 0 (grams of CO2 "
                         "per kWh of the grid)")
    return co2


def write_atomic(path: str, text: str) -> None:
    """--output: atomic (a reader never sees half a report; a failure keeps the old file)."""
    write_text_atomic(path, text, label=f"--output {path}")


def _tables_text(tables: tuple[Any, ...], lines: tuple[str, ...]) -> str:
    from rich.console import Console

    buf = io.StringIO()
    out = Console(file=buf, width=200, color_system=None, force_terminal=False, markup=False,
                  emoji=False)
    for t in tables:
        out.print(t)
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    return buf.getvalue()


@click.command("report")
@click.option("--since", default=None, metavar="WHEN",
              help="Start of the window: -7d / -12h / -1h30m (before now), now, an ISO date "
                   "(2026-11-01, 00:00 UTC) or date-time (2026-11-01T08:00Z), or unix "
                   "seconds. Default: -7d.")
@click.option("--until", default=None, metavar="WHEN",
              help="End of the window (excluded), same forms. Default: now.")
@click.option("--by", default="job", show_default=True, metavar="job|node|day|week",
              help="Rows per job, node, UTC day or ISO week (table, csv, json).")
@click.option("--format", "fmt", default="table", show_default=True,
              metavar="table|csv|json|html",
              help="Output format; html is one self-contained page with plots and every "
                   "table (needs --output).")
@click.option("--output", "-o", default=None, metavar="FILE",
              help="Write to FILE (atomically) instead of stdout.")
@click.option("--co2-g-per-kwh", default=None, metavar="G",
              help="Grid carbon intensity in g CO2/kWh: adds kg CO2 (default: [report] "
                   "grid_co2_g_per_kwh; none when unset).")
@click.option("--validate", is_flag=True,
              help="Predicted vs actual energy cost per rescheduling slot, and overall (the "
                   "ANDREAS paper's Table III).")
@click.pass_context
@db_errors
def report_cmd(ctx: click.Context, since: str | None, until: str | None, by: str, fmt: str,
               output: str | None, co2_g_per_kwh: str | None, validate: bool) -> None:
    """Energy (kWh), energy cost (x PUE x price; with [manager] tariff x price(t) x PUE(t)
    when it was used), tardiness penalty, GPU-hours and predicted vs actual cost, per job,
    node, day or week, over a window.

    \b
    Node energy is measured (GPU + host, idle included); job energy is what the agents
    attributed to each job; "unattributed" is the difference (idle GPUs, hosts of idle
    nodes), so jobs + unattributed = the nodes' energy. Tardiness counts the seconds late
    within the window. An empty window prints "no jobs/samples between ..." (exit 0).
    \b
      andreas report --since -7d --by node
      andreas report --since 2026-11-01 --until 2026-12-01 --by day --format csv -o nov.csv
      andreas report --format html -o report.html
      andreas report --validate --since -1d
    """
    from andreas.config import load_settings
    from andreas.report.read import read_window
    from andreas.report.render import BY_CHOICES, FORMAT_CHOICES, check_choice, render
    from andreas.manager.snapshot import settings_prices
    from andreas.report.window import make_window
    from andreas.store.opener import open_store

    check_choice("--by", by, BY_CHOICES)
    check_choice("--format", fmt, FORMAT_CHOICES)
    if fmt == "html" and output is None:
        raise InputError("--format html needs --output FILE (an HTML page is not for the "
                         "terminal)")
    if output is not None:
        check_output_file(output, f"--output {output}")
    window = make_window(since, until, _now(ctx))
    settings = load_settings()
    prices = settings_prices(settings.manager,
                             parse_co2(co2_g_per_kwh, settings.report.grid_co2_g_per_kwh))
    store = open_store(settings=settings, retries=0)
    try:
        data = read_window(store, window)
    finally:
        store.dispose()
    out = render(data, prices, by=by, fmt=fmt, validate=validate)
    if out.message is not None:
        click.echo(out.message)
        return
    if out.text is not None:
        text = out.text
    elif output is not None:
        text = _tables_text(out.tables, out.lines)
    else:
        from andreas.console import console

        term = console()
        for t in out.tables:
            term.print(t)
        for line in out.lines:
            term.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    if output is None:
        click.echo(text, nl=False)
    else:
        write_atomic(output, text)
        click.echo(f"wrote {output}", err=True)


def register_report(main: click.Group) -> None:
    main.add_command(report_cmd)
