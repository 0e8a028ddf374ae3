"""``andreas submit | queue | show | cancel | logs | nodes``: the users' commands.

Thin: options are parsed here, checked and stored by :mod:`andreas.service.submit`, read back by
:mod:`andreas.service.views`, and printed with rich. The store is the configured one (see
``andreas db --help``). Times are printed in UTC ("2026-11-22 14:03Z") with a relative
hint ("in 3h12m"); ``--json`` prints seconds since the epoch.

Tests (and embedders) pass ``obj={"clock": ..., "executor_factory": ...}`` to the click
context instead of patching: ``clock() -> float`` is the current time,
``executor_factory(settings) -> Executor`` opens the container engines for ``logs``.
"""

from __future__ import annotations

import dataclasses
import getpass
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from andreas.infra import jsontext
from andreas.cli.common import MAX_ATTEMPT, MAX_LINES, Whole, db_errors
from andreas.config import Settings, load_settings
from andreas.console import console, money, printable
from andreas.errors import InputError, options
from andreas.infra.timefmt import duration, relative, stamp, stamp_relative

if TYPE_CHECKING:   # imported where used: `andreas submit` needs neither the views nor numpy
    from andreas.executor.base import Executor
    from andreas.service import views
    from andreas.store.engine import Store

JOB_FILE_SUFFIXES = (".yaml", ".yml")


def _obj(ctx: click.Context) -> dict[str, Any]:
    return ctx.find_object(dict) or {}


def _now(ctx: click.Context) -> float:
    clock: Callable[[], float] = _obj(ctx).get("clock", time.time)
    return float(clock())


def _default_executor(settings: Settings) -> Executor:
    from andreas.manager.daemon import make_executor

    return make_executor(settings, dry_run=False)


def _open(settings: Settings) -> Store:
    from andreas.store.opener import open_store

    return open_store(settings=settings, retries=0)


def _json(data: Any) -> None:
    click.echo(jsontext.dumps(data, default=str, indent=None))


def _money(x: float | None) -> str:
    return money(x)


# --------------------------------------------------------------------------- submit


@click.command("submit")
@click.argument("source", metavar="[IMAGE|JOB.yaml]", required=False)
@click.option("--epochs", default=None, metavar="N",
              help="Epochs to train (a whole number >= 1); the job gets ANDREAS_EPOCHS=N.")
@click.option("--due", default=None, metavar="WHEN",
              help="Due date: +12h / +30m / +2d / +90s (also +1h30m) from now, an ISO 8601 "
                   "date-time (UTC unless it has an offset: 2026-11-23T18:00Z), or unix "
                   "seconds. Must be in the future.")
@click.option("--weight", default=None, metavar="W",
              help="Tardiness weight: the penalty, in the currency of the energy price, per "
                   "second the job finishes after its due date (e.g. 0.01). Higher weight = "
                   "more urgent.")
@click.option("--app", default=None,
              help="Application name, the key of its epoch-time profile (default: the last "
                   "path component of the image name, e.g. resnet50 for ml/resnet50:2).")
@click.option("--cmd", default=None, metavar="'COMMAND ARGS'",
              help="Command to run instead of the image's CMD, split like a shell would "
                   "(quote it: --cmd 'python train.py --lr 0.1'). Without IMAGE: a plain "
                   "command job, which the Slurm executor runs (needs --app).")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE",
              help="Environment variable for the job (repeatable). ANDREAS_* and "
                   "NVIDIA_VISIBLE_DEVICES are set by andreas and refused.")
@click.option("--max-gpus", default=None, metavar="G",
              help="At most G GPUs (default: as many as the optimizer finds worthwhile on "
                   "one node).")
@click.option("--grace-s", default=None, metavar="S",
              help="Seconds between SIGTERM and SIGKILL when the job is preempted, to write "
                   "its checkpoint (default: [executor] stop_grace_s, 120).")
@click.option("--name", default=None, metavar="ID",
              help="Job id (1-64 of A-Z a-z 0-9 _ . -; unique ignoring case). Default: "
                   "<UTC yyyymmdd-HHMMSS>-<6 hex>.")
@click.option("--gpu-share", default=None, metavar="FRACTION",
              help="Run on a share of one GPU beside other jobs (0.25 or 25%): the manager "
                   "places it under the interference bounds of the GPU-sharing policies "
                   "(rg, greedy, ojpp-*) and caps its compute with CUDA MPS. Default: "
                   "whole GPUs.")
@click.option("--gpu-memory-mib", default=None, metavar="MIB",
              help="GPU memory the job needs, so shares never overfill a GPU's memory.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the job id (for scripts).")
@click.pass_context
@db_errors
def submit_cmd(ctx: click.Context, source: str | None, epochs: str | None, due: str | None,
               weight: str | None, app: str | None, cmd: str | None, env: tuple[str, ...],
               max_gpus: str | None, grace_s: str | None, name: str | None,
               gpu_share: str | None, gpu_memory_mib: str | None, quiet: bool) -> None:
    """Submit a training job: a Docker image (or, on Slurm, a command) and its epochs,
    due date and weight.

    \b
    Either options:
      andreas submit registry.example.org/ml/resnet50:2 --epochs 30 --due +12h --weight 0.01
      andreas submit --cmd 'python3 train.py' --app resnet50 --epochs 30 --due +12h \\
                     --weight 0.01                       # on Slurm: no image
    or a job file with the same fields (max_gpus, grace_s with underscores):
      andreas submit job.yaml
    \b
      # job.yaml
      image: registry.example.org/ml/resnet50:2
      epochs: 30
      due: +12h                  # or 2026-11-23T18:00Z, or unix seconds
      weight: 0.01
      cmd: [python, train.py]    # or one string: "python train.py --lr 0.1"
      env: {LR: "0.1"}           # values are strings: quote numbers

    The job is queued; the manager starts it at its next rescheduling point. Prints the
    job id. Nothing is stored when any field is wrong.
    """
    from andreas.service.submit import (JobSpec, check_image_allowed, check_runnable,
                                        load_job_file, parse_submission, submit_configured)

    now = _now(ctx)
    options = {"--epochs": epochs, "--due": due, "--weight": weight, "--app": app,
               "--cmd": cmd, "--env": env or None, "--max-gpus": max_gpus,
               "--grace-s": grace_s, "--name": name, "--gpu-share": gpu_share,
               "--gpu-memory-mib": gpu_memory_mib}
    spec: JobSpec
    if source is None and cmd is None:
        raise InputError("IMAGE or JOB.yaml is required (or --cmd for a job without an "
                         "image, on Slurm)")
    if source is not None and source.lower().endswith(JOB_FILE_SUFFIXES):
        given = [k for k, v in options.items() if v is not None]
        if given:
            raise InputError(f"{source}: give either a job file or options, not both "
                             f"(remove {', '.join(given)})")
        if not Path(source).is_file():
            raise InputError(f"{source}: job file not found")
        spec = load_job_file(source, now_s=now)
    else:
        for option, value in (("--epochs", epochs), ("--due", due), ("--weight", weight)):
            if value is None:
                raise InputError(f"{option} is required (or submit a job.yaml)")
        spec = parse_submission(image=source, epochs=epochs, due=due, weight=weight, app=app,
                                cmd=cmd, env=list(env) if env else None, max_gpus=max_gpus,
                                grace_s=grace_s, name=name, gpu_share=gpu_share,
                                gpu_memory_mib=gpu_memory_mib, now_s=now)
    settings = load_settings()
    check_runnable(spec, settings.executor.kind)
    check_image_allowed(spec.image, settings.executor.image_allowlist)
    job_id = submit_configured(settings, spec, now)
    if quiet:
        click.echo(job_id)
        return
    click.echo(f"submitted {job_id}: {spec.application}, {spec.epochs} epochs, due "
               f"{stamp_relative(spec.due_s, now)}, weight {spec.weight:g}/s"
               + (f", at most {spec.max_gpus} GPUs" if spec.max_gpus else "")
               + (f", {spec.gpu_milli / 10:g}% of one GPU" if spec.gpu_milli else ""))


# --------------------------------------------------------------------------- queue


@click.command("queue")
@click.option("--all", "show_all", is_flag=True,
              help="Also finished jobs (completed, failed, cancelled).")
@click.option("--mine", is_flag=True,
              help="Only my jobs (owner = my database account on MariaDB, my OS user on "
                   "SQLite).")
@click.option("--json", "as_json", is_flag=True, help="One JSON list (times in unix seconds).")
@click.pass_context
@db_errors
def queue_cmd(ctx: click.Context, show_all: bool, mine: bool, as_json: bool) -> None:
    """The jobs that are queued, running or stopped: where they run, their progress, when
    they should finish, and what they cost.

    Unfinished jobs come first, by due date. FINISH is the latest plan's expected end as
    a time from now, "(late)" after the due date; finished jobs: the actual end. SO FAR
    is the measured energy (kWh x PUE x price) plus the tardiness penalty already
    incurred; TO GO is what the latest plan predicts. OWNER is who submitted the job
    ("-": before owners were recorded); with a MariaDB account of your own you see only
    your jobs. STATE "dry-run": `andreas manager run --dry-run` recorded a start, and no
    container runs (``--json``: state running, dry_run true).
    """
    from andreas.service import views

    now = _now(ctx)
    settings = load_settings()
    store = _open(settings)
    try:
        rows = views.queue(store, settings.manager, now, include_finished=show_all, mine=mine)
    finally:
        store.dispose()
    if as_json:
        _json([dataclasses.asdict(r) for r in rows])
        return
    if not rows:
        click.echo("no jobs" + ("" if show_all else " waiting or running (--all shows "
                                                    "finished ones too)"))
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(rows)} job(s) at {stamp(now)}")
    # Ids and node names are typed into other commands: never folded when there is room.
    whole = {"JOB": max(len(r.id) for r in rows),
             "NODE": max(len(r.node or "-") for r in rows),
             "FINISH": min(24, max(len(relative(r.finish_s, now)) + 7 if r.finish_s else 1
                                   for r in rows))}
    for title, right in (("JOB", False), ("STATE", False), ("NODE", False), ("GPUs", True),
                         ("EPOCHS", True), ("FINISH", False), ("DUE", False),
                         ("SO FAR", True), ("TO GO", True), ("OWNER", False)):
        # Ids must stay whole (they are typed into other commands): fold, never truncate.
        table.add_column(title, justify="right" if right else "left", overflow="fold",
                         no_wrap=title in ("DUE", "STATE"),
                         min_width=whole.get(title))
    for r in rows:
        if r.finish_s is None:
            finish = Text("-")
        elif r.finish_actual:
            finish = Text(stamp(r.finish_s))
        else:
            late = r.finish_s > r.due_s
            source, conf = r.estimate or (None, None)
            unsure = (" (guess)" if source == "unprofiled" else
                      f" (model, conf {conf:.2f})" if source and source.startswith("model")
                      and conf is not None else "")
            finish = Text(relative(r.finish_s, now) + (" (late)" if late else "") + unsure,
                          style="red" if late else "")
        state = "dry-run" if r.dry_run else r.state       # planned; no container runs
        table.add_row(Text(r.id), Text(state, style="dim" if r.dry_run else
                                       _STATE_STYLE.get(r.state, "")),
                      Text(r.node or "-"), Text("-" if r.gpus is None else str(r.gpus)),
                      Text(f"{r.epochs_done}/{r.epochs}"), finish,
                      Text(stamp(r.due_s)), Text(_money(r.cost_so_far)),
                      Text(_money(r.cost_to_go)), Text(r.owner or "-"))
    console().print(table)
    m = settings.manager
    rate = (f"PUE {m.energy_pue:g} x {m.price_per_kwh:g}/kWh" if m.tariff is None
            else f"tariff {m.tariff} (price x PUE when it was used)")
    click.echo(f"costs: energy at {rate} plus tardiness (weight x seconds late); TO GO "
               "from the latest decision")


_STATE_STYLE = {"running": "green", "preempting": "yellow", "preempted": "yellow",
                "failed": "red", "cancelled": "dim", "completed": "cyan"}


# --------------------------------------------------------------------------- show


@click.command("show")
@click.argument("job_id", metavar="JOB")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (times in unix seconds).")
@click.pass_context
@db_errors
def show_cmd(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Everything about one job: its spec, state, costs, every attempt (node, GPUs,
    container, start, end, exit code, reason, and the decisions that started and stopped
    it), what the recent decisions did with it and why (the last 100 since its
    submission; equal neighbours as one row), and its measured epoch times per
    configuration."""
    from andreas.service import views

    now = _now(ctx)
    settings = load_settings()
    store = _open(settings)
    try:
        d = views.show(store, settings.manager, job_id, now)
    finally:
        store.dispose()
    if as_json:
        _json(dataclasses.asdict(d))
        return
    out = console()
    out.print(_show_info(d, now))
    _show_attempts(out, d, now)
    _show_history(out, d)
    _show_epochs(out, d)


def _show_info(d: views.JobDetail, now: float) -> Any:
    """The job's spec, state, plan and costs: a grid of one row per field."""
    from rich.table import Table
    from rich.text import Text

    info = Table.grid(padding=(0, 2))
    info.add_column(style="bold")
    info.add_column()
    for key, value in _show_fields(d, now):
        info.add_row(key, Text(printable(value)))
    return info


def _show_fields(d: views.JobDetail, now: float) -> list[tuple[str, str]]:
    """(field, value) rows, values in the words and units people read."""
    from andreas.manager.plandoc import describe_estimate

    finish = "-" if d.finish_s is None else (
        f"{stamp(d.finish_s)} (ended)" if d.finish_actual
        else f"{stamp(d.finish_s)} ({relative(d.finish_s, now)}, expected by decision "
             f"#{d.plan.decision_id})"
        if d.plan else stamp_relative(d.finish_s, now))
    c = d.costs
    where = "-"
    if d.plan is not None and d.plan.node:
        where = f"{d.plan.node}, {d.plan.gpus if d.plan.gpus is not None else '?'} GPU(s)"
        if d.plan.power_limit_w is not None:
            where += f" at {d.plan.power_limit_w:g} W"
    return [
        ("job", d.id), ("owner", d.owner or "- (before owners were recorded)"),
        ("state", ("dry-run (the manager recorded a start; no container runs)"
                   if d.dry_run else d.state) + (f" ({d.reason})" if d.reason else "")),
        ("since", stamp_relative(d.state_changed_s, now)),
        ("image", d.image or "- (a command job)"), ("application", d.application),
        ("command", " ".join(_quote(c_) for c_ in d.command) or "(image default)"),
        ("env", " ".join(f"{k}={_quote(v)}" for k, v in sorted(d.env.items())) or "-"),
        ("epochs", f"{d.epochs_done}/{d.epochs}"),
        ("submitted", stamp_relative(d.submit_s, now)),
        ("due", stamp_relative(d.due_s, now)),
        ("weight", f"{d.weight:g} per second late"),
        ("max GPUs", "-" if d.max_gpus is None else str(d.max_gpus)),
        ("GPU share", "whole GPUs" if d.gpu_milli is None else
         f"{d.gpu_milli / 10:g}% of one GPU"
         + ("" if d.gpu_memory_mib is None else f", {d.gpu_memory_mib} MiB GPU memory")),
        ("grace", f"{d.grace_s:g} s"), ("failures", str(d.failures)),
        ("planned on", where), ("finish", finish),
        ("estimate", (describe_estimate(d.plan.estimate_source, d.plan.confidence)
                      if d.plan is not None else None) or "-"),
        ("plan", d.plan.reason if d.plan is not None and d.plan.reason else "-"),
        ("energy", "-" if c.energy_kwh is None else f"{c.energy_kwh:.3f} kWh"),
        ("cost so far", f"{_money(c.so_far)} (energy {_money(c.energy_cost)}, "
                        f"tardiness {_money(c.tardiness_cost)})"),
        ("cost to go", _money(c.to_go)),
        ("predicted at submit", _money(d.predicted_cost_at_submit))]


def _show_attempts(out: Any, d: views.JobDetail, now: float) -> None:
    """Every attempt, then the decisions that started and stopped them."""
    from rich.table import Table
    from rich.text import Text

    if not d.attempts:
        out.print("no attempts yet", highlight=False)
        return
    t = Table(title="attempts")
    for col in ("#", "node", "GPUs", "container", "start", "end", "exit", "reason", "kWh",
                "decisions"):
        t.add_column(col, overflow="fold", no_wrap=col in ("start", "end", "container"))
    refs: dict[int, views.DecisionRef] = {}
    for a in d.attempts:
        for ref in (a.started_by, a.stopped_by):
            if ref is not None:
                refs[ref.id] = ref
        if a.end_s is not None:
            end = stamp(a.end_s)
        elif a.start_s is not None:
            end = f"running {duration(now - a.start_s)}"
        else:
            end = "-"
        t.add_row(*map(Text, (
            str(a.attempt), a.node or "-", ",".join(map(str, a.gpus)) or "-",
            (a.container_id or "-")[:12], stamp(a.start_s), end,
            "-" if a.exit_code is None else str(a.exit_code), printable(a.reason or "-"),
            "-" if a.energy_kwh is None else f"{a.energy_kwh:.3f}",
            f"{_decision(a.started_by)} -> {_decision(a.stopped_by)}")))
    out.print(t)
    for ref in sorted(refs.values(), key=lambda r: r.id):
        what = ("(no longer stored)" if ref.t is None
                else f"{stamp(ref.t)} {ref.trigger}, policy {ref.policy}")
        out.print(f"decision #{ref.id}: {what}", highlight=False)


def _show_history(out: Any, d: views.JobDetail) -> None:
    """What the recent decisions did with the job, newest first."""
    from rich.table import Table
    from rich.text import Text

    if not d.history:
        return
    t = Table(title="decisions (newest first)")
    for col in ("decision", "time", "trigger", "action", "node", "GPUs", "reason"):
        t.add_column(col, overflow="fold", no_wrap=col in ("time", "decision"))
    for h in d.history:
        when = stamp(h.t) if h.decisions == 1 else (
            f"{stamp(h.first_t)} .. {stamp(h.t)}" if h.first_t is not None else stamp(h.t))
        t.add_row(*map(Text, (
            f"#{h.decision_id}" + (f" (x{h.decisions})" if h.decisions > 1 else ""),
            when, h.trigger, h.action, h.node or "-",
            "-" if h.gpus is None else str(h.gpus), printable(h.reason or "-"))))
    out.print(t)


def _show_epochs(out: Any, d: views.JobDetail) -> None:
    """Its measured epoch times per configuration."""
    from rich.table import Table
    from rich.text import Text

    if not d.epoch_stats:
        return
    t = Table(title="epochs")
    for col in ("node", "GPU type", "GPUs", "epochs", "mean", "min", "max", "last epoch",
                "last end"):
        t.add_column(col)
    for e in d.epoch_stats:
        t.add_row(*map(Text, (e.node or "-", e.gpu_type, str(e.gpus), str(e.epochs),
                              f"{e.mean_s:.1f} s", f"{e.min_s:.1f} s", f"{e.max_s:.1f} s",
                              str(e.last_epoch), stamp(e.last_end_s))))
    out.print(t)


def _decision(ref: views.DecisionRef | None) -> str:
    if ref is None:
        return "-"
    return f"#{ref.id}" if ref.trigger is None else f"#{ref.id} {ref.trigger}"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# --------------------------------------------------------------------------- cancel


@click.command("cancel")
@click.argument("job_id", metavar="JOB")
@click.option("--reason", default=None,
              help="Why (stored with the job, shown by `andreas show`); default: "
                   "'cancelled by <user>'.")
@click.pass_context
@db_errors
def cancel_cmd(ctx: click.Context, job_id: str, reason: str | None) -> None:
    """Cancel a queued, running or stopped job. The manager stops its container (SIGTERM,
    then SIGKILL after the job's grace period). A finished job cannot be cancelled, nor
    can someone else's job unless you are an operator (exit 2).
    """
    from andreas.service.submit import cancel

    now = _now(ctx)
    if reason is None:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "a user"
        reason = f"cancelled by {user}"
    settings = load_settings()
    store = _open(settings)
    try:
        with options(reason="--reason"):
            stored, was = cancel(store, job_id, reason=reason, now_s=now)
    finally:
        store.dispose()
    tail = ("; the manager stops its container" if was.value in ("running", "preempting")
            else "")
    click.echo(f"job {stored}: cancelled (was {was.value}){tail}")


# --------------------------------------------------------------------------- logs


@click.command("logs")
@click.argument("job_id", metavar="JOB")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing new output until the container exits (Ctrl-C stops).")
@click.option("--attempt", type=Whole(min=1, max=MAX_ATTEMPT), default=None,
              help="Which attempt (see `andreas show`); default: the latest.")
@click.option("--tail", type=Whole(min=0, max=MAX_LINES), default=None, metavar="N",
              help="Only the last N lines.")
@click.pass_context
@db_errors
def logs_cmd(ctx: click.Context, job_id: str, follow: bool, attempt: int | None,
             tail: int | None) -> None:
    """Print a job's container output (stdout and stderr), fetched from its node's Docker
    engine. Containers are kept for ``[executor] keep_exited_s`` after they exit; then
    the end of the log (the last 200 lines, at most 64 KiB) is printed from the store,
    and a note on stderr says so."""
    from andreas.executor.errors import ExecutorError
    from andreas.service import views

    settings = load_settings()
    store = _open(settings)
    try:
        with options(attempt="--attempt"):
            src = views.log_source(store, job_id, attempt)
    finally:
        store.dispose()
    if src.kept is not None:
        click.echo(f"andreas: job {src.job_id} attempt {src.attempt}: its container was "
                   f"removed on {stamp(src.kept_s)} (retention); the end of its log, kept in "
                   "the store:", err=True)
        lines = src.kept.splitlines(keepends=True)
        if tail is not None:
            lines = lines[-tail:] if tail else []
        sys.stdout.write("".join(lines))
        sys.stdout.flush()
        return
    factory: Callable[[Settings], Executor] = _obj(ctx).get("executor_factory",
                                                            _default_executor)
    executor = factory(settings)
    out = sys.stdout.buffer              # bytes as the container wrote them
    try:
        for chunk in executor.logs(src.node, src.container_id, follow=follow, tail=tail):
            out.write(chunk)
            out.flush()
    except KeyboardInterrupt:
        ctx.exit(130)
    except ExecutorError as e:
        raise ExecutorError(f"job {src.job_id} attempt {src.attempt} on node "
                            f"{src.node.name}: {e}") from None
    finally:
        executor.close()


# --------------------------------------------------------------------------- nodes


@click.command("nodes")
@click.option("--json", "as_json", is_flag=True, help="One JSON list.")
@click.pass_context
@db_errors
def nodes_cmd(ctx: click.Context, as_json: bool) -> None:
    """The nodes: state, GPUs busy and free, jobs, power now and health.

    POWER is the newest sample of each GPU in the last 60 s plus the newest host power
    sample (none: "-"). HEARTBEAT is the age of the agent's last heartbeat. UNHEALTHY lists
    GPU indexes marked unhealthy or unreadable in the last 60 s.
    """
    from andreas.service import views

    now = _now(ctx)
    settings = load_settings()
    store = _open(settings)
    try:
        rows = views.nodes(store, now)
    finally:
        store.dispose()
    if as_json:
        _json([dataclasses.asdict(r) for r in rows])
        return
    if not rows:
        click.echo("no nodes registered (run `andreas-agent --register` on each node)")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(rows)} node(s) at {stamp(now)}")
    for title, right in (("NODE", False), ("STATE", False), ("GPU", False),
                         ("BUSY/FREE", True), ("JOBS", False), ("POWER W", True),
                         ("HEARTBEAT", True), ("UNHEALTHY", False), ("NOTE", False)):
        table.add_column(title, justify="right" if right else "left")
    for r in rows:
        age = "-" if r.heartbeat_age_s is None else duration(r.heartbeat_age_s) + " ago"
        stale = r.heartbeat_age_s is None or r.heartbeat_age_s > 120
        notes = (["profiling"] if r.profiling else []) + (
            [f"MIG {','.join(map(str, r.mig_gpus))}"] if r.mig_gpus else [])
        table.add_row(
            Text(r.name), Text(r.state, style={"up": "green", "down": "red"}.get(r.state,
                                                                                   "yellow")),
            Text(f"{r.gpu_count}x {r.gpu_type}"), Text(f"{r.busy}/{r.free}"),
            Text(", ".join(r.jobs) or "-"),
            Text("-" if r.power_w is None else f"{r.power_w:.0f}"),
            Text(age, style="red" if stale else ""),
            Text(",".join(map(str, r.unhealthy_gpus)) or "-",
                 style="red" if r.unhealthy_gpus else ""),
            Text(" ".join(notes) or "-"))
    console().print(table)


COMMANDS = (submit_cmd, queue_cmd, show_cmd, cancel_cmd, logs_cmd, nodes_cmd)


def register_jobs(group: click.Group) -> None:
    """Add the job commands to the ``andreas`` group (called at the bottom of cli.py)."""
    for command in COMMANDS:
        group.add_command(command)
