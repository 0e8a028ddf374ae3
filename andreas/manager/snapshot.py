"""The store at ``now_s`` as an optimizer :class:`~andreas.model.Snapshot`.

- Nodes: ``up``, not reserved for profiling, reachable in the manager's own view, with at
  least one usable GPU (healthy, not MIG); capacity = usable GPUs, power curve truncated
  to it. With the power-down (``[power]``), ``wake`` names ``waking`` and ``off`` nodes
  the policy may plan on too (their GPUs as the inventory last saw them); the reconciler
  starts nothing there until the node is ``up`` (``andreas.manager.power``).
- Jobs: queued, preempted and preempting ones wait (``running=None``: a preempting job is
  being stopped and will restart from its checkpoint); running ones run on
  ``Config(node, g)``. A job running on a node that is not schedulable (draining, down
  while its engine still answers, profiling) is *pinned*: left out of the snapshot and
  left alone until it ends. A waiting job that can run on no schedulable node (no epoch
  time for any type there) is left out too and reported as postponed by the manager,
  because the policies must only see jobs they can place. Jobs being profiled
  (``profiling``, or waiting for their application's profiling run) are left out too.
- Progress: ``epochs_done`` = the highest epoch of the job's epoch events (written back to
  ``jobs.epochs_done`` where it grew).
- Epoch times per GPU type for g = 1 .. min(job.max_gpus, largest schedulable node of the
  type), from :class:`~andreas.manager.estimates.Estimator`.
- GPU sharing: a job submitted with a GPU share is a rigid task (``Demand``: one GPU,
  ``gpu_milli``, its GPU memory) for the policies that plan demands
  (``PolicySpec.plans_demands``); under the others it is left out (pinned while
  it runs, unrunnable while it waits) and the log says why. Running jobs carry the GPUs
  they hold as positions in the node's usable GPUs (``Config.gpu_ids``), so a policy
  knows which GPU has room; a node's ``gpu_memory_mib`` is its smallest usable GPU's.
  A running share measures its slowdown (``Config.slowdown``, theta): the median of its
  attempt's last three epochs over its solo epoch time (the estimate for one GPU of the
  type, from jobs on whole GPUs), minus one, never below 0; 0 before its first epoch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
import statistics
from dataclasses import dataclass, field, replace

from andreas.config import ManagerSettings
from andreas.costs import with_tariff
from andreas.accounting import Prices
from andreas.manager.estimates import (EpochEstimate, Estimator, NodeHardware, PowerCurve)
from andreas.manager.state import StoreState
from andreas.model import Config, Demand, Energy, Job, Node, Params, Snapshot
from andreas.store.engine import Session
from andreas.store.epochs import (attempt_epochs, last_epoch_end, max_epochs,
                                  write_epochs_done)
from andreas.store.jobs import WAITING
from andreas.store.models import JobState, NodeState
from andreas.store.read import JobView, NodeView


@dataclass(frozen=True, kw_only=True)
class SnapshotBuild:
    """A snapshot and what went into it: power curves of the schedulable nodes, epoch
    estimates (with sources), jobs left out as pinned or as unrunnable."""

    snapshot: Snapshot
    curves: Mapping[str, PowerCurve]
    epochs: Mapping[tuple[str, str], tuple[EpochEstimate, ...]] = field(default_factory=dict)
    pinned: tuple[str, ...] = ()
    unrunnable: tuple[str, ...] = ()
    unshared: tuple[str, ...] = ()      # jobs with a GPU share, left out: the policy can't


def schedulable(node: NodeView, unreachable: Collection[str] = ()) -> bool:
    """Whether the optimizer may place jobs on the node."""
    return (node.state is NodeState.UP and not node.profiling and node.name not in unreachable
            and len(node.usable) > 0)


def plannable(node: NodeView, unreachable: Collection[str] = (),
              wake: Collection[str] = ()) -> bool:
    """Whether the snapshot offers the node to the policy: schedulable, or an ``off`` /
    ``waking`` node named in ``wake`` (the power-down)."""
    if node.state in (NodeState.OFF, NodeState.WAKING) and node.name in wake:
        return not node.profiling and len(node.usable) > 0
    return schedulable(node, unreachable)


def settings_energy(settings: ManagerSettings) -> Energy:
    """The site's energy prices: PUE x price, or with ``[manager] tariff`` price(t) x PUE(t)
    (hours without a pue column at ``energy_pue``; the reference rate c_ng is quoted at
    becomes the tariff's means, :func:`andreas.costs.with_tariff`)."""
    energy = Energy(pue=settings.energy_pue, price_per_kwh=settings.price_per_kwh)
    return energy if settings.tariff_file is None else with_tariff(energy, settings.tariff_file)


def settings_prices(settings: ManagerSettings, co2_g_per_kwh: float | None = None) -> Prices:
    """What bills measured energy (reports, views): the same prices as
    :func:`settings_energy`."""
    e = settings_energy(settings)
    return Prices(pue=e.pue, price_per_kwh=e.price_per_kwh, co2_g_per_kwh=co2_g_per_kwh,
                  tariff=e.tariff, tariff_path=settings.tariff)


def settings_params(settings: ManagerSettings) -> Params:
    return Params(period_s=settings.period_s, restart_overhead_s=settings.restart_overhead_s)


def build_snapshot(s: Session, state: StoreState, estimator: Estimator,
                   settings: ManagerSettings, now_s: float, *,
                   unreachable: Collection[str] = (), shares: bool = True,
                   held: Collection[str] = (), wake: Collection[str] = ()) -> SnapshotBuild:
    """The optimizer's view of the store (see the module docstring). ``shares``: whether
    the policy plans GPU shares (otherwise jobs with one are left out); ``held``: waiting
    jobs the automatic profiling keeps back (``andreas.manager.profiling``); ``wake``:
    ``off`` / ``waking`` nodes offered too (the power-down)."""
    nodes = [n for n in state.nodes.values() if plannable(n, unreachable, wake)]
    names = {n.name for n in nodes}
    curves = estimator.power_curves(
        s, [NodeHardware(id=n.id, name=n.name, gpu_type=n.gpu_type, gpus=len(n.gpus))
            for n in nodes], now_s)
    model_nodes = tuple(Node(name=n.name, gpu_type=n.gpu_type, gpus=len(n.usable),
                             power_w=curves[n.name].power_w[:len(n.usable) + 1],
                             gpu_memory_mib=min(g.memory_mib for g in n.usable))
                        for n in nodes)
    gpu_of = {n.name: n.gpu_type for n in nodes}
    largest: dict[str, int] = {}
    for n in nodes:                     # the model nodes' GPUs: each node's usable ones
        largest[n.gpu_type] = max(largest.get(n.gpu_type, 0), len(n.usable))
    planned, pinned, unshared, unrunnable = _sort_jobs(state, names, held=held, shares=shares)
    done = max_epochs(s, [j.id for j, _ in planned])
    shared_runs = [(j.id, j.latest.attempt) for j, run in planned
                   if run is not None and j.gpu_milli is not None and j.latest is not None]
    recent = attempt_epochs(s, shared_runs) if shared_runs else {}
    write_epochs_done(s, done, {j.id: j.epochs_done for j, _ in planned})
    checkpointed = last_epoch_end(s, [j.id for j, run in planned if run is not None])
    tables = estimator.epoch_tables(s, {j.application for j, _ in planned}, largest)

    jobs = []
    for job, running in sorted(planned, key=lambda p: (p[0].submit_s, p[0].id)):
        times = _times(job, largest, tables)
        if not times and running is None:
            unrunnable.append(job.id)
            continue
        progress: float = min(max(done.get(job.id, 0), job.epochs_done), job.epochs)
        if running is not None:
            progress = _partial(progress, job, running, times.get(gpu_of[running.node]),
                                checkpointed.get(job.id), now_s)
        if running is not None and job.gpu_milli is not None and job.latest is not None:
            running = _measured(running, recent.get((job.id, job.latest.attempt)),
                                times.get(gpu_of[running.node]))
        jobs.append(Job(id=job.id, submit_s=job.submit_s, due_s=job.due_s, weight=job.weight,
                        epochs=job.epochs, epoch_time_s=times, app=job.application,
                        epochs_done=progress, running=running, demand=_demand(job)))
    snapshot = Snapshot(nodes=model_nodes, jobs=tuple(jobs), now_s=now_s,
                        energy=settings_energy(settings), params=settings_params(settings),
                        name=f"store@{now_s:.0f}")
    return SnapshotBuild(snapshot=snapshot, curves=curves, epochs=tables,
                         pinned=tuple(sorted(pinned)), unrunnable=tuple(unrunnable),
                         unshared=tuple(sorted(unshared)))


def _sort_jobs(state: StoreState, names: set[str], *, held: Collection[str], shares: bool
               ) -> tuple[list[tuple[JobView, Config | None]], list[str], list[str], list[str]]:
    """The jobs to plan (with the configuration a running one holds), and those pinned
    (left alone), left out for their GPU share, and unrunnable."""
    pinned: list[str] = []
    planned: list[tuple[JobView, Config | None]] = []
    unshared: list[str] = []
    unrunnable: list[str] = []
    for job in state.jobs.values():
        if job.id in held and job.state in WAITING:
            continue
        if job.gpu_milli is not None and not shares:
            unshared.append(job.id)     # running: pinned (left alone); waiting: unrunnable
            (pinned if job.state in (JobState.RUNNING, JobState.PREEMPTING) else
             unrunnable).append(job.id)
            continue
        if job.state in WAITING or job.state is JobState.PREEMPTING:
            planned.append((job, None))
        elif job.state is JobState.RUNNING:
            held_config = _held_config(state, job, names)
            if held_config is not None:
                planned.append((job, held_config))
            else:                       # elsewhere, or on a GPU no longer usable
                pinned.append(job.id)
    return planned, pinned, unshared, unrunnable


def _held_config(state: StoreState, job: JobView, names: set[str]) -> Config | None:
    """The configuration a running job holds on a node of ``names`` (None: no open
    attempt, another node, or a GPU no longer usable)."""
    a = job.latest
    node = state.node_of(a) if a is not None and a.open else None
    if a is None or node is None or node.name not in names:
        return None
    slots = node.positions(a.gpu_ids)
    if not slots or min(slots) < 0:
        return None
    return Config(node=node.name, gpus=len(a.gpu_ids), gpu_ids=slots)


def _times(job: JobView, largest: Mapping[str, int],
           tables: Mapping[tuple[str, str], tuple[EpochEstimate, ...]]
           ) -> dict[str, tuple[float, ...]]:
    """A job's epoch times per GPU type, g = 1 .. its cap (1 for a GPU share)."""
    cap = job.max_gpus if job.max_gpus and job.max_gpus > 0 else None
    if job.gpu_milli is not None:
        cap = 1
    times = {}
    for gpu_type, g_max in largest.items():
        est = tables.get((job.application, gpu_type))
        limit = min(g_max, cap) if cap else g_max
        if est and limit >= 1:
            times[gpu_type] = tuple(e.seconds for e in est[:limit])
    return times


def _partial(progress: float, job: JobView, running: Config,
             times: tuple[float, ...] | None, last_end_s: float | None, now_s: float) -> float:
    """Whole epochs done plus the share of the epoch in progress since the job's last
    checkpoint (its newest epoch end, or its attempt's start): the work a stop throws
    away, which the policies' move costs charge (``costs.move_costs``)."""
    a = job.latest
    if (not times or running.gpus > len(times) or a is None or a.start_s is None
            or progress >= job.epochs):
        return progress
    since = max(a.start_s, last_end_s if last_end_s is not None else a.start_s)
    share = (now_s - since) / times[running.gpus - 1]
    return min(progress + min(max(share, 0.0), 0.999), job.epochs - 1e-6)


def _measured(running: Config, epochs: list[float] | None,
              solo: tuple[float, ...] | None) -> Config:
    """The running config with the slowdown its attempt measures (module docstring)."""
    if not epochs or not solo or solo[0] <= 0:
        return running
    theta = max(0.0, statistics.median(epochs) / solo[0] - 1.0)
    return replace(running, slowdown=round(theta, 6))


def _demand(job: JobView) -> Demand | None:
    """A GPU share as a rigid one-GPU task; whole-GPU jobs stay elastic (None)."""
    if job.gpu_milli is None:
        return None
    return Demand(gpus=1, gpu_milli=job.gpu_milli, gpu_memory_mib=job.gpu_memory_mib or 0)
