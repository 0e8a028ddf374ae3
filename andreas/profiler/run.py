"""Profiling runs: a new application for a few epochs on the profiling node(s), per g.

Nodes: the ones named (marked ``profiling`` for the run, restored afterwards, also on
Ctrl-C and errors), else the up nodes already marked ``profiling``, one per GPU type
(the one with most usable GPUs). While a node is marked, the manager's snapshot leaves it
out (``andreas.manager.snapshot.schedulable``), its production jobs are pinned (left to
finish on their GPUs, which the profiler does not use) and the reconciler leaves unknown
containers there alone, so the node is marked *before* the first container starts.

Per node and g: one container through the :class:`~andreas.executor.base.Executor`
(job id ``profile-<app>-<node>-g<g>-<6 hex>``, attempt 1, the first g usable free GPUs),
its progress lines read from ``executor.logs(follow=True)`` with
:func:`andreas.job.parse_progress` (independent of the node agent), epoch durations from
the container's own ``t=`` stamps. With >= 3 epochs the first is dropped (warm-up: data
loading, cuDNN autotuning); the median of the rest is the g's epoch time. Then the fit
(:mod:`andreas.profiler.fit`) and, in one transaction per node, ``app_profiles`` rows
(source ``profiler``) and the ``app_models`` row. Containers are removed.

Each container also gets a ``jobs`` row, written before it starts (its own transaction):
the node agents follow every container labelled ``andreas.job``, so they store the run's
epoch events and ``job_energy`` rows, and both reference ``jobs.id``; without the row the
store rejects them (foreign key) and the profiling run's energy and measured epochs are
lost to the agent's rejected.jsonl. So: the row holds image, command, env ``{}``, the run's
epochs, ``submit_s = due_s = state_changed_s = now``, weight 0 (no tardiness penalty, ever),
the application, ``grace_s`` as started, ``max_gpus = g``, reason ``profiling run (andreas
profile)`` and state ``completed`` from the start. A terminal job is never planned (the
snapshot), started or stopped by the manager, and it has *no* ``job_attempts`` row (an open
attempt would be adopted or stopped by the reconciler; containers on a profiling node that
are no open attempt are left alone). Its state never changes, so no ``transition``; when
the run ends ``state_changed_s`` and ``epochs_done`` (epochs measured) are updated. The
profiling energy then shows in ``andreas report`` under the job ``profile-...`` and the
epochs feed the measured estimates (:func:`andreas.profiler.store.refresh_models`).
Skipped g (too few free GPUs) start no container and get no row.

Power levels: where the node can run at more than its default limit (``levels_of``: its
agent reported settable limits and ``profiles/power_limits.toml`` names levels for its
type), one more run per level below the default, 1 GPU at that limit (the container's
``andreas.power_limit_w`` label, which the node agent has ``andreas-powerd`` apply), then
the levels' fit from the agent's samples (:mod:`andreas.profiler.levels`).
"""

from __future__ import annotations

import enum
import logging
import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from andreas.errors import InputError
from andreas.limits import MAX_IMAGE_CHARS
from andreas.executor.base import Executor, NodeRef, StartRequest
from andreas.executor.errors import (ExecutorError, ImageNotAllowed, ImageNotFound,
                                     ImagePullFailed, NodeUnreachable)
from andreas.job import parse_progress
from andreas.powerfit import FittedLevel
from andreas.profiler.fit import AmdahlFit, fit_amdahl, prior_serial_fraction
from andreas.profiler.levels import level_point, store_levels
from andreas.profiler.nodes import (ProfilingNode, check_app, free_gpus, mark, profile_job_id,
                                    restore, select_targets)
from andreas.store.nodes import Db, gpu_store_ids
from andreas.store.profiles import latest_gpu_sample_s
from andreas.profiler.store import write_model
from andreas.store.engine import Store
from andreas.store.models import JobState
from andreas.store.profiles import PROFILE_RUN_REASON, ProfileSource, upsert_profiles
from andreas.store.submissions import NewJob, insert_job, job_exists, record_run_end

log = logging.getLogger(__name__)

DEFAULT_EPOCHS = 3
DEFAULT_TIMEOUT_S = 3600.0
EXIT_WAIT_S = 30.0            # after the log ends, for the engine to report the exit
SAMPLES_WAIT_S = 30.0         # after the level runs, for the node agent's samples to arrive
SAMPLES_POLL_S = 0.5
GRACE_S = 30.0                # SIGTERM -> kill of a profiling container
JOB_REASON = PROFILE_RUN_REASON


class RunStatus(enum.StrEnum):
    """How one profiling container ended (printed and written by ``andreas profile``)."""

    OK = "ok"
    TIMEOUT = "timeout"         # killed at the run's timeout: its epochs so far still count
    FAILED = "failed"
    SKIPPED = "skipped"         # too few free GPUs: no container


class ProfileEventKind(enum.StrEnum):
    """What a :class:`ProfileEvent` tells a display."""

    PLAN = "plan"               # once: ``runs`` containers of ``epochs`` epochs
    START = "start"             # a run's container starts
    EPOCH = "epoch"             # an epoch of the run ended
    DONE = "done"               # the run ended (its ``outcome``)


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """One container: epoch durations in epoch order, those kept, their median, and how it
    ended (``status``; ``error``: why, '' when ok)."""

    node: str
    g: int
    job_id: str
    epoch_s: tuple[float, ...] = ()
    kept_s: tuple[float, ...] = ()
    median_s: float | None = None
    exit_code: int | None = None
    status: RunStatus = RunStatus.OK
    error: str = ""
    gpu_uuids: tuple[str, ...] = ()
    power_limit_w: float | None = None     # a level run's limit (None: the default)
    window_s: tuple[float, float] | None = None   # first epoch start, last end (its t=)


@dataclass(frozen=True, kw_only=True)
class NodeProfile:
    """A node's runs and the fit over their kept epochs (None: nothing measured)."""

    node: str
    gpu_type: str
    max_gpus: int
    runs: tuple[RunOutcome, ...]
    fit: AmdahlFit | None
    level_runs: tuple[RunOutcome, ...] = ()
    levels: tuple[FittedLevel, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ProfileEvent:
    """Progress for a display: the plan once, then the start, epochs and end of each run."""

    kind: ProfileEventKind
    node: str
    g: int
    job_id: str
    epoch: int = 0
    epochs: int = 0
    seconds: float | None = None
    outcome: RunOutcome | None = None
    runs: int = 0


# ----------------------------------------------------------------- one container


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    buf = b""
    for chunk in chunks:
        buf += chunk
        *done, buf = buf.split(b"\n")
        yield from done
    if buf:
        yield buf


def _follow(executor: Executor, node: NodeRef, cid: str, job_id: str, out: queue.Queue) -> None:
    """Reader thread: the job's progress events, then None (or the exception)."""
    try:
        for line in _lines(executor.logs(node, cid, follow=True)):
            event = parse_progress(line)
            if event is not None and event.job_id == job_id:
                out.put(event)
        out.put(None)
    except BaseException as e:  # noqa: BLE001 - handed to the main thread
        out.put(e)


def _exit_state(executor: Executor, node: NodeRef, cid: str, wait_s: float,
                sleep: Callable[[float], None]):
    deadline = time.monotonic() + wait_s
    while True:
        state = next((c for c in executor.containers(node) if c.container_id == cid), None)
        if state is None or not state.running or time.monotonic() >= deadline:
            return state
        sleep(0.2)


def durations(events: Sequence, *, drop_warmup: bool = True) -> tuple[tuple[float, ...], ...]:
    """(all epoch seconds in epoch order, kept ones): end - start of the same epoch, else
    end - the previous epoch's end; the first dropped when there are >= 3."""
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for e in events:
        (starts if e.is_start else ends)[e.epoch] = e.t
    out, prev_end = [], None
    for epoch in sorted(ends):
        begin = starts.get(epoch, prev_end)
        if begin is not None and ends[epoch] > begin:
            out.append(ends[epoch] - begin)
        prev_end = ends[epoch]
    kept = out[1:] if drop_warmup and len(out) >= 3 else out
    return tuple(out), tuple(kept)


def _window(events: Sequence) -> tuple[float, float] | None:
    """(first epoch start, last epoch end) by the container's own stamps."""
    starts = [e.t for e in events if e.is_start]
    ends = [e.t for e in events if e.is_end]
    return (min(starts), max(ends)) if starts and ends and max(ends) > min(starts) else None


def run_one(executor: Executor, target: ProfilingNode, g: int, gpus: Sequence[str], *, job_id: str,
            image: str, command: Sequence[str], env: Mapping[str, str], epochs: int,
            timeout_s: float, on_event: Callable[[ProfileEvent], None],
            live: set[str], sleep: Callable[[float], None] = time.sleep,
            power_limit_w: float | None = None) -> RunOutcome:
    """Start, follow, wait, remove. ``live`` holds the container id while it exists (the
    caller's cleanup on interruption). Image errors propagate: every g would fail.
    ``power_limit_w``: a level run, labelled so that the node agent sets the limit."""
    request = StartRequest(job_id=job_id, attempt=1, image=image, command=tuple(command),
                           env=dict(env), epochs=epochs, gpu_uuids=tuple(gpus),
                           fake_gpus=target.fake_gpus, grace_s=GRACE_S,
                           power_limit_w=power_limit_w)
    on_event(ProfileEvent(kind=ProfileEventKind.START, node=target.name, g=g, job_id=job_id,
                          epochs=epochs))
    try:
        cid = executor.start(target.ref, request)
    except (ImageNotFound, ImagePullFailed, ImageNotAllowed, NodeUnreachable):
        raise
    except ExecutorError as e:
        return RunOutcome(node=target.name, g=g, job_id=job_id, status=RunStatus.FAILED,
                          error=f"start: {e}")
    live.add(cid)
    events: list = []
    q: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_follow, args=(executor, target.ref, cid, job_id, q),
                              name=f"profile-logs-{job_id}", daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    timed_out, error = False, ""
    seen_end: set[int] = set()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 and not timed_out:
            timed_out = True
            executor.kill(target.ref, cid)            # ends the log stream
            deadline = time.monotonic() + EXIT_WAIT_S
            continue
        if left <= 0:
            error = "log stream did not end after the kill"
            break
        try:
            item = q.get(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if item is None:
            break
        if isinstance(item, BaseException):
            error = f"logs: {item}"
            break
        events.append(item)
        if item.is_end and item.epoch not in seen_end:
            seen_end.add(item.epoch)
            _, so_far = durations(events, drop_warmup=False)
            on_event(ProfileEvent(kind=ProfileEventKind.EPOCH, node=target.name, g=g,
                                  job_id=job_id, epoch=item.epoch, epochs=epochs,
                                  seconds=so_far[-1] if so_far else None))
    state = _exit_state(executor, target.ref, cid, EXIT_WAIT_S, sleep)
    if state is not None and state.running:
        executor.kill(target.ref, cid)
        state = _exit_state(executor, target.ref, cid, EXIT_WAIT_S, sleep)
    code = state.exit_code if state is not None else None
    all_s, kept = durations(events)
    if timed_out:
        status, error = RunStatus.TIMEOUT, f"timeout after {timeout_s:g} s, {len(all_s)} epochs"
    elif error or code != 0:
        tail = executor.log_tail(target.ref, cid, 5).strip().replace("\n", " | ")
        status = RunStatus.FAILED
        error = error or f"exit {code}" + (f": {tail}" if tail else "")
    elif not kept:
        status, error = RunStatus.FAILED, "exit 0 but no ANDREAS-PROGRESS epoch lines for this job"
    else:
        status = RunStatus.OK
    try:
        executor.remove(target.ref, cid)
        live.discard(cid)
    except ExecutorError:
        pass                                          # left for the caller's cleanup
    usable = status in (RunStatus.OK, RunStatus.TIMEOUT) and bool(kept)
    outcome = RunOutcome(node=target.name, g=g, job_id=job_id, epoch_s=all_s,
                         kept_s=kept if usable else (),
                         median_s=statistics.median(kept) if usable else None,
                         exit_code=code, status=status, error=error, gpu_uuids=tuple(gpus),
                         power_limit_w=power_limit_w, window_s=_window(events))
    on_event(ProfileEvent(kind=ProfileEventKind.DONE, node=target.name, g=g, job_id=job_id,
                          epochs=epochs, outcome=outcome))
    return outcome


# ----------------------------------------------------------------- the whole run


@dataclass(frozen=True, kw_only=True)
class ProfileRequest:
    """What ``andreas profile`` asks for (validated by :func:`profile_application`)."""

    image: str
    app: str
    epochs: int = DEFAULT_EPOCHS
    nodes: tuple[str, ...] = ()
    gpus: tuple[int, ...] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    power_levels: bool = True       # also one short run per power level the node allows


def check_request(request: ProfileRequest) -> None:
    """Every field of a request that can be checked without the store: InputError naming
    the field (a command maps it to its option)."""
    check_app(request.app)
    if request.epochs < 1:
        raise InputError(f"epochs {request.epochs}: must be >= 1", field="epochs")
    if not request.timeout_s > 0:
        raise InputError(f"timeout_s {request.timeout_s:g}: must be > 0", field="timeout_s")
    if len(request.image) > MAX_IMAGE_CHARS:
        raise InputError(f"image: at most {MAX_IMAGE_CHARS} characters, got "
                         f"{len(request.image)}", field="image")


LevelsOf = Callable[[Db, ProfilingNode], tuple[float, ...]]


@dataclass(frozen=True, kw_only=True)
class _Context:
    """What every run of one ``profile_application`` call shares."""

    clock: Callable[[], float]
    rng: np.random.Generator
    on_event: Callable[[ProfileEvent], None]
    sleep: Callable[[float], None]
    live: Mapping[str, set[str]]


def profile_application(store: Store, executor: Executor, request: ProfileRequest, *,
                        clock: Callable[[], float] = time.time,
                        rng: np.random.Generator | None = None,
                        on_event: Callable[[ProfileEvent], None] = lambda e: None,
                        prior_serial: Mapping[str, float] | None = None,
                        sleep: Callable[[float], None] = time.sleep,
                        levels_of: LevelsOf | None = None,
                        samples_wait_s: float = SAMPLES_WAIT_S) -> list[NodeProfile]:
    """Profile ``request.app`` on every target node and g; store the results (module
    docstring). ``prior_serial``: profiles' s per application (one-g fits).
    ``levels_of``: the power limits a node may run at, its default first (none or one:
    no level runs there)."""
    check_request(request)
    with store.session() as s:
        targets = select_targets(s, nodes=request.nodes, gpus=request.gpus)
        mark(s, targets)
        levels = {t.name: (levels_of(s, t) if levels_of is not None and request.power_levels
                           else ()) for t in targets}
    ctx = _Context(clock=clock, rng=rng if rng is not None else np.random.default_rng(),
                   on_event=on_event, sleep=sleep, live={t.name: set() for t in targets})
    results = []
    try:
        runs = sum(len(t.counts) + max(len(levels[t.name]) - 1, 0) for t in targets)
        on_event(ProfileEvent(kind=ProfileEventKind.PLAN, node="", g=0, job_id="",
                              epochs=request.epochs, runs=runs))
        for target in targets:
            profile = _profile_node(store, executor, request, target, ctx,
                                    prior_serial=prior_serial or {})
            if len(levels[target.name]) > 1:
                profile = _profile_levels(store, executor, request, target, ctx, profile,
                                          levels[target.name], samples_wait_s)
            results.append(profile)
    finally:
        try:
            _cleanup(executor, targets, ctx.live)
        finally:
            restore(store, targets)
    return results


def _one_run(store: Store, executor: Executor, request: ProfileRequest, target: ProfilingNode,
             g: int, ctx: _Context, power_limit_w: float | None = None
             ) -> tuple[RunOutcome, bool]:
    """One container on g free GPUs (skipped without them), its job row written before and
    finished after; and whether the node was unreachable."""
    gpus = free_gpus(store, target, g)
    if gpus is None:
        job_id = profile_job_id(request.app, target.name, g, ctx.rng)
        outcome = RunOutcome(node=target.name, g=g, job_id=job_id, status=RunStatus.SKIPPED,
                             error=f"fewer than {g} free GPUs (production jobs hold them)",
                             power_limit_w=power_limit_w)
        ctx.on_event(ProfileEvent(kind=ProfileEventKind.DONE, node=target.name, g=g,
                                  job_id=job_id, epochs=request.epochs, outcome=outcome))
        return outcome, False
    job_id = record_job(store, request, target, g, ctx.rng, now_s=ctx.clock())
    unreachable = False
    try:
        outcome = run_one(executor, target, g, gpus, job_id=job_id, image=request.image,
                          command=request.command, env=request.env, epochs=request.epochs,
                          timeout_s=request.timeout_s, on_event=ctx.on_event,
                          live=ctx.live[target.name], sleep=ctx.sleep,
                          power_limit_w=power_limit_w)
    except NodeUnreachable as e:
        outcome = RunOutcome(node=target.name, g=g, job_id=job_id, status=RunStatus.FAILED,
                             error=str(e), power_limit_w=power_limit_w)
        unreachable = True
    except BaseException:
        finish_job(store, job_id, now_s=ctx.clock(), epochs_done=0, quiet=True)
        raise
    finish_job(store, job_id, now_s=ctx.clock(),
               epochs_done=min(len(outcome.epoch_s), request.epochs))
    return outcome, unreachable


def _profile_node(store: Store, executor: Executor, request: ProfileRequest,
                  target: ProfilingNode, ctx: _Context, *,
                  prior_serial: Mapping[str, float]) -> NodeProfile:
    runs: list[RunOutcome] = []
    for g in target.counts:
        outcome, unreachable = _one_run(store, executor, request, target, g, ctx)
        runs.append(outcome)
        if unreachable:
            break
    points = [(r.g, d) for r in runs for d in r.kept_s]
    fit = None
    if points:
        fit = fit_amdahl([g for g, _ in points], [d for _, d in points],
                         prior_serial_fraction=prior_serial_fraction(prior_serial, request.app))
        now = ctx.clock()
        with store.session() as s:
            upsert_profiles(s, [dict(application=request.app, gpu_type=target.gpu_type,
                                     gpus=r.g, epoch_time_s=float(r.median_s),
                                     source=ProfileSource.PROFILER, samples=len(r.kept_s),
                                     updated_s=now)
                                for r in runs if r.median_s is not None])
            write_model(s, request.app, target.gpu_type, fit, source=ProfileSource.PROFILER,
                        now_s=now)
    return NodeProfile(node=target.name, gpu_type=target.gpu_type,
                       max_gpus=len(target.usable), runs=tuple(runs), fit=fit)


def _profile_levels(store: Store, executor: Executor, request: ProfileRequest,
                    target: ProfilingNode, ctx: _Context, profile: NodeProfile,
                    levels_w: tuple[float, ...], wait_s: float) -> NodeProfile:
    """One run of one GPU per level below the default, then the levels' fit
    (andreas.profiler.levels) against the one-GPU run at the default limit."""
    base = next((r for r in profile.runs if r.g == 1 and r.kept_s and r.window_s), None)
    if base is None:
        log.warning("application %s on %s: no one-GPU run at the default limit; power "
                    "levels not profiled", request.app, target.name)
        return profile
    runs: list[RunOutcome] = []
    for limit in levels_w[1:]:
        outcome, unreachable = _one_run(store, executor, request, target, 1, ctx, limit)
        runs.append(outcome)
        if unreachable:
            break
    measured = [base] + [r for r in runs if r.kept_s and r.window_s]
    _wait_for_samples(store, target, measured, wait_s, ctx)
    with store.session() as s:
        points = [p for p in (_point(s, target, r, levels_w[0]) for r in measured)
                  if p is not None]
        fitted = store_levels(s, request.app, target.gpu_type, levels_w, points, ctx.clock())
    return NodeProfile(node=profile.node, gpu_type=profile.gpu_type, max_gpus=profile.max_gpus,
                       runs=profile.runs, fit=profile.fit, level_runs=tuple(runs),
                       levels=tuple(fitted))


def _point(s: Db, target: ProfilingNode, run: RunOutcome, default_w: float):
    assert run.window_s is not None
    return level_point(s, gpu_store_ids(s, target.id, run.gpu_uuids), *run.window_s,
                       run.power_limit_w, default_w, run.kept_s)


def _wait_for_samples(store: Store, target: ProfilingNode, runs: Sequence[RunOutcome],
                      wait_s: float, ctx: _Context) -> None:
    """Until the node agent's samples cover the last run's end (its delivery lags a few
    seconds), at most ``wait_s``."""
    end = max(r.window_s[1] for r in runs if r.window_s is not None)
    uuids = {u for r in runs for u in r.gpu_uuids}
    for _ in range(max(1, int(wait_s / SAMPLES_POLL_S)) + 1):
        with store.session() as s:
            latest = latest_gpu_sample_s(s, gpu_store_ids(s, target.id, uuids))
        if latest is not None and latest >= end:
            return
        ctx.sleep(SAMPLES_POLL_S)
    log.warning("node %s: the agent's samples do not reach the last level run's end after "
                "%.0f s; the levels are fitted from what arrived", target.name, wait_s)


def record_job(store: Store, request: ProfileRequest, target: ProfilingNode, g: int,
               rng: np.random.Generator, *, now_s: float) -> str:
    """Insert the ``jobs`` row of one profiling container (module docstring: completed from
    the start, weight 0, no attempt); returns its id, a fresh ``profile-...`` one."""
    with store.session() as s:
        for _ in range(100):                           # 16**6 suffixes: a clash is rare
            job_id = profile_job_id(request.app, target.name, g, rng)
            if not job_exists(s, job_id):
                break
        insert_job(s, NewJob(id=job_id, image=request.image, command=request.command,
                             epochs=request.epochs, submit_s=now_s, due_s=now_s, weight=0.0,
                             application=request.app, grace_s=GRACE_S,
                             state=JobState.COMPLETED, max_gpus=g, reason=JOB_REASON))
    return job_id


def finish_job(store: Store, job_id: str, *, now_s: float, epochs_done: int,
               quiet: bool = False) -> None:
    """The run ended: ``state_changed_s`` and ``epochs_done`` of its row (the state stays
    completed). ``quiet``: on an interrupted run, a store error is logged, not raised."""
    try:
        with store.session() as s:
            record_run_end(s, job_id, now_s=now_s, epochs_done=epochs_done)
    except Exception as e:
        if not quiet:
            raise
        log.warning("job=%s: could not record the end of the profiling run: %s", job_id, e)


def _cleanup(executor: Executor, targets: Sequence[ProfilingNode],
             live: Mapping[str, set[str]]) -> None:
    """Kill and remove what is left (an interrupted or failed run); best effort."""
    for target in targets:
        for cid in list(live.get(target.name, ())):
            try:
                executor.kill(target.ref, cid)
                _exit_state(executor, target.ref, cid, 10.0, time.sleep)
                executor.remove(target.ref, cid)
            except Exception:  # noqa: BLE001 - cleanup must reach the flag restore
                pass
