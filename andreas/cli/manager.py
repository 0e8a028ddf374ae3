"""``andreas manager run`` (the Job Manager daemon) and ``andreas costs`` (c_ng per node).

Both read the configured store (``ANDREAS_DB_URL`` / ``[store] url``) and ``[manager]``
settings; see ``andreas.config``.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import click

from andreas.infra import jsontext
from andreas.cli.common import MAX_PORT_TEXT, MAX_WINDOW_H, Finite, Whole
from andreas.config import MAX_PERIOD_S

from andreas.config import load_settings
from andreas.policies import manager_policies


@click.group("manager")
def manager_group() -> None:
    """The Job Manager: plans at every submission, completion and period H, and starts and
    stops the jobs' containers on the nodes to follow the plan."""


@manager_group.command("run")
@click.option("--dry-run", is_flag=True,
              help="Touch no container: log the actions it would take (laptop demo with "
                   "SQLite and fake-GPU nodes). Decisions and attempts are still recorded "
                   "in the store, so use a throw-away one: a real manager started on it "
                   "later finds those attempts without containers and requeues their jobs.")
@click.option("--policy", type=click.Choice(manager_policies()), default=None,
              help="Scheduling policy (default: [manager] policy, ANDREAS_POLICY, rg).")
@click.option("--period-s", type=Finite(min=0, min_open=True, max=MAX_PERIOD_S), default=None,
              help="Rescheduling period H in seconds (default: [manager] period_s, 3600).")
@click.option("--once", is_flag=True,
              help="Reconcile, reschedule and apply once, then exit.")
@click.option("--metrics-port", type=Whole(max=MAX_PORT_TEXT), metavar="PORT", default=None,
              help="Serve Prometheus metrics at http://127.0.0.1:PORT/metrics (address: "
                   "[manager] metrics_address); default: [manager] metrics_port, else none.")
@click.pass_context
def run_cmd(ctx: click.Context, dry_run: bool, policy: str | None, period_s: float | None,
            once: bool, metrics_port: int | None) -> None:
    """Run the Job Manager until SIGTERM / SIGINT (one manager per store: a lease).

    Logs one INFO line per action (job, node, GPUs, decision, reason); the log level is
    INFO unless --log-level / ANDREAS_LOG_LEVEL says otherwise.
    """
    from andreas.manager.daemon import run, with_overrides

    root = ctx.find_root()
    if root.get_parameter_source("log_level") is click.core.ParameterSource.DEFAULT:
        logging.getLogger().setLevel(logging.INFO)

    settings = with_overrides(load_settings(), policy=policy, period_s=period_s,
                              metrics_port=metrics_port)
    sys.exit(run(settings, dry_run=dry_run, once=once))


@click.command("costs")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list instead of a table.")
@click.option("--window-h", type=Finite(min=0, min_open=True, max=MAX_WINDOW_H), default=24.0,
              show_default=True, help="Hours of measured power to average.")
def costs_cmd(as_json: bool, window_h: float) -> None:
    """Energy cost per hour c_ng of every node with g GPUs busy, and where the power comes
    from: measured (mean of the 1-minute aggregates) or profiles/ (the power model)."""
    from andreas.costs import c_ng_per_hour, kwh_cost
    from andreas.manager.estimates import Estimator, NodeHardware
    from andreas.manager.snapshot import settings_energy
    from andreas.store.opener import open_store
    from andreas.store.nodes import gpu_counts, list_nodes

    settings = load_settings()
    energy = settings_energy(settings.manager)
    now = time.time()
    store = open_store(settings=settings, retries=0)
    try:
        with store.session() as s:
            counts = gpu_counts(s)
            nodes = [NodeHardware(id=n.id, name=n.name, gpu_type=n.gpu_type,
                                  gpus=counts.get(n.id, n.gpu_count))
                     for n in list_nodes(s)]
            curves = Estimator(settings.manager).power_curves(s, nodes, now,
                                                              window_h * 3600.0)
    finally:
        store.dispose()
    if not nodes:
        # As `nodes`, `queue` and `report` do on an empty store: say so, exit 0.
        if as_json:
            click.echo("[]")
        else:
            click.echo("no nodes registered (run `andreas-agent --register` on each node)")
        return
    rows: list[dict[str, Any]] = []
    for n in nodes:
        curve = curves[n.name]
        for g, watts in enumerate(curve.power_w):
            rows.append({"node": n.name, "gpu_type": n.gpu_type, "gpus": n.gpus, "g": g,
                         "power_w": watts, "cost_per_hour": c_ng_per_hour(watts, energy),
                         "source": curve.sources[g], "samples": curve.samples_per_g[g]})
            if energy.tariff is not None:       # an hour at this instant's price x PUE
                rows[-1]["cost_per_hour_now"] = kwh_cost(watts / 1000.0, energy, now, now)
    if as_json:
        click.echo(jsontext.dumps(rows))
        return
    from rich.table import Table

    from andreas.console import console

    rate = (f"PUE {energy.pue:g} x {energy.price_per_kwh:g} per kWh" if energy.tariff is None
            else f"tariff {settings.manager.tariff}: mean PUE {energy.pue:.3g} x "
                 f"{energy.price_per_kwh:.4g} per kWh; 'now': this hour's")
    table = Table(title=f"c_ng = P(g) x {rate} (measured: last {window_h:g} h, >= "
                        f"{settings.manager.min_power_samples} samples)")
    titles: tuple[str, ...] = ("node", "type", "g busy", "power W", "cost / h", "source", "samples")
    if energy.tariff is not None:
        titles = (*titles[:5], "now / h", *titles[5:])
    for title in titles:
        table.add_column(title, justify="left" if title in ("node", "type", "source")
                         else "right")
    for r in rows:
        now_cell = (f"{r['cost_per_hour_now']:.4f}",) if "cost_per_hour_now" in r else ()
        table.add_row(r["node"], r["gpu_type"], f"{r['g']}/{r['gpus']}", f"{r['power_w']:.1f}",
                      f"{r['cost_per_hour']:.4f}", *now_cell, r["source"], str(r["samples"]))
    console().print(table)


def register_manager(main: click.Group) -> None:
    main.add_command(manager_group)
    main.add_command(costs_cmd)
