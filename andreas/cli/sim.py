"""``andreas simulate``: run policies over a whole trace and compare what they cost."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path

import click

from andreas.infra import jsontext
from andreas.infra.fileio import safe_name
from andreas.cli.common import MAX_SWEEP_SEEDS, MAX_WORKERS, SEED, Finite, Whole, policy_option
from andreas.config import MAX_GRACE_S, MAX_PERIOD_S

from andreas.errors import InputError
from andreas.errors import options as option_names
from andreas.interference import Sharing
from andreas import policies
from andreas.policies import POLICIES, TaskKind
from andreas.simulator.results import MAX_IDLE_S, MAX_WAKE_S, PROGRESS_MODES, SimOptions

ALL_POLICIES = "fifo,edf,priority,greedy,rg,pr"
RIGID = tuple(n for n, spec in POLICIES.items() if spec.kind is TaskKind.RIGID)
ARRIVALS = ("exponential", "high", "low", "mixed")


def _csv_list(value: str, field: str, cast=str) -> tuple:
    try:
        items = tuple(cast(v.strip()) for v in value.split(",") if v.strip())
    except ValueError:
        raise InputError(f"{field}: must be a comma-separated list, got {value!r}") from None
    if not items:
        raise InputError(f"{field}: must not be empty")
    return items


@click.command("simulate")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Trace file (andreas-trace/1). Without it a trace is generated from "
                   "--nodes/--scenario/--arrival/--trace-seed.")
@click.option("--policies", "policy_list", default=ALL_POLICIES, show_default=True,
              help="Comma-separated policies, all run on the same trace. Energy policies "
                   f"({', '.join(p for p in POLICIES if p not in RIGID)}) plan "
                   "elastic jobs on whole GPUs; packing policies "
                   f"({', '.join(RIGID)}) and greedy / rg place rigid "
                   "multi-resource tasks (GPU slices, CPU, memory: traces from `andreas "
                   "trace import-alibaba`).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Directory for CSV/JSON results and PNG plots [default: out/simulate/NAME].")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the policies' random generator (the simulation is reproducible).")
@policy_option("iterations", text="MaxIt of the randomized policies.")
@policy_option("order", text="Queue order: wspt-atc (wspt-late, and on premise ATC for jobs "
               "with slack while GPUs are short), wspt-late (late jobs by weight over "
               "remaining time), pressure (the papers' order, most late first), atc or "
               "late-atc.")
@policy_option("energy_price", text="On premise, price a job's run by its node's whole "
               "draw (node, ANDREAS' c_ng) or by what it adds above the idle draw "
               "(above-idle). Unset: above-idle where restarts cost an overhead (this "
               "command's default mode), node in the cloud and the papers' mode.")
@policy_option("keep_node", flag="--keep-node/--no-keep-node", default=None,
               text="On premise, a running job placed at its own node class and GPU count "
               "stays on its node where that node still has the GPUs; in the cloud, the "
               "plan's jobs are swapped among its VMs of their type at their GPU count so "
               "that the most stay on the VM they run on. Unset: on where energy is priced "
               "above idle by default, off elsewhere.")
@click.option("--period-s", type=Finite(min=0, max=MAX_PERIOD_S), default=None,
              help="Periodic rescheduling every H seconds [default: the trace's period_s]; "
                   "0 turns it off (reschedule only on submissions and completions).")
@click.option("--progress", "progress_mode", type=click.Choice(PROGRESS_MODES),
              default="epoch", show_default=True,
              help="epoch: a job stopped mid-epoch redoes that epoch from its checkpoint; "
                   "exact: fractional progress carries over (the papers' simulator).")
@click.option("--restart-overhead-s", type=Finite(min=0, max=MAX_GRACE_S), default=None,
              help="Extra seconds each restart from a checkpoint costs [default: 10 with "
                   "--progress epoch, the manager's restart_overhead_s; 0 with exact, the "
                   "papers' free migration].")
@click.option("--mu", type=Finite(min=0, max=1e6), default=None,
              help="Idle-GPU penalty mu of P1a (per idle GPU of a node that runs jobs) the "
                   "policies plan with [default: the trace's params.mu; generated traces: 1 "
                   "with --cloud, as the path-relinking paper, else 0].")
@policy_option("floor", text="rg and pr also consider the FIFO / EDF / priority plans at "
               "every decision (never worse than a work-conserving baseline on f_obj; off by "
               "default: it costs more in the long run, see ARCHITECTURE.md).")
@policy_option("move_margin", text="Hysteresis of rg and pr: a move, resize or preemption "
               "must save this many times the work it throws away.")
@click.option("--revisit/--no-revisit", default=True, show_default=True,
              help="Cloud: also decide again when a running job could switch to a "
                   "configuration it pays less on and still end on time (the plan's revisit "
                   "time; on-premise plans name none); "
                   "--no-revisit decides only at submissions, completions and periods, as "
                   "the papers' simulators do.")
@click.option("--tau-bar", type=Finite(min=0, max=1), default=Sharing.tau_bar,
              show_default=True,
              help="GPU sharing: bound on the probability that residents' memory peaks "
                   "collide on a GPU (interference-aware placement eq. 5).")
@click.option("--theta-bar", type=Finite(min=0, max=100), default=Sharing.theta_bar,
              show_default=True,
              help="GPU sharing: bound on any worker's predicted slowdown on a shared GPU "
                   "(eq. 7; 0.1 = 10 %% slower than alone).")
@click.option("--theta-balance", type=Finite(min=0, max=100),
              default=Sharing.theta_balance, show_default=True,
              help="GPU sharing: bound on the spread of slowdowns of one job's workers (eq. 8).")
@click.option("--contention", type=Finite(min=0, max=100),
              default=Sharing.contention, show_default=True,
              help="Interference model: slowdown per whole GPU of compute a worker shares its "
                   "GPU with (what the simulator charges every policy; ARCHITECTURE.md).")
@click.option("--interference-error", type=Finite(min=0, max=5), default=0.0,
              show_default=True,
              help="How wrong the interference model is in the simulation: each job suffers "
                   "exp(N(0, e)) times the predicted slowdown and every measurement of it is "
                   "off by N(0, e) more (what ojpap's online adjustment corrects).")
@click.option("--migration-budget-s", type=Finite(min=0, max=1e9),
              default=Sharing.migration_budget_s, show_default=True,
              help="ojpap: seconds of work one round of moves may throw away (c_bar, eq. 19).")
@click.option("--ewma", "ewma_a", type=Finite(min=0, max=1), default=Sharing.ewma_a,
              show_default=True,
              help="ojpap: weight of the past in the interference average that triggers an "
                   "adjustment (a of eq. 18).")
@policy_option("population", "--ga-population", "ga_population",
               text="Chromosomes per generation (100: the genetic scheduling paper's).")
@policy_option("generations", "--ga-generations", "ga_generations",
               text="Generations per decision.")
@policy_option("fitness", "--ga-fitness", "ga_fitness",
               text="consolidated: the allocation gained with its ties broken by the whole "
                    "free GPUs kept together on nodes; allocation: the allocation alone (the "
                    "paper's Algorithm 3).")
@policy_option("backfill", "--ga-backfill/--no-ga-backfill", "ga_backfill", default=None,
               text="Keep the node where the oldest waiting task that fits nowhere now can "
                    "start soonest for it, except for tasks done before then (EASY "
                    "backfilling).")
@click.option("--power-off-idle", is_flag=True,
              help="Idle nodes are switched off and draw nothing (default: they draw "
                   "power_w[0]).")
@click.option("--power-idle-s", type=Finite(max=MAX_IDLE_S), default=0.0,
              show_default=True,
              help="With --power-off-idle: a node goes off after this long idle.")
@click.option("--wake-s", type=Finite(max=MAX_WAKE_S), default=0.0, show_default=True,
              help="With --power-off-idle: a node switched on for a job draws power_w[0] "
                   "this long before the job begins (the manager's [power] wake_lead_s).")
@click.option("--tariff", "tariff_path", type=click.Path(dir_okay=False),
              help="Time-of-use tariff CSV (hour_of_day,price_per_kwh[,pue], UTC; "
                   "docs/FORMAT.md): the bill integrates price x PUE over every interval, "
                   "and the policies plan with it (jobs with slack wait for cheaper hours).")
@click.option("--tariff-blind", is_flag=True,
              help="With --tariff: the policies plan with the tariff's mean price and PUE; "
                   "the bill still follows the tariff (the what-if of ignoring it).")
@click.option("--power-levels", "power_levels", type=click.Choice(("on", "off", "both")),
              default="on", show_default=True,
              help="on: greedy/rg/pr/milp choose each job's GPU power limit where the trace's "
                   "nodes and jobs have levels (andreas trace generate --workloads zeus); "
                   "off: every GPU at its default limit; both: each policy with and without, "
                   "plus the energy bound (docs/power-limits.md).")
@click.option("--bound", is_flag=True,
              help="Also compute the trace's lower bound (no schedule bills less: cloud, "
                   "per-job configuration mixes; on premise, an LP relaxation of a "
                   "time-indexed schedule, HiGHS) and print it beside the policies (JSON: "
                   "an entry with \"policy\": \"bound\"; sweeps: a row per trace).")
@click.option("--workers", type=Whole(min=1, max=MAX_WORKERS), default=None,
              help="Parallel processes [default: one per policy, at most the CPU count].")
@click.option("--json", "as_json", is_flag=True,
              help="Print the results as JSON (one object per policy, FORMAT.md keys).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--sweep", is_flag=True,
              help="Run the grid --scenarios x --arrivals x --nodes x --seeds instead of one "
                   "trace, and aggregate means and spreads.")
@click.option("--nodes", default="10", show_default=True,
              help="Generated trace: nodes N (a list with --sweep, e.g. 10,20,50).")
@click.option("--scenario", "scenarios", default="1", show_default=True,
              help="Generated trace: 1 = 2xV100 / 1xT4 nodes, 2 = 4xV100 / 2xT4 (list with "
                   "--sweep).")
@click.option("--arrival", "arrivals", default="exponential", show_default=True,
              help=f"Generated trace: arrival kind, one of {', '.join(ARRIVALS)} (list with "
                   "--sweep).")
@click.option("--trace-seed", "trace_seeds", default="1", show_default=True,
              help="Generated trace: seed (a comma-separated list with --sweep).")
@click.option("--seeds", type=Whole(min=1, max=MAX_SWEEP_SEEDS), default=None,
              help="With --sweep: use trace seeds 1..SEEDS.")
@click.option("--cloud", is_flag=True, help="Generated trace: the cloud VM catalog variant.")
@click.option("--shard", default=None, metavar="I/K",
              help="With --sweep: run only part I of K of the grid (tasks I, I+K, ...) and "
                   "write sweep-part-I-of-K.json to --out; e.g. a Slurm job array "
                   "--array=1-K with --shard $SLURM_ARRAY_TASK_ID/K, then --merge.")
@click.option("--merge", is_flag=True,
              help="Assemble the sweep report from the part files named as arguments "
                   "(written by --shard) into --out; refuses parts of different sweeps or "
                   "a missing part.")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="With --sweep: run the tasks on the Dask cluster whose scheduler is at "
                   "ADDRESS (e.g. tcp://host:8786; needs andreas[dask]) instead of local "
                   "processes.")
@click.argument("parts", nargs=-1, type=click.Path(dir_okay=False))
def simulate_cmd(trace_path: str | None, policy_list: str, out_dir: str | None, seed: int,
                 iterations: int | None, order: str | None, energy_price: str | None,
                 keep_node: bool | None, period_s: float | None,
                 progress_mode: str, restart_overhead_s: float | None, mu: float | None,
                 floor: bool, revisit: bool, tau_bar: float, theta_bar: float, theta_balance: float,
                 contention: float, interference_error: float, migration_budget_s: float,
                 ewma_a: float, ga_population: int | None, ga_generations: int | None,
                 ga_fitness: str | None, ga_backfill: bool | None,
                 move_margin: float | None, power_off_idle: bool,
                 power_idle_s: float, wake_s: float,
                 tariff_path: str | None, tariff_blind: bool, power_levels: str, bound: bool,
                 workers: int | None,
                 as_json: bool, no_plots: bool, quiet: bool, sweep: bool, nodes: str,
                 scenarios: str, arrivals: str, trace_seeds: str, seeds: int | None,
                 cloud: bool, shard: str | None, merge: bool, dask_address: str | None,
                 parts: tuple[str, ...]) -> None:
    """Simulate policies over a long workload and compare their energy bill plus tardiness.

    Rescheduling happens at every submission, every completion and every period H; the
    policies' plans are applied (start, continue, resize, move, preempt) and progress is
    counted in epochs. Prints a table with the cost of every policy and the percentage
    reduction of each against each other (path-relinking paper eq. 3), and writes CSV,
    JSON and PNG plots to --out.
    """
    if merge or parts:
        if not merge:
            raise InputError(f"{parts[0]}: unexpected argument (part files need --merge)")
        _merge(parts, out_dir, as_json)
        return
    if (shard or dask_address) and not sweep:
        raise InputError(f"{'--shard' if shard else '--dask'}: needs --sweep")
    names = _policy_names(policy_list, {
        "iterations": iterations, "order": order, "floor": floor or None,
        "energy_price": energy_price, "keep_node": keep_node,
        "population": ga_population, "generations": ga_generations,
        "fitness": ga_fitness, "backfill": ga_backfill, "move_margin": move_margin})
    tariff_file = _read_tariff(tariff_path, tariff_blind)
    for a in _csv_list(arrivals, "--arrival"):
        if a not in ARRIVALS:
            raise InputError(f"--arrival: must be one of {', '.join(ARRIVALS)}, got {a!r}")
    with option_names(ga_population="--ga-population", ga_generations="--ga-generations",
                      ga_fitness="--ga-fitness",
                      period_s="--period-s", restart_overhead_s="--restart-overhead-s"):
        options = SimOptions(
            period_s=period_s, progress=progress_mode, mu=mu,
            restart_overhead_s=restart_overhead_s, power_off_idle=power_off_idle,
            power_idle_s=power_idle_s, wake_s=wake_s,
            iterations=iterations, order=order, seed=seed, floor=floor, revisit=revisit,
            energy_price=energy_price, keep_node=keep_node,
            interference_error=interference_error, ga_population=ga_population,
            ga_generations=ga_generations, ga_fitness=ga_fitness, ga_backfill=ga_backfill,
            move_margin=move_margin, tariff_blind=tariff_blind, power_levels=power_levels != "off",
            tariff=str(Path(tariff_path).resolve()) if tariff_path else None,
            sharing=Sharing(tau_bar=tau_bar, theta_bar=theta_bar, theta_balance=theta_balance,
                            contention=contention, migration_budget_s=migration_budget_s,
                            ewma_a=ewma_a))
    if tariff_file is not None and cloud:
        raise InputError("--tariff: a cloud trace pays VM prices, not energy")
    if bound and tariff_file is not None:
        raise InputError("--bound: the bounds assume a constant price (no --tariff)")
    if sweep:
        from andreas.simulator.shards import parse_shard
        _sweep(names + (("bound",) if bound else ()), options, nodes, scenarios, arrivals,
               trace_seeds, seeds, cloud, workers, out_dir, as_json, quiet, tariff_file,
               shard=parse_shard(shard) if shard else None, dask=dask_address)
        return
    trace = _priced(_one_trace(trace_path, nodes, scenarios, arrivals, trace_seeds, cloud),
                    tariff_file)
    if power_levels == "both":
        _levels_both(trace, names, options, workers, out_dir, as_json, quiet, no_plots)
        return
    _simulate_trace(trace, names, options, workers=workers, out_dir=out_dir, as_json=as_json,
                    quiet=quiet, no_plots=no_plots, bound=bound)


def _policy_names(policy_list: str, taken: dict) -> tuple[str, ...]:
    """The --policies list, each known and each taking the policy options given."""
    names = _csv_list(policy_list, "--policies")
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        raise InputError(f"--policies: unknown policy {', '.join(unknown)!r} "
                         f"(known: {', '.join(POLICIES)})")
    with option_names(iterations="--iterations", order="--order", floor="--floor",
                      energy_price="--energy-price", keep_node="--keep-node",
                      population="--ga-population",
                      generations="--ga-generations", fitness="--ga-fitness",
                      backfill="--ga-backfill", move_margin="--move-margin"):
        policies.check_applicable(names, taken)
    return names


def _read_tariff(tariff_path: str | None, tariff_blind: bool):
    """The --tariff file read and checked (None without one)."""
    if tariff_blind and not tariff_path:
        raise InputError("--tariff-blind: needs --tariff FILE")
    if not tariff_path:
        return None
    from andreas.formats.tariff import load_tariff
    with option_names(tariff="--tariff"):
        return load_tariff(tariff_path)


def _priced(trace, tariff_file):
    """The trace billed by the --tariff file (as it is without one)."""
    if tariff_file is None:
        return trace
    if trace.cloud:
        raise InputError("--tariff: a cloud trace pays VM prices, not energy")
    from dataclasses import replace

    from andreas.costs import with_tariff
    return replace(trace, energy=with_tariff(trace.energy, tariff_file))


def _simulate_trace(trace, names, options: SimOptions, *, workers: int | None,
                    out_dir: str | None, as_json: bool, quiet: bool, no_plots: bool,
                    bound: bool) -> None:
    """Every policy on one trace: the table (or JSON), the files, the bound if asked."""
    from andreas.simulator.compare import run_policies
    from andreas.simulator.report import print_table, write_outputs

    results = run_policies(trace, names, options, workers=workers,
                           show_progress=not (quiet or as_json))
    target = Path(out_dir or Path("out") / "simulate" / safe_name(trace.name, "trace"))
    written = write_outputs(results, target, plots=not no_plots)
    lower = None
    if bound:
        from andreas.simulator.bounds import bound_row
        lower = bound_row(trace, power_off_idle=options.power_off_idle)
    if as_json:
        click.echo(jsontext.dumps([r.summary() for r in results] + ([lower] if lower else []),
                                  indent=1))
        return
    print_table(results, f"{trace.name}: {len(trace.jobs)} jobs, {len(trace.nodes)} nodes, "
                         f"policy seed {options.seed}")
    if lower is not None:
        best = min(results, key=lambda r: r.total_cost)
        ratio = (f"; best policy {best.policy} = {best.total_cost / lower['total_cost']:.4f} "
                 "x the bound" if lower["total_cost"] > 0 else "")
        click.echo(f"lower bound {lower['total_cost']:.2f} ({lower['method']}): no schedule "
                   f"bills less{ratio}")
    click.echo(f"wrote {len(written)} files to {target}/")


def _levels_both(trace, names, options, workers, out_dir, as_json, quiet, no_plots) -> None:
    """Every policy with power levels and without on the same trace, and the bound."""
    from dataclasses import replace

    from andreas.simulator.compare import run_policies
    from andreas.simulator.power_bound import energy_bound
    from andreas.simulator.report import write_outputs

    if trace.cloud:
        raise InputError("--power-levels: both compares energy, a cloud trace pays VM prices")
    runs = []
    target = Path(out_dir or Path("out") / "simulate" / (trace.name or "trace"))
    for mode in ("on", "off"):
        results = run_policies(trace, names, replace(options, power_levels=mode == "on"),
                               workers=workers, show_progress=not (quiet or as_json))
        write_outputs(results, target / f"levels-{mode}", plots=not no_plots)
        runs += results
    bound = energy_bound(trace)
    doc = {"runs": [r.summary() for r in runs],
           "bound": {"energy_kwh": bound.total_kwh,
                     "energy_above_idle_kwh": bound.above_idle_kwh}}
    (target / "power-levels.json").write_text(jsontext.dumps(doc, indent=1))
    if as_json:
        click.echo(jsontext.dumps(doc, indent=1))
        return
    from rich.table import Table

    from andreas.console import console

    table = Table(title=f"{trace.name}: power limits on / off, and the bound "
                        "(every job at its least-energy configuration and level)")
    for col in ("policy", "limits", "energy kWh", "above idle kWh", "total cost", "late jobs",
                "energy / bound"):
        table.add_column(col, justify="right")
    for r in runs:
        table.add_row(r.policy, r.power_levels, f"{r.energy_kwh:.1f}",
                      f"{r.energy_above_idle_kwh:.1f}", f"{r.total_cost:.2f}",
                      str(r.late_jobs), f"{r.energy_kwh / bound.total_kwh:.3f}")
    table.add_row("bound", "", f"{bound.total_kwh:.1f}", f"{bound.above_idle_kwh:.1f}", "",
                  "", "1.000")
    console().print(table)
    click.echo(f"wrote levels-on/, levels-off/ and power-levels.json to {target}/")


def _one_trace(trace_path, nodes, scenarios, arrivals, trace_seeds, cloud):
    if trace_path:
        from andreas.formats.trace import load_trace
        return load_trace(trace_path)
    from andreas.simulator.generate import generate_trace
    return generate_trace(n_nodes=_csv_list(nodes, "--nodes", int)[0],
                          scenario=_csv_list(scenarios, "--scenario", int)[0],
                          arrival=_csv_list(arrivals, "--arrival")[0],
                          seed=_csv_list(trace_seeds, "--trace-seed", int)[0], cloud=cloud)


def _sweep(names, options, nodes, scenarios, arrivals, trace_seeds, seeds, cloud, workers,
           out_dir, as_json, quiet, tariff_file=None, *, shard=None, dask=None) -> None:
    from andreas.simulator.sweep import Grid, run_sweep

    grid = Grid(scenarios=_csv_list(scenarios, "--scenario", int),
                arrivals=_csv_list(arrivals, "--arrival"),
                nodes=_csv_list(nodes, "--nodes", int),
                seeds=tuple(range(1, seeds + 1)) if seeds else _csv_list(trace_seeds,
                                                                           "--trace-seed", int),
                policies=names, cloud=cloud)
    rows = run_sweep(grid, options, workers=workers or (os.cpu_count() or 1),
                     show_progress=not (quiet or as_json), tariff=tariff_file,
                     shard=shard or (1, 1), dask=dask)
    target = Path(out_dir or Path("out") / "sweep")
    if shard is not None:
        from andreas.simulator.shards import write_part
        path = write_part(target, grid, options, shard, rows, options.tariff)
        if as_json:
            click.echo(jsontext.dumps({"part": str(path), "runs": rows}, indent=1))
        else:
            click.echo(f"wrote {len(rows)} runs (shard {shard[0]}/{shard[1]}) to {path}")
        return
    recorded = {"tariff": options.tariff, "tariff_blind": options.tariff_blind} \
        if options.tariff else {}
    _report_sweep(rows, target, as_json, recorded)


def _merge(parts, out_dir, as_json) -> None:
    from andreas.simulator.shards import read_parts

    head, rows = read_parts(parts)
    opts = head["options"] or {}
    recorded = {"tariff": opts.get("tariff"), "tariff_blind": opts.get("tariff_blind")} \
        if opts.get("tariff") else {}
    _report_sweep(rows, Path(out_dir or Path("out") / "sweep"), as_json, recorded)


def _report_sweep(rows, target: Path, as_json: bool, recorded: dict) -> None:
    from andreas.simulator.sweep import aggregate, headline

    summary = aggregate(rows)
    heads = headline(rows)
    target.mkdir(parents=True, exist_ok=True)
    for name, data in (("sweep-runs.csv", rows), ("sweep-summary.csv", summary)):
        buf = io.StringIO()
        keys = list(dict.fromkeys(k for row in data for k in row))   # bound rows have fewer
        w = csv.DictWriter(buf, fieldnames=keys, restval="")
        w.writeheader()
        w.writerows(data)
        (target / name).write_text(buf.getvalue())
    (target / "sweep.json").write_text(jsontext.dumps({"runs": rows, "summary": summary,
                                                       "headline": heads, **recorded},
                                                      indent=1))
    if as_json:
        click.echo(jsontext.dumps({"summary": summary, "headline": heads, **recorded},
                                  indent=1))
        return
    _print_sweep(summary, heads)
    click.echo(f"wrote sweep-runs.csv, sweep-summary.csv, sweep.json to {target}/")


def _print_sweep(summary, heads) -> None:
    from rich.table import Table

    from andreas.console import console

    table = Table(title="sweep: mean (± std) over seeds")
    for col in ("scenario", "arrival", "N", "policy", "total cost", "energy", "tardiness",
                "late jobs", "vs best baseline %", "vs rg %", "x bound", "opt. mean ms"):
        table.add_column(col, justify="right")
    for r in summary:
        table.add_row(str(r["scenario"]), r["arrival"], str(r["nodes"]), r["policy"],
                      f"{r['total_cost_mean']:.1f} ± {r['total_cost_std']:.1f}",
                      f"{r['energy_cost_mean']:.1f}", f"{r['tardiness_cost_mean']:.1f}",
                      f"{r['late_jobs_mean']:.1f}",
                      f"{r['vs_best_baseline_pct_mean']:+.1f} "
                      f"± {r['vs_best_baseline_pct_std']:.1f}",
                      f"{r['vs_rg_pct_mean']:+.1f}", f"{r['vs_bound_mean']:.4f}",
                      f"{r['optimizer_mean_s_mean'] * 1000:.1f}")
    out = console()
    out.print(table)
    labels = (("rg_vs_best_baseline_pct", "rg vs best of fifo/edf/priority"),
              ("pr_vs_best_baseline_pct", "pr vs best baseline"), ("pr_vs_rg_pct", "pr vs rg"))
    for key, h in heads.items():
        parts = [f"{label} {h[k]:+.1f} %" for k, label in labels
                 if isinstance(h.get(k), (int, float)) and math.isfinite(h[k])]
        if parts:        # a sweep without rg, pr or a baseline has no headline
            out.print(f"{key}: {', '.join(parts)} (eq. 3; positive = cheaper)")
