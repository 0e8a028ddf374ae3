"""Against the published C++ implementation of the path-relinking paper, on the same cloud traces.

The paper's code (GitHub ai-sprint-eu-project/GPUScheduler) is built from a checkout with
its own Makefile (its default ``SSYS=true``, i.e. ``-DSMALL_SYSTEM``: that build prints
the per-job schedule of every rescheduling point, from which late jobs and the number of
decisions are read, and one ``ITER`` line per event loop, from which time per decision
is measured; the other build prints only aggregate totals). Nothing of it is copied
here: this file writes its three input files and reads its outputs.

For each N and seed an andreas cloud trace in the paper's setting is generated
(``generate_trace(n_nodes=N, cloud=True, arrival="exponential", seed=s)``: the VM
catalog of the paper's Table 2, J = 10 N jobs, exponential arrivals). ``--load F``
scales the offered load by F: every submission time is divided by F and every due date
moves with its submission (the slack ``due - submit`` is kept), so F = 3 packs the same
jobs, with the same deadlines relative to their arrival, into a third of the time.

Each (trace, load) is then run by the C++ program (FIFO, EDF, Greedy, RandomGreedy,
PathRelinking; the random ones with ``seed=--run-seed iter=--iterations``) and by
``andreas.simulator.engine.simulate`` with ``SimOptions(period_s=0, progress="exact")``
(fifo, edf, greedy, rg, pr) — the C++ simulator reschedules only at submissions and
completions and carries fractional progress over; andreas' greedy, rg and pr also decide
at their plans' revisit times (``Plan.revisit_s``: a running job could switch to a
configuration it pays less on and still end on time; ``--no-revisit``: events only, as
the C++; the baselines' plans have none). Both bill every busy VM at its
catalog price and charge tardiness weight x seconds late at completion.

Columns of the main table: EDF total cost of both (they must agree; the C++ prints 6
significant digits per schedule row), andreas rg and pr over C++ RandomGreedy, late
jobs, and CPU seconds per decision: the whole run's CPU time (C++: the child's rusage,
loading and the final schedule dump included; andreas: ``time.process_time`` around
``simulate``) divided by its rescheduling points. CPU time, not wall time, because
runs share the cores with each other (``--workers``) and with whatever else runs; the
detailed table also shows wall seconds per decision (C++: from its first to its last
``ITER`` line, the event loop alone; andreas: ``SimResult.wall_s`` / decisions) and
andreas' policy time alone. Targets are printed beside the figures, never asserted:
rg <= 1.00 x RandomGreedy, pr <= 0.97 x RandomGreedy, time per decision <= the C++'s.

What the C++ actually uses (read from its code): MaxIt_RG = ``iter`` (1000 here, as the
paper); MaxIt_PR = the number of nodes N (``MAX_DEPTH = nodes.size()``); sigma: the
path-relinking class declares ``K = 10`` and ``alpha = 0.3``, but the inherited
construction and elite-pool update read the randomized greedy's own ``K = 1`` and
``alpha = 0.05``, so the elite pool holds one solution, its path to itself is empty, and
PathRelinking is a randomized greedy maximising the paper's f_bar proxy. Other knobs:
swap parameter pi = 0.05, node choice beta = 0.2 (not settable from its command line).

Beside the C++, each row prints ``andreas.simulator.bounds.cloud_lower_bound`` of its
trace (no schedule bills less): how far the target pr <= 0.97 x RandomGreedy lies from
what is possible at all.

Run: ``bash scripts/bench.sh published`` or this file with python (``--help``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from andreas.errors import AndreasError
from andreas.model import Assignment, CatalogEntry, Job, Plan, Snapshot, Trace
from andreas.optimizer import get_policy
from andreas.simulator import engine
from andreas.simulator.bounds import cloud_lower_bound
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / "out" / "published"
# where the tool library's `fetch` leaves a checkout, beside the repository
MIRROR = ROOT.parent / ".mirror" / "ai-sprint-eu-project+GPUScheduler" / "repo"
ENV_DIR = "ANDREAS_PUBLISHED_DIR"
UPSTREAM = "https://github.com/ai-sprint-eu-project/GPUScheduler"

# C++ method -> the andreas policy it is compared with
PAIRS = {"FIFO": "fifo", "EDF": "edf", "Greedy": "greedy", "RandomGreedy": "rg",
         "PathRelinking": "pr"}
RANDOM_METHODS = ("RandomGreedy", "PathRelinking")
RANDOM_POLICIES = ("rg", "pr")
TARGET_RG = 1.00        # andreas rg / C++ RandomGreedy
TARGET_PR = 0.97        # andreas pr / C++ RandomGreedy
TARGET_TIME = 1.00      # andreas seconds per decision / C++'s

JOBS_FILE = "Lof_Selectjobs.csv"
TIMES_FILE = "SelectJobs_times.csv"
NODES_FILE = "tNodes.csv"
JOBS_HEADER = ("Application,Images,Epochs,Batchsize,Jobs,UniqueJobsID,SubmissionTime,"
               "Deadline,Tardinessweight,MinExecTime,MaxExecTime")
TIMES_HEADER = "UniqueJobsID,VMtype,GPUtype,nGPUs,max_nGPUs,cost,ExecutionTime"
ITER_MARK = "######################## ITER "
DONE_PERCENT = 100 - 1e-7      # the C++ calls a job complete at this completion percent
SOURCES = ("Makefile", "build/Makefile", "src", "include")


# -- traces -----------------------------------------------------------------------------

def scale_load(trace: Trace, factor: float) -> Trace:
    """The same jobs at ``factor`` x the offered load: submissions / factor, slack kept."""
    if not factor > 0:
        raise ValueError(f"load factor must be > 0, got {factor!r}")
    name = f"{trace.name}-load{factor:g}"
    if factor == 1:     # not even an ulp of change to the due dates
        return dataclasses.replace(trace, name=name)
    jobs = tuple(dataclasses.replace(j, submit_s=j.submit_s / factor,
                                     due_s=j.submit_s / factor + (j.due_s - j.submit_s))
                 for j in trace.jobs)
    return dataclasses.replace(trace, jobs=jobs, name=name)


def bench_trace(nodes: int, seed: int, load: float) -> Trace:
    """The paper's cloud setting: its VM catalog, J = 10 N, exponential arrivals."""
    trace = generate_trace(n_nodes=nodes, cloud=True, arrival="exponential", seed=seed)
    return scale_load(trace, load)


# -- trace -> the C++ program's input files ---------------------------------------------

def setups(job: Job, catalog: Iterable[CatalogEntry]) -> Iterator[tuple[CatalogEntry, int, float]]:
    """(VM, GPUs used, whole-job seconds) for every way the C++ may run ``job``."""
    for entry in catalog:
        per_epoch = job.epoch_time_s.get(entry.gpu_type, ())
        for g in range(1, min(entry.gpus, len(per_epoch)) + 1):
            yield entry, g, job.epochs * per_epoch[g - 1]


def _plain(value: str, what: str) -> str:
    """The C++ splits on commas and never unquotes: refuse what it would misread."""
    if not value or any(c in value for c in ',"\n\r'):
        raise ValueError(f"{what} {value!r} cannot be written to the C++ CSV input")
    return value


def write_inputs(trace: Trace, folder: Path) -> None:
    """The three CSV files the C++ reads from its result folder's parent."""
    if not trace.cloud:
        raise ValueError(f"trace {trace.name}: the published code models cloud VMs only")
    folder.mkdir(parents=True, exist_ok=True)
    jobs = sorted(trace.jobs, key=lambda j: (j.submit_s, j.id))   # the C++ pops in file order
    job_lines, time_lines = [JOBS_HEADER], [TIMES_HEADER]
    for job in jobs:
        options = list(setups(job, trace.catalog))
        if not options:
            raise ValueError(f"job {job.id}: no epoch time for any VM of the catalog")
        seconds = [s for _, _, s in options]
        app = _plain(job.app or "app", "application")
        job_lines.append(",".join([app, "0", str(job.epochs), "0", app, _plain(job.id, "job id"),
                                   repr(job.submit_s), repr(job.due_s), repr(job.weight),
                                   repr(min(seconds)), repr(max(seconds))]))
        for entry, g, s in options:
            time_lines.append(",".join([job.id, _plain(entry.name, "VM type"),
                                        _plain(entry.gpu_type, "GPU type"), str(g),
                                        str(entry.gpus), repr(entry.cost_per_hour), repr(s)]))
    node_lines = ["Nodes", *(_plain(n.name, "node") for n in trace.nodes)]
    for name, lines in ((JOBS_FILE, job_lines), (TIMES_FILE, time_lines),
                        (NODES_FILE, node_lines)):
        (folder / name).write_text("\n".join(lines) + "\n")


# -- the C++ program's outputs -> figures -----------------------------------------------

@dataclasses.dataclass(frozen=True)
class ScheduleTotals:
    """What the C++ schedule dump says about a whole run."""

    vm_cost: float
    tardiness_cost: float
    late_jobs: int
    completed: int
    decisions: int

    @property
    def total_cost(self) -> float:
        return self.vm_cost + self.tardiness_cost


def parse_schedule(lines: Iterable[str]) -> ScheduleTotals:
    """Sums the per-slot rows of ``<Method>_schedule*.csv`` (one row per job and slot)."""
    vm = tardy = 0.0
    late: set[str] = set()
    done: set[str] = set()
    decisions = 0
    for row in csv.DictReader(lines):
        vm += float(row["VMcost"])
        tardy += float(row["TardinessCost"])
        decisions = max(decisions, int(row["n_iterate"]))
        if float(row["CompletionPercent"]) >= DONE_PERCENT:
            done.add(row["UniqueJobsID"])
            if float(row["Tardiness"]) > 0:
                late.add(row["UniqueJobsID"])
    return ScheduleTotals(vm_cost=vm, tardiness_cost=tardy, late_jobs=len(late),
                          completed=len(done), decisions=decisions)


Slot = list[tuple[str, str, str, int]]     # (job, node, VM type, GPUs) of one decision


def schedule_slots(lines: Iterable[str]) -> dict[int, Slot]:
    """Where the C++ placed every job at each decision (1-based, as its ``n_iterate``)."""
    slots: dict[int, Slot] = {}
    for row in csv.DictReader(lines):
        if row["Nodes"]:
            slots.setdefault(int(row["n_iterate"]), []).append(
                (row["UniqueJobsID"], row["Nodes"], row["VMType"], int(row["GpuNumber"])))
    return slots


def decision_seconds(iter_marks: list[float]) -> tuple[int, float]:
    """(decisions, mean seconds) from the times its ``ITER`` lines appeared.

    Every pass of the event loop prints one; the last pass only finds that nothing is
    left, so K + 1 marks frame K decisions.
    """
    if len(iter_marks) < 2:
        return 0, math.nan
    k = len(iter_marks) - 1
    return k, (iter_marks[-1] - iter_marks[0]) / k


def schedule_file(method: str, seed: int) -> str:
    """Where the C++ writes its schedule (random methods carry their seed)."""
    return f"{method}_schedule_{seed}.csv" if method in RANDOM_METHODS else f"{method}_schedule.csv"


# -- checkout and build -----------------------------------------------------------------

class Unavailable(Exception):
    """No checkout of the published code could be found or built (one-line message)."""


def locate_checkout(arg: Path | None) -> Path:
    """--published, else $ANDREAS_PUBLISHED_DIR, else an extract of the local mirror."""
    where = arg or (Path(os.environ[ENV_DIR]) if os.environ.get(ENV_DIR) else None)
    if where is None and (MIRROR / "HEAD").exists():
        where = _extract_mirror()
    if where is None:
        raise Unavailable(f"no checkout of the published code: git clone {UPSTREAM} DIR, then "
                          f"pass --published DIR or set {ENV_DIR}=DIR")
    if not (where / "src" / "main.cpp").is_file() or not (where / "build" / "Makefile").is_file():
        raise Unavailable(f"{where}: not a GPUScheduler checkout (no src/main.cpp or "
                          f"build/Makefile); git clone {UPSTREAM}")
    return where.resolve()


def _extract_mirror() -> Path:
    git = ["git", f"--git-dir={MIRROR}"]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    dest = SCRATCH / f"checkout-{commit[:12]}"
    if not (dest / "src" / "main.cpp").is_file():
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run([*git, "archive", "HEAD"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        tmp.rename(dest)
    return dest


def source_digest(checkout: Path) -> str:
    """Content hash of what the build reads: a changed source means a new build folder."""
    h = hashlib.sha256()
    for rel in SOURCES:
        path = checkout / rel
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(checkout)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def build(checkout: Path) -> tuple[Path, bool]:
    """Its Makefile in a scratch copy under out/published; (binary, whether built now)."""
    if shutil.which("make") is None or shutil.which("g++") is None:
        raise Unavailable("no C++ toolchain: apt-get install -y build-essential")
    folder = SCRATCH / f"build-{source_digest(checkout)}"
    binary = folder / "build" / "main"
    if binary.is_file():
        return binary, False
    shutil.rmtree(folder, ignore_errors=True)
    for rel in SOURCES:
        src, dst = checkout / rel, folder / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    done = subprocess.run(["make", f"FOLDER={folder / 'build'}", "SSYS=true"], cwd=folder,
                          capture_output=True, text=True)
    if done.returncode != 0 or not binary.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Unavailable(f"make in {folder} failed: {tail[0]}")
    return binary, True


def compiler_version() -> str:
    out = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "?"


# -- runs (in worker processes) ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Task:
    kind: str            # "cpp" or "andreas"
    method: str          # C++ method or andreas policy
    nodes: int
    seed: int
    load: float
    run_seed: int
    iterations: int
    binary: str = ""
    data_dir: str = ""
    keep: bool = False
    revisit: bool = True

    @property
    def weight(self) -> float:
        """Rough cost, to start the longest runs first."""
        heavy = self.method in RANDOM_METHODS or self.method in RANDOM_POLICIES
        return (self.nodes ** 2) * self.load * (self.iterations if heavy else 1)


def run_task(task: Task) -> dict[str, Any]:
    common = {"kind": task.kind, "method": task.method, "nodes": task.nodes, "seed": task.seed,
              "load": task.load}
    try:
        out = run_cpp(task) if task.kind == "cpp" else run_andreas(task)
    except Exception as exc:  # noqa: BLE001 - one failed run must not lose the others
        out = {"error": f"{type(exc).__name__}: {exc}"}
    return {**common, **out}


def run_cpp(task: Task) -> dict[str, Any]:
    folder = Path(task.data_dir) / f"res-{task.method}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cmd = [task.binary, f"method={task.method}", f"folder={folder}", "verbose=0"]
    if task.method in RANDOM_METHODS:
        cmd += [f"seed={task.run_seed}", f"iter={task.iterations}"]
    marks, wall, cpu = _execute(cmd, folder)
    sched = folder / schedule_file(task.method, task.run_seed)
    with sched.open(newline="") as f:
        totals = parse_schedule(f)
    with sched.open(newline="") as f:
        replayed, why = replay_cost(bench_trace(task.nodes, task.seed, task.load),
                                    schedule_slots(f))
    if not task.keep:
        sched.unlink()
    decisions, per_decision = decision_seconds(marks)
    return {"total_cost": totals.total_cost, "vm_cost": totals.vm_cost,
            "tardiness_cost": totals.tardiness_cost, "late_jobs": totals.late_jobs,
            "completed": totals.completed, "decisions": decisions,
            "schedule_slots": totals.decisions, "replay_cost": replayed,
            "replay_diff": None if replayed is None else replayed - totals.total_cost,
            "replay_error": why,
            "wall_s_per_decision": per_decision,
            "cpu_s_per_decision": cpu / max(1, decisions), "wall_s": wall, "cpu_s": cpu,
            "command": " ".join(cmd)}


def _execute(cmd: list[str], folder: Path) -> tuple[list[float], float, float]:
    """Runs the C++ once: when each ``ITER`` line appeared, wall seconds, CPU seconds."""
    marks: list[float] = []
    tail: list[str] = []
    before = _children_cpu_s()
    start = time.perf_counter()
    with subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(ITER_MARK):
                marks.append(time.perf_counter())
            elif line.strip():
                tail = [*tail[-4:], line.strip()]
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {' | '.join(tail)}")
    return marks, wall, _children_cpu_s() - before


class ReplayDiverged(Exception):
    """The C++ placed a job andreas' simulator does not hold at that decision."""


class _Replay:
    """A policy that answers decision k with the C++ program's slot k."""

    def __init__(self, slots: dict[int, Slot]) -> None:
        self.slots, self.k = slots, 0

    def __call__(self, snapshot: Snapshot, rng: Any, policy: str, **_: Any) -> Plan:
        self.k += 1
        ids = {j.id for j in snapshot.jobs}
        placed = self.slots.get(self.k, [])
        missing = [job for job, *_ in placed if job not in ids]
        if missing:
            raise ReplayDiverged(f"decision {self.k} at t={snapshot.now_s:.1f}: the C++ places "
                                 f"{', '.join(missing[:3])}, which andreas does not hold")
        configs = {node: vm for _, node, vm, _ in placed}
        done = {job for job, *_ in placed}
        return Plan(policy="replay", assignments=tuple(
                        Assignment(job=job, node=node, gpus=g) for job, node, _, g in placed),
                    postponed=tuple(sorted(ids - done)), objective=0.0, objective_name="f_obj",
                    node_configs=configs)


def replay_cost(trace: Trace, slots: dict[int, Slot]) -> tuple[float | None, str | None]:
    """What andreas' simulator bills for the C++ program's own decisions, or why it cannot.

    The C++ decisions replace andreas' policy (``engine.decide``, in this worker process
    only), so a difference here is the simulators' accounting, not the policies'.
    """
    original = engine.decide
    engine.decide = _Replay(slots)
    try:
        return simulate(trace, "edf", SimOptions(period_s=0, progress="exact")).total_cost, None
    except (ReplayDiverged, AndreasError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        engine.decide = original


def _children_cpu_s() -> float:
    """CPU seconds of this worker's finished children (one C++ run at a time)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_andreas(task: Task) -> dict[str, Any]:
    trace = bench_trace(task.nodes, task.seed, task.load)
    iterations = task.iterations if task.method in RANDOM_POLICIES else None
    cpu = time.process_time()
    r = simulate(trace, task.method, SimOptions(period_s=0, progress="exact",
                                                seed=task.run_seed, iterations=iterations,
                                                revisit=task.revisit))
    cpu = time.process_time() - cpu
    calls = max(1, r.optimizer_calls)
    return {"total_cost": r.total_cost, "vm_cost": r.energy_cost,
            "tardiness_cost": r.tardiness_cost, "late_jobs": r.late_jobs,
            "completed": len(r.jobs), "decisions": r.optimizer_calls, "revisits": r.revisits,
            "wall_s_per_decision": r.wall_s / calls, "cpu_s_per_decision": cpu / calls,
            "optimizer_mean_s": r.optimizer_mean_s, "wall_s": r.wall_s, "cpu_s": cpu}


# -- tables -----------------------------------------------------------------------------

Key = tuple[int, int, float]


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b) else a / b


def _get(runs: dict, key: Key, kind: str, method: str, field: str) -> Any:
    run = runs.get((*key, kind, method))
    return None if run is None or "error" in run else run.get(field)


def summary_row(runs: dict, key: Key) -> dict[str, Any]:
    """The main table's figures for one (trace, load)."""
    def cpp(m: str, f: str) -> Any:
        return _get(runs, key, "cpp", m, f)

    def ours(p: str, f: str) -> Any:
        return _get(runs, key, "andreas", p, f)

    edf_c, edf_a = cpp("EDF", "total_cost"), ours("edf", "total_cost")
    rg_c = cpp("RandomGreedy", "total_cost")
    bound = cloud_lower_bound(bench_trace(*key))
    replays = [cpp(m, "replay_diff") for m in PAIRS if cpp(m, "total_cost") is not None]
    return {
        "nodes": key[0], "seed": key[1], "load": key[2],
        "edf_cpp": edf_c, "edf_andreas": edf_a,
        "edf_diff": None if edf_c is None or edf_a is None else edf_a - edf_c,
        "rg_cpp": rg_c, "pr_cpp": cpp("PathRelinking", "total_cost"),
        "rg_andreas": ours("rg", "total_cost"), "pr_andreas": ours("pr", "total_cost"),
        "rg_over_RG": _ratio(ours("rg", "total_cost"), rg_c),
        "pr_over_RG": _ratio(ours("pr", "total_cost"), rg_c),
        "bound": bound, "bound_over_RG": _ratio(bound, rg_c),
        "rg_over_bound": _ratio(ours("rg", "total_cost"), bound),
        "pr_over_bound": _ratio(ours("pr", "total_cost"), bound),
        "late": {"EDF": cpp("EDF", "late_jobs"), "edf": ours("edf", "late_jobs"),
                 "RandomGreedy": cpp("RandomGreedy", "late_jobs"),
                 "PathRelinking": cpp("PathRelinking", "late_jobs"),
                 "rg": ours("rg", "late_jobs"), "pr": ours("pr", "late_jobs")},
        "cpu_s_per_decision": {m: (cpp if m in RANDOM_METHODS else ours)(m, "cpu_s_per_decision")
                               for m in (*RANDOM_METHODS, *RANDOM_POLICIES)},
        "replay_max_abs_diff": max((abs(d) for d in replays if d is not None), default=None),
        "replay_failed": sum(d is None for d in replays),
        "time_ratio_rg": _ratio(ours("rg", "cpu_s_per_decision"),
                                cpp("RandomGreedy", "cpu_s_per_decision")),
        "time_ratio_pr": _ratio(ours("pr", "cpu_s_per_decision"),
                                cpp("PathRelinking", "cpu_s_per_decision")),
    }


def _f(value: Any, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def _mark(value: float | None, target: float) -> str:
    return "  " if value is None else (" ok" if value <= target else " NO")


def _late(*values: Any) -> str:
    return "/".join("-" if v is None else str(v) for v in values)


def print_detail(runs: dict, keys: list[Key]) -> None:
    """Every C++ method beside its andreas counterpart: cost, late jobs, decisions, time.

    replay: what andreas' simulator bills for the C++ decisions minus what the C++ bills;
    cpu/dec: CPU seconds of the whole run per decision; wall/dec: wall seconds of the
    event loop per decision; decide: andreas' policy alone (``optimizer_mean_s``, wall).
    """
    print(f"{'N':>3} {'seed':>4} {'load':>4}  {'C++ method':<13} {'cost C++':>10} "
          f"{'andreas':>7} {'cost':>10} {'ratio':>6} {'late':>7} {'decisions':>9} {'replay':>7} "
          f"{'cpu/dec C++':>11} {'andreas':>8} {'wall/dec C++':>12} {'andreas':>8} "
          f"{'decide':>8}")
    for key in keys:
        for method, policy in PAIRS.items():
            c = runs.get((*key, "cpp", method), {})
            a = runs.get((*key, "andreas", policy), {})
            for run, who in ((c, method), (a, policy)):
                for field in ("error", "replay_error"):
                    if run.get(field):
                        print(f"    {who}: {run[field]}")
            print(f"{key[0]:>3} {key[1]:>4} {key[2]:>4g}  {method:<13} "
                  f"{_f(c.get('total_cost'), '.2f', 10)} {policy:>7} "
                  f"{_f(a.get('total_cost'), '.2f', 10)} "
                  f"{_f(_ratio(a.get('total_cost'), c.get('total_cost')), '.3f', 6)} "
                  f"{_late(c.get('late_jobs'), a.get('late_jobs')):>7} "
                  f"{_late(c.get('decisions'), a.get('decisions')):>9} "
                  f"{_f(c.get('replay_diff'), '.3f', 7)} "
                  f"{_f(c.get('cpu_s_per_decision'), '.4f', 11)} "
                  f"{_f(a.get('cpu_s_per_decision'), '.4f', 8)} "
                  f"{_f(c.get('wall_s_per_decision'), '.4f', 12)} "
                  f"{_f(a.get('wall_s_per_decision'), '.4f', 8)} "
                  f"{_f(a.get('optimizer_mean_s'), '.4f', 8)}")


def print_summary(rows: list[dict]) -> None:
    """The main table: EDF agreement, rg and pr against RandomGreedy, late jobs, time."""
    print(f"targets: rg/RG <= {TARGET_RG:.2f}, pr/RG <= {TARGET_PR:.2f}, andreas CPU s per "
          f"decision <= C++'s (ratio <= {TARGET_TIME:.2f}); RG = C++ RandomGreedy, PR = C++ "
          "PathRelinking")
    print("bound: andreas.simulator.bounds.cloud_lower_bound, below any schedule's bill (every "
          "rented GPU busy, configurations mixed freely, no capacity limit); pr/RG <= "
          f"{TARGET_PR:.2f} asks pr to be within {TARGET_PR:.2f} / (bound/RG) - 1 of it")
    print(f"{'N':>3} {'seed':>4} {'load':>4} {'EDF C++':>10} {'EDF ours':>10} {'diff':>7} "
          f"{'RG C++':>10} {'rg/RG':>9} {'pr/RG':>9} {'bound/RG':>8} {'pr/bound':>8} "
          f"{'late EDF':>8} {'late RG/PR/rg/pr':>16} "
          f"{'cpu/d RG':>8} {'rg':>7} {'ratio':>9} {'PR':>7} {'pr':>7} {'ratio':>9} "
          f"{'replay':>7}")
    for r in rows:
        late, sec = r["late"], r["cpu_s_per_decision"]
        print(f"{r['nodes']:>3} {r['seed']:>4} {r['load']:>4g} {_f(r['edf_cpp'], '.2f', 10)} "
              f"{_f(r['edf_andreas'], '.2f', 10)} {_f(r['edf_diff'], '.2f', 7)} "
              f"{_f(r['rg_cpp'], '.2f', 10)} "
              f"{_f(r['rg_over_RG'], '.3f', 6)}{_mark(r['rg_over_RG'], TARGET_RG)} "
              f"{_f(r['pr_over_RG'], '.3f', 6)}{_mark(r['pr_over_RG'], TARGET_PR)} "
              f"{_f(r['bound_over_RG'], '.3f', 8)} {_f(r['pr_over_bound'], '.3f', 8)} "
              f"{_late(late['EDF'], late['edf']):>8} "
              f"{_late(late['RandomGreedy'], late['PathRelinking'], late['rg'], late['pr']):>16} "
              f"{_f(sec['RandomGreedy'], '.4f', 8)} {_f(sec['rg'], '.4f', 7)} "
              f"{_f(r['time_ratio_rg'], '.2f', 6)}{_mark(r['time_ratio_rg'], TARGET_TIME)} "
              f"{_f(sec['PathRelinking'], '.4f', 7)} {_f(sec['pr'], '.4f', 7)} "
              f"{_f(r['time_ratio_pr'], '.2f', 6)}{_mark(r['time_ratio_pr'], TARGET_TIME)} "
              f"{_replay(r):>7}")


def _replay(row: dict) -> str:
    """Largest |andreas-billed minus C++-billed| over the replayed C++ runs of a row."""
    if row["replay_failed"]:
        return f"{row['replay_failed']} div"
    return _f(row["replay_max_abs_diff"], ".3f", 0)


def geometric_mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def print_totals(rows: list[dict]) -> dict[str, Any]:
    """Geometric means over the rows and how many rows meet each target."""
    out: dict[str, Any] = {}
    for name, target in (("rg_over_RG", TARGET_RG), ("pr_over_RG", TARGET_PR),
                         ("time_ratio_rg", TARGET_TIME), ("time_ratio_pr", TARGET_TIME)):
        vals = [r[name] for r in rows if r[name] is not None]
        out[name] = {"geomean": geometric_mean(vals), "target": target,
                     "rows_meeting": sum(v <= target for v in vals), "rows": len(vals)}
    for name in ("bound_over_RG", "rg_over_bound", "pr_over_bound"):
        out[name] = geometric_mean(r[name] for r in rows)
    diffs = [abs(r["edf_diff"]) for r in rows if r["edf_diff"] is not None]
    rel = [abs(r["edf_diff"]) / r["edf_cpp"] for r in rows
           if r["edf_diff"] is not None and r["edf_cpp"]]
    out["edf_max_abs_diff"] = max(diffs, default=None)
    replays = [r["replay_max_abs_diff"] for r in rows if r["replay_max_abs_diff"] is not None]
    out["replay_max_abs_diff"] = max(replays, default=None)
    out["replay_failed"] = sum(r["replay_failed"] for r in rows)
    out["edf_max_rel_diff"] = max(rel, default=None)
    parts = [f"{k} geomean {_f(v['geomean'], '.3f', 0)} ({v['rows_meeting']}/{v['rows']} rows "
             f"<= {v['target']:.2f})" for k, v in out.items() if isinstance(v, dict)]
    print("summary: " + "; ".join(parts))
    print(f"lower bound: bound/RG geomean {_f(out['bound_over_RG'], '.3f', 0)}, rg/bound "
          f"{_f(out['rg_over_bound'], '.3f', 0)}, pr/bound {_f(out['pr_over_bound'], '.3f', 0)}")
    print(f"EDF C++ vs andreas: max |diff| {_f(out['edf_max_abs_diff'], '.4f', 0)} $, "
          f"max relative {_f(out['edf_max_rel_diff'], '.2e', 0)}; C++ decisions replayed in "
          f"andreas' simulator: max |diff| {_f(out['replay_max_abs_diff'], '.4f', 0)} $, "
          f"{out['replay_failed']} diverged")
    return out


# -- main -------------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    values = [float(x) for x in text.split(",") if x.strip()]
    if any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"load factors must be > 0, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", type=Path, default=None,
                    help=f"GPUScheduler checkout (default: ${ENV_DIR}, else the local mirror)")
    ap.add_argument("--nodes", type=_ints, default=[10, 20, 30, 40, 50], help="N values")
    ap.add_argument("--seeds", type=int, default=1, help="trace seeds 1..K (default 1)")
    ap.add_argument("--load", type=_floats, default=[1.0, 1.5, 3.0],
                    help="offered-load factors: submissions / F, slack kept (default 1,1.5,3)")
    ap.add_argument("--iterations", type=int, default=1000,
                    help="MaxIt of rg/pr and the C++ iter= (default 1000, the paper's)")
    ap.add_argument("--run-seed", type=int, default=0,
                    help="seed of the C++ random methods and of andreas' simulations")
    ap.add_argument("--workers", type=int, default=2, help="parallel runs (default 2)")
    ap.add_argument("--quick", action="store_true", help="N = 10,20 and one seed")
    ap.add_argument("--keep", action="store_true",
                    help="keep the C++ schedule dumps under out/published/runs")
    ap.add_argument("--json", type=Path, help="write every run and the table here")
    ap.add_argument("--no-revisit", dest="revisit", action="store_false",
                    help="andreas decides only at submissions and completions, as the C++ "
                         "simulator (default: also at each plan's revisit time)")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.seeds = [10, 20], 1
    return args


def prepare(args: argparse.Namespace, binary: Path) -> tuple[list[Key], list[Task]]:
    """Writes every (trace, load)'s input files; one task per C++ method and policy."""
    keys: list[Key] = []
    tasks: list[Task] = []
    for nodes in args.nodes:
        for seed in range(1, args.seeds + 1):
            for load in args.load:
                trace = bench_trace(nodes, seed, load)
                data = SCRATCH / "runs" / trace.name
                write_inputs(trace, data)
                keys.append((nodes, seed, load))
                common = dict(nodes=nodes, seed=seed, load=load, run_seed=args.run_seed,
                              iterations=args.iterations)
                tasks += [Task(kind="cpp", method=m, binary=str(binary), data_dir=str(data),
                               keep=args.keep, **common) for m in PAIRS]
                tasks += [Task(kind="andreas", method=p, revisit=args.revisit, **common)
                          for p in PAIRS.values()]
    return keys, sorted(tasks, key=lambda t: -t.weight)


def run_all(tasks: list[Task], workers: int) -> dict:
    runs: dict = {}
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(run_task, t) for t in tasks]
        for i, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            runs[(r["nodes"], r["seed"], r["load"], r["kind"], r["method"])] = r
            what = r.get("error") or (f"cost {r['total_cost']:.2f}, {r['decisions']} decisions, "
                                      f"{r['wall_s']:.1f} s")
            print(f"[{i}/{len(tasks)}] N={r['nodes']} seed={r['seed']} load={r['load']:g} "
                  f"{r['kind']} {r['method']}: {what}", file=sys.stderr, flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        checkout = locate_checkout(args.published)
        start = time.perf_counter()
        binary, built = build(checkout)
    except (Unavailable, subprocess.CalledProcessError) as exc:
        print(f"bench_published: {exc}", file=sys.stderr)
        return 2
    print(f"published code: {checkout}; binary {binary} "
          f"({'built in %.0f s' % (time.perf_counter() - start) if built else 'up to date'}; "
          f"{compiler_version()})")
    print(f"C++ knobs: iter={args.iterations} (MaxIt_RG), MaxIt_PR = N, elite pool 1 (K = 10 "
          f"declared, shadowed), alpha 0.05, seed={args.run_seed}; andreas: SimOptions(period_s=0, "
          f"progress='exact', seed={args.run_seed}, revisit={args.revisit}), "
          f"iterations={args.iterations}")
    keys, tasks = prepare(args, binary)
    for policy in PAIRS.values():   # import now: forked workers all run this one version
        get_policy(policy)
    wall = time.perf_counter()
    runs = run_all(tasks, args.workers)
    wall = time.perf_counter() - wall
    print()
    print_detail(runs, keys)
    print()
    rows = [summary_row(runs, k) for k in keys]
    print_summary(rows)
    totals = print_totals(rows)
    print(f"{len(tasks)} runs with {args.workers} workers in {wall:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"checkout": str(checkout), "binary": str(binary), "compiler": compiler_version(),
                "nodes": args.nodes, "seeds": args.seeds, "loads": args.load,
                "iterations": args.iterations, "run_seed": args.run_seed,
                "workers": args.workers, "revisit": args.revisit, "wall_s": wall}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows, "summary": totals,
                                         "runs": list(runs.values())}, indent=1))
    return 0 if all("error" not in r for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
