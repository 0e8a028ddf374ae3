"""Automatic profiling: a job of an application nobody measured runs on a profiling node
before any policy plans it (ANDREAS' Job Profiler in the loop).

A waiting job (whole GPUs) *needs profiling* on a GPU type when a profiling node of that
type is up and the estimator has nothing for (application, type) but the
``unprofiled_epoch_s`` guess (no measured epochs, profiler rows, model or ``profiles/``
entry). Then, per application and type, one *leader* job (the one already profiling, else
the oldest waiting one) runs on the profiling node (the one of the type with most usable
GPUs) once per GPU count g = 1 .. min(usable GPUs, the leader's ``max_gpus``), each run an
attempt of the job itself (``job_attempts.profiling``), so it checkpoints and resumes: no
epoch is lost and its epoch history stays one. A run stops (SIGTERM, checkpoint, exit 143)
once ``[profiler] epochs`` epochs of it are stored by the node agent; the job stays
``profiling`` between runs. When every g is measured, the same summary and fit as ``andreas
profile`` (the first epoch of a run with >= 3 dropped as warm-up, the median of the rest
per g, Amdahl's law over all kept epochs) are written as ``app_profiles`` / ``app_models``
rows (source ``profiler``) and the job goes ``profiling -> preempted``: the optimizer plans
it with measured estimates, from its checkpoint. Other jobs of the application wait for
this one run (``held``, with the reason the plan shows).

Power limits: when the profiling node can set GPU power limits (its agent
reported them, ``nodes.power_caps``) and ``profiles/power_limits.toml`` names levels for
its type, the GPU-count runs are followed by one short run per level below the default,
on one GPU at that limit (the attempt carries it; the node's agent has ``andreas-powerd``
set it), ``epochs`` epochs each: Zeus' just-in-time profiling, one level per window. The
level's time factor is its epochs' median over the one-GPU default run's, its power the
mean of the GPU's samples taken at that limit; the points are made monotone and the
levels not measured fitted (``andreas.powerfit``), stored as ``app_levels`` rows, which
the manager plans with (``andreas.manager.levels``).

A run that fails (a non-zero exit, its node unreachable, its container vanished, or more
than ``timeout_s`` without its epochs) ends the profiling of that application: its jobs
are planned as before, on the guess, and the reason says why (:attr:`Review.guesses`).
Everything here is derived from the store at each review, so a manager restarted midway
carries on where the last one stopped.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from andreas.config import ProfilerSettings
from andreas.limits import REASON_CHARS
from andreas.manager.estimates import EpochEstimate, Estimator
from andreas.manager.state import StoreState
from andreas.profiler.fit import fit_amdahl, prior_serial_fraction
from andreas.profiler.store import write_model
from andreas.store.engine import Session
from andreas.store.epochs import ProfilingRun, profiling_runs
from andreas.store.errors import TransitionConflict
from andreas.store.jobs import WAITING, record, transition
from andreas.store.models import JobState, NodeState
from andreas.store.profiles import WARMUP_MIN_EPOCHS, ProfileSource, upsert_profiles
from andreas.store.read import JobView, NodeView

log = logging.getLogger("andreas.manager")

GUESS = "unprofiled"               # the estimator's source tag of the guess


@dataclass(frozen=True, kw_only=True)
class Step:
    """A profiling run: the job on ``gpus`` GPUs of the profiling ``node``."""

    job: str
    node: str
    gpus: int
    reason: str
    power_limit_w: float | None = None    # a level run: the GPU's limit (None: default)


@dataclass(frozen=True, kw_only=True)
class Review:
    """What the profiling wants now: runs to start (``starts``) or running (``running``),
    runs to stop (job -> why), waiting jobs held back (job -> why), applications planned on
    the guess because their profiling failed (app -> why), and whether the review wrote
    (a fit, a state) so that the manager reschedules."""

    starts: Mapping[str, Step] = field(default_factory=dict)
    running: Mapping[str, Step] = field(default_factory=dict)
    stops: Mapping[str, str] = field(default_factory=dict)
    held: Mapping[str, str] = field(default_factory=dict)
    guesses: Mapping[str, str] = field(default_factory=dict)
    changed: bool = False

    @property
    def steps(self) -> dict[str, Step]:
        return {**self.running, **self.starts}


@dataclass(frozen=True, kw_only=True)
class _Scene:
    """What one review reads once for all applications."""

    state: StoreState
    candidates: list[JobView]
    apps: list[str]
    ready: dict[str, NodeView]             # GPU type -> the profiling node that can run
    waiting_types: dict[str, NodeView]     # GPU type -> a profiling node not ready yet
    types: dict[str, int]                  # GPU type -> GPUs of its profiling node
    tables: Mapping[tuple[str, str], tuple[EpochEstimate, ...]]   # (app, type) -> g = 1..
    runs: dict[tuple[str, str], list[ProfilingRun]]
    prior: dict[str, float]


@dataclass(kw_only=True)
class _Wants:
    """A review's answer while it is gathered, application by application."""

    starts: dict[str, Step] = field(default_factory=dict)
    running: dict[str, Step] = field(default_factory=dict)
    stops: dict[str, str] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    guesses: dict[str, str] = field(default_factory=dict)
    changed: bool = False

    def review(self) -> Review:
        return Review(starts=self.starts, running=self.running, stops=self.stops,
                      held=self.held, guesses=self.guesses, changed=self.changed)


def summarise(epoch_s: tuple[float, ...]) -> tuple[float, ...]:
    """The epochs a run keeps: all but the first (warm-up) when it has enough
    (``WARMUP_MIN_EPOCHS``), as ``andreas profile`` and the production refit do."""
    return epoch_s[1:] if len(epoch_s) >= WARMUP_MIN_EPOCHS else epoch_s


def _failure(run: ProfilingRun, settings: ProfilerSettings, now_s: float) -> str | None:
    """Why a run failed, or None (running, stopped on request, or completed)."""
    if run.start_s is not None and len(run.epoch_s) < settings.epochs:
        end = run.end_s if run.end_s is not None else now_s
        if end - run.start_s > settings.timeout_s:
            return (f"timeout: {len(run.epoch_s)} of {settings.epochs} epochs in "
                    f"{settings.timeout_s:g} s at {run.gpus} GPU(s)")
    if run.end_s is None or run.exit_code == 0 or run.stop_requested_s is not None:
        return None
    return run.reason or (f"exit {run.exit_code}" if run.exit_code is not None else "ended")


class Profiling:
    """Reviews the profiling at every manager tick (module docstring)."""

    def __init__(self, settings: ProfilerSettings, estimator: Estimator) -> None:
        self.settings = settings
        self.estimator = estimator
        self._logged: dict[str, str] = {}
        # (application, GPU type) -> the epochs of its last fit; forgotten when a review's
        # transaction fails (the fit may not have been stored)
        self._fitted: dict[tuple[str, str], tuple[tuple[int, tuple[float, ...]], ...]] = {}

    def forget(self) -> None:
        """A review's writes were rolled back: fit again next time."""
        self._fitted.clear()

    def _once(self, key: str, message: str) -> None:
        if self._logged.get(key) != message:
            self._logged[key] = message
            log.warning("%s", message)

    def review(self, s: Session, state: StoreState, now_s: float, *,
               unreachable: Collection[str] = ()) -> Review:
        """The profiling's wants (module docstring); writes fits and state changes in
        ``s`` (the caller's transaction)."""
        flagged = [n for n in state.nodes.values() if n.profiling]
        if not flagged:
            # no profiling node (any more): a job left profiling goes back to the queue
            stops: dict[str, str] = {}
            stuck = [j for j in state.jobs.values() if j.state is JobState.PROFILING]
            changed = self._finish(s, stuck, stops, now_s,
                                   reason="profiling ended: no profiling node any more; "
                                          "estimates are a guess") if stuck else False
            return Review(stops=stops, changed=changed)
        candidates = [j for j in state.jobs.values() if j.gpu_milli is None
                      and (j.state in WAITING or j.state is JobState.PROFILING)]
        if not candidates:
            return Review()
        scene = self._scene(s, state, flagged, candidates, unreachable)
        wants = _Wants()
        for app in scene.apps:
            self._review_app(s, scene, app, wants, now_s)
        return wants.review()

    def _scene(self, s: Session, state: StoreState, flagged: list[NodeView],
               candidates: list[JobView], unreachable: Collection[str]) -> _Scene:
        """The profiling nodes (ready or waiting per GPU type) and what the store holds
        of the candidates' applications."""
        ready: dict[str, NodeView] = {}
        waiting_types: dict[str, NodeView] = {}
        for n in sorted(flagged, key=lambda n: n.name):
            if n.state is NodeState.UP and n.name not in unreachable and n.usable:
                best = ready.get(n.gpu_type)
                if best is None or len(n.usable) > len(best.usable):
                    ready[n.gpu_type] = n
            else:
                waiting_types.setdefault(n.gpu_type, n)
        apps = sorted({j.application for j in candidates})
        types = {t: len(n.usable) for t, n in ready.items()}
        types.update({t: max(len(n.usable), 1) for t, n in waiting_types.items()
                      if t not in types})
        tables = self.estimator.epoch_tables(s, apps, types)
        runs: dict[tuple[str, str], list[ProfilingRun]] = {}
        for r in profiling_runs(s, apps):
            if r.gpu_type is not None:
                runs.setdefault((r.application, r.gpu_type), []).append(r)
        return _Scene(state=state, candidates=candidates, apps=apps, ready=ready,
                      waiting_types=waiting_types, types=types, tables=tables, runs=runs,
                      prior={name: app.serial_fraction
                             for name, app in self.estimator.profiles.apps.items()})

    def _review_app(self, s: Session, scene: _Scene, app: str, wants: _Wants,
                    now_s: float) -> None:
        """One application: blocked (failed, or no ready node), fitted, or its next run."""
        state, runs = scene.state, scene.runs
        jobs = sorted((j for j in scene.candidates if j.application == app),
                      key=lambda j: (j.state is not JobState.PROFILING, j.submit_s, j.id))
        # a type is unknown while it has only the guess, or while a job of the
        # application is profiling on it (its first runs' epochs already count as
        # measured, but the profiling goes on until every g is measured)
        busy = {t for (a, t), rs in runs.items() if a == app
                for r in rs if state.jobs.get(r.job_id) is not None
                and state.jobs[r.job_id].state is JobState.PROFILING}
        unknown = [t for t in sorted(scene.types) if t in busy
                   or ((est := scene.tables.get((app, t))) and all(e.source == GUESS
                                                                    for e in est))]
        failed = next(((t, r, why) for t in unknown for r in runs.get((app, t), ())
                       if (why := _failure(r, self.settings, now_s)) is not None), None)
        now_ready = [t for t in unknown if t in scene.ready]
        if failed is not None or not now_ready:
            self._blocked(s, scene, app, jobs, unknown, failed, wants, now_s)
            return
        gpu_type = now_ready[0]
        node = scene.ready[gpu_type]
        leader = jobs[0]
        cap = leader.max_gpus if leader.max_gpus and leader.max_gpus > 0 else len(node.usable)
        counts = tuple(range(1, min(len(node.usable), cap) + 1))
        mine = runs.get((app, gpu_type), [])
        kept, done, at = self._measured(mine)
        todo = [g for g in counts if g not in done]
        levels = self._levels(s, node, gpu_type) if not todo else ()
        level_todo = [w for w in levels[1:] if not any(
            len(r.epoch_s) >= self.settings.epochs or (r.exit_code == 0 and r.epoch_s)
            for r in at.get(w, ()))]
        if not todo and not level_todo:
            fitted = self._fit(s, app, gpu_type, kept, scene.prior, now_s)
            if fitted and levels:       # once per fit, with the level runs it had
                self._fit_levels(s, app, node, gpu_type, levels, mine, now_s)
            wants.changed |= fitted
            self._finish(s, jobs, wants.stops, now_s, reason=None)
            return
        g, limit = (todo[0], None) if todo else (1, level_todo[0])
        what = (f"profile: application {app} has no profile for {gpu_type}; "
                + (f"{g} GPU(s), run {counts.index(g) + 1} of {len(counts)}" if todo else
                   f"1 GPU at {limit:g} W, power level {levels.index(limit)} of "
                   f"{len(levels) - 1}"))
        self._next_step(leader, node, mine, g, limit, what, wants)
        for j in jobs[1:]:
            if j.state in WAITING:
                wants.held[j.id] = (f"wait: application {app} is being profiled on "
                                    f"{node.name} (job {leader.id})")

    def _blocked(self, s: Session, scene: _Scene, app: str, jobs: list[JobView],
                 unknown: list[str],
                 failed: tuple[str, ProfilingRun, str] | None, wants: _Wants,
                 now_s: float) -> None:
        """An application whose profiling failed (planned on the guess, said on its jobs)
        or waits for its profiling node (its waiting jobs held)."""
        if failed is not None:
            t, r, why = failed
            where = scene.state.nodes_by_id.get(r.node_id) if r.node_id is not None else None
            name = where.name if where is not None else "?"
            guess = (f"profiling on {name} failed ({why}); estimates are a "
                     f"guess ({self.estimator.unprofiled_epoch_s:g} s per epoch)")
            wants.guesses[app] = guess
            self._once(app, f"application {app}: {guess}")
            for j in jobs:          # say why on the jobs themselves (andreas show)
                if j.state in WAITING and j.reason != guess[:REASON_CHARS]:
                    record(s, j.id, reason=guess[:REASON_CHARS])
        elif unknown:
            node = scene.waiting_types[unknown[0]]
            status = (node.state.value if node.state is not NodeState.UP
                      else "unreachable")
            why = (f"wait: application {app} is profiled first, on {node.name}, "
                   f"which is {status}")
            for j in jobs:
                if j.state in WAITING:
                    wants.held[j.id] = why
        wants.changed |= self._finish(s, jobs, wants.stops, now_s,
                                      reason=wants.guesses.get(app))

    def _measured(self, mine: list[ProfilingRun]) -> tuple[
            dict[int, list[float]], set[int], dict[float, list[ProfilingRun]]]:
        """An application's runs on one type: the epochs kept per GPU count, the counts
        finished, and the level runs by limit."""
        kept: dict[int, list[float]] = {}
        done: set[int] = set()
        at: dict[float, list[ProfilingRun]] = {}      # level runs by limit
        for r in mine:
            finished = (len(r.epoch_s) >= self.settings.epochs
                        or (r.exit_code == 0 and bool(r.epoch_s)))
            if r.power_limit_w is not None:
                at.setdefault(r.power_limit_w, []).append(r)
                continue
            kept.setdefault(r.gpus, []).extend(summarise(r.epoch_s))
            if finished:
                done.add(r.gpus)
        return kept, done, at

    def _next_step(self, leader: JobView, node: NodeView, mine: list[ProfilingRun], g: int,
                   limit: float | None, what: str, wants: _Wants) -> None:
        """The leader's run: running (stopped once measured) or to start."""
        open_ = [a for a in leader.open_attempts if a.profiling]
        if leader.state is JobState.PROFILING and open_:
            a = open_[0]
            run = next((r for r in mine if (r.job_id, r.attempt) == (leader.id, a.attempt)),
                       None)
            measured = len(run.epoch_s) if run is not None else 0
            wants.running[leader.id] = Step(job=leader.id, node=node.name,
                                            gpus=len(a.gpu_ids), reason=what,
                                            power_limit_w=run.power_limit_w if run else None)
            if measured >= self.settings.epochs:
                wants.stops[leader.id] = (f"profiled {len(a.gpu_ids)} GPU(s): {measured} "
                                          "epochs measured")
        elif not leader.open_attempts:
            wants.starts[leader.id] = Step(job=leader.id, node=node.name, gpus=g, reason=what,
                                           power_limit_w=limit)

    def _fit(self, s: Session, app: str, gpu_type: str, kept: Mapping[int, list[float]],
             prior: Mapping[str, float], now_s: float) -> bool:
        """The profile and model of (app, type) from the kept epochs (as andreas profile);
        False when these epochs were fitted already (reviews repeat until the run's job
        leaves profiling: one fit, one log line)."""
        signature = tuple((g, tuple(ds)) for g, ds in sorted(kept.items()))
        if self._fitted.get((app, gpu_type)) == signature:
            return False
        self._fitted[(app, gpu_type)] = signature
        points = [(g, d) for g, ds in sorted(kept.items()) for d in ds]
        fit = fit_amdahl([g for g, _ in points], [d for _, d in points],
                         prior_serial_fraction=prior_serial_fraction(prior, app))
        upsert_profiles(s, [dict(application=app, gpu_type=gpu_type, gpus=g,
                                 epoch_time_s=float(statistics.median(ds)),
                                 source=ProfileSource.PROFILER,
                                 samples=len(ds), updated_s=now_s)
                            for g, ds in sorted(kept.items()) if ds])
        write_model(s, app, gpu_type, fit, source=ProfileSource.PROFILER, now_s=now_s)
        error = ("unknown (one GPU count)" if fit.mape is None
                 else f"{100 * fit.mape:.1f}%")
        log.info("profiled application %s on %s: %s; t1 %.3g s, serial fraction %.2f, "
                 "mape %s", app, gpu_type,
                 ", ".join(f"g={g} {statistics.median(ds):.3g} s" for g, ds in
                           sorted(kept.items()) if ds), fit.t1_s, fit.serial_fraction, error)
        return True

    def _levels(self, s: Session, node: NodeView, gpu_type: str) -> tuple[float, ...]:
        """The limits to profile on the node (andreas.manager.levels.profiling_levels)."""
        from andreas.manager.levels import profiling_levels
        from andreas.model import Node

        return profiling_levels(s, Node(name=node.name, gpu_type=gpu_type,
                                        gpus=len(node.usable)), self.estimator.profiles)

    def _fit_levels(self, s: Session, app: str, node: NodeView, gpu_type: str,
                    levels: tuple[float, ...], runs: list[ProfilingRun],
                    now_s: float) -> None:
        """``app_levels`` rows of (app, type) from the level runs (andreas.profiler.levels)."""
        from andreas.profiler.levels import level_point, store_levels

        ids = {g.index: g.id for g in node.gpus}
        points = []
        for r in runs:
            if r.gpus != 1 or not r.epoch_s or r.start_s is None:
                continue
            point = level_point(s, [ids[i] for i in r.gpu_ids if i in ids], r.start_s,
                                r.end_s if r.end_s is not None else now_s, r.power_limit_w,
                                levels[0], summarise(r.epoch_s))
            if point is not None:
                points.append(point)
        store_levels(s, app, gpu_type, levels, points, now_s)

    def _finish(self, s: Session, jobs: list[JobView], stops: dict[str, str], now_s: float,
                *, reason: str | None) -> bool:
        """End the profiling of these jobs: a running run is stopped, a job between runs
        goes back to the queue (preempted: it resumes from its checkpoint)."""
        moved = False
        for j in jobs:
            if j.state is not JobState.PROFILING:
                continue
            if j.open_attempts:
                stops[j.id] = reason or "profiling done"
                continue
            try:
                transition(s, j.id, JobState.PREEMPTED, expected=JobState.PROFILING,
                           now_s=now_s)
                if reason:
                    record(s, j.id, reason=reason[:REASON_CHARS])
                moved = True
                log.info("job=%s: profiling %s; queued for the optimizer", j.id,
                         "ended: " + reason if reason else "done")
            except TransitionConflict:
                pass
        return moved
