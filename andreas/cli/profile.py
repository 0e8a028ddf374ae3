"""``andreas profile IMAGE --app NAME`` (the Job Profiler) and ``andreas profile-refresh``
(refit the runtime models from production epochs, for a timer).

Tests (and embedders) pass ``obj={"clock": ..., "executor_factory": ...}`` to the click
context, as for the job commands: ``executor_factory(settings) -> Executor``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from andreas.infra import jsontext
from andreas.cli.common import MAX_WINDOW_H, Finite, Whole, db_errors
from andreas.config import Settings, load_settings
from andreas.errors import InputError, options

if TYPE_CHECKING:
    from andreas.profiler.run import ProfileEvent


def _obj(ctx: click.Context) -> dict[str, Any]:
    return ctx.find_object(dict) or {}


def _default_executor(settings: Settings):
    from andreas.manager.daemon import make_executor

    return make_executor(settings, dry_run=False)


def parse_gpus(value: str | None) -> tuple[int, ...] | None:
    """``1,2,4`` -> (1, 2, 4); InputError naming --gpus otherwise."""
    if value is None:
        return None
    try:
        counts = tuple(int(part) for part in value.split(","))
    except ValueError:
        counts = ()
    if not counts or any(g < 1 for g in counts):
        raise InputError(f"--gpus {value!r}: give GPU counts >= 1 separated by commas, "
                         "e.g. 1,2,4")
    return counts


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so containers are removed and node flags restored."""
    def handler(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:                 # not the main thread (embedded): nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _prior_serial() -> dict[str, float]:
    from andreas.profiles import load_profiles

    return {name: a.serial_fraction for name, a in load_profiles().apps.items()}


def _levels_of(s: Any, target: Any) -> tuple[float, ...]:
    """The power limits ``target`` may be profiled at (its agent's report and
    profiles/power_limits.toml, as the manager plans them)."""
    from andreas.manager.levels import profiling_levels
    from andreas.model import Node
    from andreas.profiles import load_profiles

    return profiling_levels(s, Node(name=target.name, gpu_type=target.gpu_type,
                                    gpus=len(target.usable)), load_profiles())


@click.command("profile")
@click.argument("image")
@click.argument("command", nargs=-1)
@click.option("--app", "app", required=True, metavar="NAME",
              help="Application name the jobs of this image are submitted with (--app of "
                   "`andreas submit`); the profile is stored under it.")
@click.option("--epochs", type=Whole(min=0, max=10_000), default=3, show_default=True,
              help="Epochs per run (with 3 or more, the first is dropped as warm-up).")
@click.option("--node", "nodes", multiple=True, metavar="NODE",
              help="Profile on this node (repeatable); marked profiling for the run and "
                   "restored afterwards. Default: the nodes already marked, one per GPU type.")
@click.option("--gpus", default=None, metavar="1,2,4",
              help="GPU counts to run (default: every count from 1 to the node's usable GPUs).")
@click.option("--timeout-s", type=Finite(min=0, min_open=True, max=7 * 86400.0), default=3600.0,
              show_default=True,
              help="Per run: the container is killed after this long (epochs so far count).")
@click.option("--power-levels/--no-power-levels", default=True, show_default=True,
              help="Then one run of 1 GPU per power level below the default, where the node's "
                   "agent can set limits (andreas-powerd) and profiles/power_limits.toml names "
                   "levels for its GPU type; the levels are fitted and stored (app_levels).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list instead of a table.")
@click.pass_context
@db_errors
def profile_cmd(ctx: click.Context, image: str, command: tuple[str, ...], app: str, epochs: int,
                nodes: tuple[str, ...], gpus: str | None, timeout_s: float,
                power_levels: bool, as_json: bool) -> None:
    """Run IMAGE [COMMAND...] for a few epochs on the profiling node(s), once per GPU count,
    record the epoch times (app_profiles, source profiler) and fit the runtime model
    (app_models: Amdahl's law per GPU type) that predicts the counts not measured.

    The image must print the job contract's ANDREAS-PROGRESS lines (andreas/job.py). A
    COMMAND with options goes after `--`: andreas profile IMG --app x -- python train.py -v
    """
    from andreas.profiler.run import ProfileRequest, check_request, profile_application
    from andreas.store.opener import open_store
    from andreas.service.submit import check_image_allowed, parse_image

    with options(app="--app", node="--node", gpus="--gpus", epochs="--epochs",
                 timeout_s="--timeout-s", image="IMAGE"):
        parse_image(image, "IMAGE")          # a reference Docker accepts, before any node
        request = ProfileRequest(image=image, app=app, epochs=epochs, nodes=nodes,
                                 gpus=parse_gpus(gpus), timeout_s=timeout_s, command=command,
                                 power_levels=power_levels)
        check_request(request)
    settings = load_settings()
    check_image_allowed(image, settings.executor.image_allowlist)
    clock: Callable[[], float] = _obj(ctx).get("clock", time.time)
    store = open_store(settings=settings, retries=0)
    executor = _obj(ctx).get("executor_factory", _default_executor)(settings)
    display = _Display(enabled=not as_json)
    try:
        with _sigterm_as_interrupt(), display:
            with options(node="--node", gpus="--gpus"):
                results = profile_application(store, executor, request, clock=clock,
                                              on_event=display.on_event,
                                              prior_serial=_prior_serial(),
                                              levels_of=_levels_of)
    except KeyboardInterrupt:
        click.echo("andreas: interrupted: containers removed, node flags restored", err=True)
        ctx.exit(130)
    finally:
        executor.close()
        store.dispose()
    if as_json:
        click.echo(jsontext.dumps([_node_json(r) for r in results]))
    else:
        _print(app, results)


class _Display:
    """A rich progress bar over every epoch of every run (nothing with --json)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Any = None
        self.task = None
        self.epochs = 0
        self.done_in_run = 0

    def __enter__(self) -> _Display:
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            from andreas.console import console

            self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     console=console(), transient=False)
            self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def on_event(self, e: ProfileEvent) -> None:
        from andreas.profiler.run import ProfileEventKind as Kind

        if self.progress is None:
            return
        if e.kind is Kind.PLAN:
            self.epochs = e.epochs
            self.task = self.progress.add_task("profiling", total=e.runs * e.epochs)
        elif e.kind is Kind.START:
            self.done_in_run = 0
            self.progress.update(self.task, description=f"{e.node} g={e.g}")
        elif e.kind is Kind.EPOCH:
            self.done_in_run += 1
            shown = f" {e.seconds:.1f} s" if e.seconds is not None else ""
            self.progress.update(self.task, advance=1,
                                 description=f"{e.node} g={e.g} epoch {e.epoch}/{e.epochs}"
                                             f"{shown}")
        elif e.kind is Kind.DONE:      # failed or short runs: count their missing epochs
            self.progress.update(self.task, advance=max(self.epochs - self.done_in_run, 0))
            self.done_in_run = self.epochs


def _node_json(r) -> dict[str, Any]:
    from andreas.profiler.fit import predict

    fit = r.fit
    rows = []
    by_g = {run.g: run for run in r.runs}
    for g in range(1, r.max_gpus + 1):
        run = by_g.get(g)
        pred, conf = predict(fit, g) if fit is not None else (None, None)
        rows.append({"g": g, "measured_s": run.median_s if run else None,
                     "epochs_s": list(run.epoch_s) if run else [],
                     "kept": len(run.kept_s) if run else 0,
                     "predicted_s": pred, "confidence": conf,
                     "status": run.status if run else "not run",
                     "error": run.error if run else "", "job": run.job_id if run else None})
    model = None if fit is None else {
        "t1_s": fit.t1_s, "serial_fraction": fit.serial_fraction, "mape": fit.mape,
        "samples": fit.samples, "gpu_counts": list(fit.gpu_counts), "prior": fit.prior}
    base = r.levels[0].epoch_s if r.levels else None
    levels = [{"limit_w": f.limit_w, "epoch_s": f.epoch_s, "time_factor": f.epoch_s / base,
               "gpu_power_w": f.power_w, "source": f.source} for f in r.levels]
    runs = [{"limit_w": run.power_limit_w, "measured_s": run.median_s,
             "epochs_s": list(run.epoch_s), "status": run.status, "error": run.error,
             "job": run.job_id} for run in r.level_runs]
    return {"node": r.node, "gpu_type": r.gpu_type, "gpus": rows, "model": model,
            "power_levels": levels, "level_runs": runs}


def _print(app: str, results) -> None:
    from rich.table import Table

    from andreas.console import console

    out = console()
    for r in results:
        doc = _node_json(r)
        table = Table(title=f"{app} on {r.node} ({r.gpu_type})")
        for title in ("g", "epoch s measured", "kept", "model s", "confidence", "error %",
                      "status"):
            table.add_column(title, justify="left" if title == "status" else "right")
        for row in doc["gpus"]:
            m, p = row["measured_s"], row["predicted_s"]
            err = f"{100 * (p - m) / m:+.1f}" if m and p is not None else "-"
            status = row["status"] + (f": {row['error']}" if row["error"] else "")
            table.add_row(str(row["g"]), f"{m:.2f}" if m else "-", str(row["kept"]),
                          f"{p:.2f}" if p is not None else "-",
                          f"{row['confidence']:.2f}" if row["confidence"] is not None else "-",
                          err, status)
        out.print(table)
        fit = r.fit
        if fit is None:
            out.print(f"{r.node}: nothing measured; no model written", markup=False,
                      highlight=False)
            continue
        mape = "unknown (one GPU count; s is a prior)" if fit.mape is None \
            else f"{100 * fit.mape:.1f} %"
        _print_levels(out, r)
        out.print(f"model {r.gpu_type}: epoch(g) = {fit.t1_s:.2f} s x ({fit.serial_fraction:.4f}"
                  f" + (1 - {fit.serial_fraction:.4f}) / g); fit MAPE {mape} over g = "
                  f"{', '.join(map(str, fit.gpu_counts))}; stored in app_profiles / app_models "
                  "(source profiler)", markup=False, highlight=False, soft_wrap=True)


def _print_levels(out: Any, r: Any) -> None:
    """One line per level run that failed, one line for the fitted levels."""
    from andreas.profiler.run import RunStatus

    for run in r.level_runs:
        if run.status is not RunStatus.OK:
            out.print(f"{r.node}: 1 GPU at {run.power_limit_w:g} W: {run.status}"
                      + (f": {run.error}" if run.error else ""), markup=False, highlight=False)
    if r.levels:
        base = r.levels[0].epoch_s
        out.print(f"power levels {r.gpu_type} (1 GPU): " + ", ".join(
            f"{f.limit_w:g} W x{f.epoch_s / base:.3f} {f.power_w:.0f} W"
            + ("" if f.source == "measured" else " (fit)") for f in r.levels)
            + "; stored in app_levels", markup=False, highlight=False, soft_wrap=True)


@click.command("profile-refresh")
@click.option("--half-life-h", type=Finite(min=0, min_open=True, max=MAX_WINDOW_H), default=168.0,
              show_default=True,
              help="Recency: an epoch this many hours old weighs half as much as a new one.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_context
@db_errors
def refresh_cmd(ctx: click.Context, half_life_h: float, as_json: bool) -> None:
    """Refit the runtime models from production epoch events (recent epochs weigh more) and
    store the measured epoch times (app_profiles / app_models, source measured)."""
    from andreas.profiler.store import refresh_models
    from andreas.store.opener import open_store

    if not half_life_h > 0:
        raise InputError(f"--half-life-h {half_life_h:g}: must be > 0")
    clock: Callable[[], float] = _obj(ctx).get("clock", time.time)
    store = open_store(settings=load_settings(), retries=0)
    try:
        with store.session() as s:
            done = refresh_models(s, clock(), half_life_s=half_life_h * 3600.0,
                                  prior_serial=_prior_serial())
    finally:
        store.dispose()
    rows = [{"application": r.app, "gpu_type": r.gpu_type, "t1_s": r.fit.t1_s,
             "serial_fraction": r.fit.serial_fraction, "mape": r.fit.mape,
             "gpu_counts": list(r.fit.gpu_counts), "measured_gpus": list(r.measured_gpus),
             "epochs": r.epochs} for r in done]
    if as_json:
        click.echo(jsontext.dumps(rows))
        return
    for r in rows:
        mape = "-" if r["mape"] is None else f"{100 * r['mape']:.1f} %"
        click.echo(f"{r['application']} {r['gpu_type']}: t1 {r['t1_s']:.2f} s, s "
                   f"{r['serial_fraction']:.4f}, MAPE {mape}, {r['epochs']} epochs, measured "
                   f"g {r['measured_gpus'] or '-'}")
    if not rows:
        click.echo("no production epochs: nothing to refit")


def register_profile(main: click.Group) -> None:
    main.add_command(profile_cmd)
    main.add_command(refresh_cmd)
