"""The ``andreas`` command: parse options, call the library, print. No scheduling logic here.

Every deliberate error (``AndreasError``) becomes one ``andreas: error: ...`` line on
stderr and exit code 2, so scripts and operators get the message without a traceback;
anything else is a bug and propagates with its traceback.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from andreas.infra import jsontext
from andreas.cli.common import SEED, policy_default, policy_option

from andreas import optimizer, policies
from andreas.console import printable
from andreas.errors import AndreasError, InfeasiblePlan, InputError, error_line, one_line
from andreas.errors import options as option_names

if TYPE_CHECKING:     # numpy and the model are imported by the commands that need them
    from andreas.model import Action, Plan, Snapshot

EXIT_ERROR = 2
DEFAULT_COMPARE = ("greedy", "rg", "pr", "fifo", "edf", "priority")
LOG_LEVELS = ("debug", "info", "warning", "error")
# Command name -> the module of andreas.cli that adds it, imported on first use, so that
# `andreas submit` imports neither the optimizer, numpy, rich nor the plots. A name not
# listed here (a module's new command) makes every module load, so it is still found.
COMMAND_MODULES = {
    "simulate": "sim", "trace": "trace", "db": "db", "submit": "jobs", "queue": "jobs",
    "show": "jobs", "cancel": "jobs", "logs": "jobs", "nodes": "jobs", "manager": "manager",
    "costs": "manager", "profile": "profile", "profile-refresh": "profile",
    "report": "report", "node": "node"}
# Module -> how it registers its commands: a function taking the group, or a command.
REGISTRARS = {"sim": "simulate_cmd", "trace": "trace_group", "db": "db_group",
              "jobs": "register_jobs", "manager": "register_manager",
              "profile": "register_profile", "report": "register_report",
              "node": "register_node"}


class _Group(click.Group):
    """Turns AndreasError from any sub-command into the one-line error and exit code 2,
    and imports each family of commands only when one of them is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()

    def _load(self, module: str) -> None:
        if module in self._loaded:
            return
        self._loaded.add(module)
        found = getattr(importlib.import_module(f"andreas.cli.{module}"), REGISTRARS[module])
        if isinstance(found, click.Command):
            self.add_command(found)
        else:
            found(self)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = COMMAND_MODULES.get(cmd_name)
            for name in [module] if module else REGISTRARS:
                self._load(name)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in REGISTRARS:
            self._load(name)
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            if not _stdout_closed():
                raise
            # `andreas queue | head`: the reader has what it wanted; end as quietly as
            # other tools (128 + SIGPIPE), without a message or Python's flush warning.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(128 + 13)
        except AndreasError as e:
            click.echo(f"andreas: error: {printable(one_line(str(e))) or type(e).__name__}",
                       err=True)
            ctx.exit(EXIT_ERROR)
        except OSError as e:
            # A file the user named that cannot be written or read (--out under /proc, a
            # full disk): the file and the reason, not a traceback.
            where = f"{e.filename}: " if e.filename else ""
            click.echo(f"andreas: error: {printable(where)}{e.strerror or error_line(e)}",
                       err=True)
            ctx.exit(EXIT_ERROR)


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll reports an error)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError):
        return False


class PolicyName(click.ParamType):
    """A name from the policy registry, checked when parsed (the registry may grow at run time)."""

    name = "policy"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(policies.POLICIES) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value not in policies.POLICIES:
            self.fail(f"unknown policy {value!r} (known: {', '.join(policies.POLICIES)})",
                      param, ctx)
        return value

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
        from click.shell_completion import CompletionItem
        return [CompletionItem(n) for n in policies.POLICIES if n.startswith(incomplete)]


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
              default="warning", show_default=True, envvar="ANDREAS_LOG_LEVEL",
              help="Verbosity of the log on stderr (also ANDREAS_LOG_LEVEL).")
@click.version_option(package_name="andreas", message="%(prog)s %(version)s")
def main(log_level: str) -> None:
    """andreas: an energy-aware GPU cluster manager for deep-learning training jobs.

    At each rescheduling point it decides which jobs run on which nodes with how many
    GPUs, so that the energy bill plus the penalties for late jobs is as small as
    possible, and the manager (`andreas manager run`) makes the nodes' Docker engines
    follow. Policies: the ANDREAS randomized greedy, path relinking and simple baselines.

    \b
    Users:      submit, queue, show, logs, cancel
    Operators:  manager run, nodes, node, costs, profile, report, db
    Planning:   simulate, optimize, compare, trace, policies
    """
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command("policies")
@click.argument("name", type=PolicyName(), required=False)
def policies_cmd(name: str | None) -> None:
    """List the scheduling policies that --policy accepts; with NAME, what it plans and
    the options it takes."""
    if name is None:
        for spec in policies.POLICIES.values():
            click.echo(f"{spec.name:14} {spec.kind.value:7}  {spec.summary}")
        return
    spec = policies.POLICIES[name]
    traits = [t for t, on in (("shares GPUs", spec.shares_gpus), ("cloud", spec.cloud),
                              ("stateful", spec.stateful), ("manager", spec.manager),
                              ("power levels", spec.power_levels)) if on]
    rigid = spec.kind is policies.TaskKind.RIGID
    click.echo(f"{spec.name}: {spec.summary}")
    click.echo(f"  plans:    {'rigid tasks' if rigid else 'elastic jobs'}"
               + (" (and rigid tasks)" if spec.plans_demands and not rigid else ""))
    click.echo(f"  traits:   {', '.join(traits) or '-'}")
    if spec.period_s is not None:
        click.echo(f"  period:   {spec.period_s:g} s in the simulator")
    click.echo(f"  function: {spec.module}.{spec.function}")
    for option, default in spec.options.items():
        o = policies.OPTIONS[option]
        click.echo(f"  {option} = {policy_default(default)}  ({o.describe()})\n      {o.help}")


@main.command("optimize")
@click.argument("snapshot_path", metavar="SNAPSHOT.json",
                type=click.Path(dir_okay=False, path_type=str))
@click.option("--policy", type=PolicyName(), default="rg", show_default=True,
              help="Scheduling policy (see `andreas policies`).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the random generator, so a run can be repeated exactly.")
@policy_option("iterations", text="Iterations of a randomized policy (e.g. constructions of "
               "rg); a policy that takes none refuses it.")
@policy_option("order", text="Queue order: wspt-atc (wspt-late, and on premise ATC for jobs "
               "with slack while GPUs are short), wspt-late (late jobs by weight over "
               "remaining time), pressure (the papers' order), atc or late-atc.")
@policy_option("time_limit_s", text="Solver time limit (hierarchical: per controller); past "
               "it the best plan found.")
@policy_option("mip_gap", text="Relative MIP gap at which the solver stops.")
@policy_option("floor", text="rg and pr also consider the FIFO / EDF / priority plans, so their "
               "f_obj is never higher than a baseline's that leaves no job waiting next to free "
               "GPUs (off by default: it costs more in the long run; see ARCHITECTURE.md).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (plan, actions, objective, timing) instead of a table.")
@click.option("--tariff", "tariff_path", type=click.Path(dir_okay=False),
              help="Time-of-use tariff CSV (docs/FORMAT.md): plan with price and PUE by the "
                   "hour from the snapshot's now_s (jobs with slack may wait for cheap hours).")
@click.option("--actions", "all_actions", is_flag=True,
              help="Table view: list every job's action, also waiting and preempted jobs "
                   "(default: only the jobs the plan runs).")
@click.option("--power-levels", type=click.Choice(("on", "off")), default="on",
              show_default=True,
              help="on: greedy, rg, pr and milp choose each job's GPU power limit where the "
                   "snapshot's nodes and jobs have levels (docs/power-limits.md); off: every "
                   "GPU at its default limit.")
def optimize_cmd(snapshot_path: str, policy: str, seed: int, iterations: int | None,
                 order: str | None, time_limit_s: float | None, mip_gap: float | None,
                 floor: bool, tariff_path: str | None, as_json: bool,
                 all_actions: bool, power_levels: str) -> None:
    """Decide one rescheduling point: read SNAPSHOT.json (format andreas-snapshot/1),
    run a policy and print the plan and the actions that lead to it.

    Nothing is started or stopped: this only shows the decision.
    """
    from andreas.formats.snapshot import load_snapshot

    _check_options([policy], iterations=iterations, order=order, time_limit_s=time_limit_s,
                   mip_gap=mip_gap, floor=floor or None)
    snapshot = _priced(load_snapshot(snapshot_path), tariff_path)
    if power_levels == "off":
        from andreas.levels import without_levels
        snapshot = without_levels(snapshot)
    plan, seconds = run_policy(snapshot, policy, seed, iterations, order,
                               time_limit_s=time_limit_s, mip_gap=mip_gap, floor=floor)
    actions = plan.actions(snapshot)
    if as_json:
        click.echo(jsontext.dumps(plan_to_json(snapshot, plan, actions, policy, seconds),
                              default=_json_default))
    else:
        _print_table(snapshot, plan, actions, policy, seconds, all_actions)


def _priced(snapshot: Snapshot, tariff_path: str | None) -> Snapshot:
    """The snapshot priced by a tariff file (hours without a PUE take the snapshot's)."""
    if tariff_path is None:
        return snapshot
    from dataclasses import replace

    from andreas.costs import with_tariff
    from andreas.formats.tariff import load_tariff
    with option_names(tariff="--tariff"):
        tariff_file = load_tariff(tariff_path)
    return replace(snapshot, energy=with_tariff(snapshot.energy, tariff_file))


def run_policy(snapshot: Snapshot, policy: str, seed: int, iterations: int | None,
               order: str | None = None, *, time_limit_s: float | None = None,
               mip_gap: float | None = None, floor: bool = False) -> tuple[Plan, float]:
    """Decide with a fresh seeded generator; the plan is checked before anyone sees it."""
    import numpy as np

    from andreas.feasibility import check_plan
    from andreas.optimizer.warmup import warm
    warm(notice=lambda message: click.echo(f"andreas: {message}", err=True))
    options = policies.get(policy).accepted(
        {"iterations": iterations, "order": order, "floor": floor or None,
         "time_limit_s": time_limit_s, "mip_gap": mip_gap})
    start = time.perf_counter()
    plan = optimizer.decide(snapshot, np.random.default_rng(seed), policy, **options)
    seconds = time.perf_counter() - start
    try:
        check_plan(snapshot, plan)
    except InfeasiblePlan as e:
        raise InfeasiblePlan(f"policy {policy} produced an infeasible plan: {e}") from None
    return plan, seconds


@main.command("compare")
@click.argument("snapshot_path", metavar="SNAPSHOT.json", type=click.Path(dir_okay=False))
@click.option("--policies", "policy_list", default=",".join(DEFAULT_COMPARE), show_default=True,
              help="Comma-separated policies to run on the same snapshot.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of every policy's random generator.")
@policy_option("iterations", text="Iterations of the randomized policies; the others run "
               "without it.")
@policy_option("order", text="Queue order: wspt-atc (wspt-late, and on premise ATC for jobs "
               "with slack while GPUs are short), wspt-late (late jobs by weight over "
               "remaining time), pressure (the papers' order), atc or late-atc.")
@policy_option("floor", text="rg and pr also consider the baselines' plans (see `andreas "
               "optimize --help`).")
@click.option("--tariff", "tariff_path", type=click.Path(dir_okay=False),
              help="Time-of-use tariff CSV (docs/FORMAT.md): plan with price and PUE by the "
                   "hour from the snapshot's now_s (jobs with slack may wait for cheap hours).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list instead of a table.")
def compare_cmd(snapshot_path: str, policy_list: str, seed: int, iterations: int | None,
                order: str | None, floor: bool, tariff_path: str | None,
                as_json: bool) -> None:
    """Run several policies on one snapshot and score every plan on both proxies.

    f_obj (ANDREAS eq. 1, lower is better) is split into tardiness, postponement and
    energy; f_bar (path relinking's proxy, higher is better) is shown beside it, and for
    cloud snapshots f_mix (lower is better; what greedy, rg and pr minimise there).
    """
    from andreas.console import console
    from andreas.costs import evaluate
    from andreas.formats.snapshot import load_snapshot
    from andreas.model import ActionKind

    names = [p.strip() for p in policy_list.split(",") if p.strip()]
    unknown = [n for n in names if n not in policies.POLICIES]
    if unknown or not names:
        raise InputError(f"--policies: unknown policy {','.join(unknown)!r} "
                         f"(known: {', '.join(policies.POLICIES)})")
    _check_options(names, iterations=iterations, order=order, floor=floor or None)
    snapshot = _priced(load_snapshot(snapshot_path), tariff_path)
    rows: list[dict[str, Any]] = []
    for name in names:
        plan, seconds = run_policy(snapshot, name, seed, iterations, order, floor=floor)
        ev = evaluate(snapshot, plan)
        kinds = [a.kind for a in plan.actions(snapshot)]
        rows.append({"policy": name, "objective_name": plan.objective_name,
                     "f_obj": ev.f_obj, "f_bar": ev.f_bar, "f_mix": ev.f_mix,
                     "tardiness_cost": ev.tardiness_cost,
                     "postponement_cost": ev.postponement_cost, "energy_cost": ev.node_cost,
                     "running": len(plan.assignments), "waiting": len(plan.postponed),
                     "moved_or_preempted": sum(k in (ActionKind.MOVE, ActionKind.PREEMPT)
                                               for k in kinds),
                     "seconds": seconds})
    if as_json:
        click.echo(jsontext.dumps(rows, default=_json_default))
        return
    from rich.table import Table

    table = Table(title=f"{snapshot.name or snapshot_path}: {len(snapshot.jobs)} jobs, "
                        f"{len(snapshot.nodes)} nodes, seed {seed}")
    columns = (("policy", "policy", "{}"), ("proxy", "objective_name", "{}"),
               ("f_obj", "f_obj", "{:.6g}"), ("f_bar", "f_bar", "{:.6g}"),
               *((("f_mix", "f_mix", "{:.6g}"),) if snapshot.cloud else ()),
               ("tardiness", "tardiness_cost", "{:.2f}"),
               ("postponement", "postponement_cost", "{:.2f}"),
               ("energy", "energy_cost", "{:.3f}"), ("run", "running", "{}"),
               ("wait", "waiting", "{}"), ("stopped", "moved_or_preempted", "{}"),
               ("ms", "seconds", "{:.1f}"))
    for title, _, _ in columns:
        table.add_column(title, justify="left" if title in ("policy", "proxy") else "right")
    for row in rows:
        table.add_row(*(fmt.format(row[key] * 1000 if key == "seconds" else row[key])
                        for _, key, fmt in columns))
    console().print(table)
    click.echo("f_obj: lower is better (greedy, rg, baselines minimise it); f_bar: higher is "
               "better (pr maximises it); stopped = moved or preempted running jobs.")
    if snapshot.cloud:
        click.echo("f_mix (cloud): lower is better; greedy, rg and pr minimise it instead of "
                   "f_obj (each job priced at the cheapest mix its configuration starts).")


def _check_options(names: list[str], **values: Any) -> None:
    """An option set on the command line that none of the policies takes is one line
    naming the option as typed and the policies (the registry decides)."""
    flags = {name: "--" + name.replace("_", "-") for name in values}
    with option_names(**flags):
        policies.check_applicable(names, values)


def plan_to_json(snapshot: Snapshot, plan: Plan, actions: tuple[Action, ...], policy: str,
                 seconds: float) -> dict[str, Any]:
    """The --json document; ``node_configs`` only in cloud mode."""
    out: dict[str, Any] = {
        "policy": policy,
        "objective": _finite(plan.objective),
        "objective_name": plan.objective_name,
        "seconds": seconds,
        "assignments": [{"job": a.job, "node": a.node, "gpus": a.gpus,
                         "power_limit_w": a.power_limit_w} for a in plan.assignments],
        "postponed": list(plan.postponed),
        "actions": [{"job": a.job, "action": a.kind.value, "node": a.node, "gpus": a.gpus,
                     **({"power_limit_w": a.power_limit_w} if a.power_limit_w is not None
                        else {})}
                    for a in actions],
        "stats": {k: _finite(v) for k, v in plan.stats.items()},
        "revisit_s": _finite(plan.revisit_s),
    }
    if snapshot.cloud:
        out["node_configs"] = dict(plan.node_configs)
    return out


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity; null says "no value" without breaking parsers."""
    import numpy as np

    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return None
    return value


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return _finite(value.item())
    return str(value)


def _remaining_s(snapshot: Snapshot, job, act: Action, gpu_type: str) -> float:
    """The job's remaining time on the action's GPUs, at its power level."""
    remaining = job.remaining_s(gpu_type, act.gpus) or 0.0
    if act.power_limit_w is not None and act.node is not None and not snapshot.cloud:
        from andreas.levels import option_at
        node = next(n for n in snapshot.nodes if n.name == act.node)
        option = option_at(job, node, act.power_limit_w)
        remaining *= option.time_factor if option is not None else 1.0
    return remaining


def _print_table(snapshot: Snapshot, plan: Plan, actions: tuple[Action, ...], policy: str,
                 seconds: float, all_actions: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    from andreas.console import console
    from andreas.costs import evaluate
    from andreas.model import ActionKind

    jobs = {j.id: j for j in snapshot.jobs}
    nodes = {n.name: n for n in snapshot.nodes}
    catalog = {c.name: c for c in snapshot.catalog}
    table = Table(title=f"{snapshot.name or 'snapshot'}: plan of {policy}")
    limits = any(a.power_limit_w is not None for a in actions)
    columns = ("job", "action", "node", "GPUs", *(("limit W",) if limits else ()),
               "remaining h", "due in h", "late?")
    for column in columns:
        table.add_column(column, justify="right" if column in ("GPUs", "limit W", "remaining h",
                                                               "due in h") else "left")
    for act in actions:
        job = jobs[act.job]
        due_h = f"{(job.due_s - snapshot.now_s) / 3600:.1f}"
        if act.node is None:
            if all_actions:
                where = job.running.node if job.running else "-"
                table.add_row(*map(Text, (job.id, act.kind.value, where, "-",
                                          *(("-",) if limits else ()), "-", due_h, "-")))
            continue
        if snapshot.cloud:
            entry = catalog[plan.node_configs[act.node]]
            was = nodes[act.node].config
            vm = entry.name if was in (None, entry.name) else f"{was} -> {entry.name}"
            gpu_type, node_label = entry.gpu_type, f"{act.node} ({vm})"
        else:
            gpu_type, node_label = nodes[act.node].gpu_type or "", act.node
        if act.kind is ActionKind.MOVE and job.running is not None:
            node_label = f"{job.running.node} -> {node_label}"
        remaining = _remaining_s(snapshot, job, act, gpu_type)
        late = "yes" if snapshot.now_s + remaining > job.due_s else "no"
        limit = (f"{act.power_limit_w:g}" if act.power_limit_w is not None else "-",)
        table.add_row(*map(Text, (job.id, act.kind.value, node_label, str(act.gpus),
                                  *(limit if limits else ()),
                                  f"{remaining / 3600:.1f}", due_h, late)))
    out = console()
    out.print(table)
    ev = evaluate(snapshot, plan)
    counts = {kind: sum(a.kind is kind for a in actions) for kind in ActionKind}
    out.print(
        f"policy {policy}: {plan.objective_name} = {plan.objective:.6g} | "
        f"f_obj {ev.f_obj:.6g}, f_bar {ev.f_bar:.6g} | {seconds:.3f} s | "
        + ", ".join(f"{counts[k]} {label}" for k, label in (
            (ActionKind.START, "started"), (ActionKind.CONTINUE, "continued"),
            (ActionKind.RESIZE, "resized"), (ActionKind.MOVE, "moved"),
            (ActionKind.PREEMPT, "preempted"), (ActionKind.WAIT, "waiting"))),
        markup=False, highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------- sub-commands
# Each family of commands lives in its own module, added on first use (COMMAND_MODULES).
