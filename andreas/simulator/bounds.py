"""A lower bound on the bill of any schedule of a cloud trace: how far from the optimum.

The long-run optimum of a trace is out of reach (an online problem over hundreds of
decisions), but a relaxation of it is not. For one job, drop everything other jobs do
to it (capacity, waiting, packing) and keep only what it must pay itself:

- every hour a VM runs costs its catalog price, shared by its GPUs, so a job on g GPUs
  of type k pays at least ``g * p_k`` per hour, ``p_k`` the lowest price per GPU of any
  VM of type k (a VM with idle GPUs only costs more);
- its work may be split over configurations (type, g) in any fractions ``x_c`` (the
  simulator's ``progress="exact"`` carries fractional progress over; restarts, lost
  partial epochs and overheads only add), so it runs ``T = sum x_c s_c`` seconds at
  the earliest from its submission, for ``sum x_c e_c`` dollars, ``s_c`` and ``e_c``
  the whole job's time and GPU-priced cost on c;
- it pays ``weight * max(0, submit + T - due)`` for lateness.

For a fixed T the cheapest split is the lower convex hull h(T) of the points (s_c, e_c),
made of one configuration or two; h is convex and piecewise linear, so h(T) + w(T - D)+
is smallest at a vertex of h (one configuration) or at T = D (two configurations mixed
to end exactly on the due date). ``job_bound`` takes the minimum over those candidates.
The trace's bound is the sum over its jobs: no schedule (no policy, the published C++
code included) can bill less. It ignores that switching configuration happens only at
decisions, that VMs have idle GPUs, and that N nodes limit what runs at once, so the
optimum lies above it by an unknown margin.

On premise there is no such bound here: a node's power with g busy GPUs is not the sum of
its jobs' powers (the static draw is shared), so per-job prices would not add up.

``device_hours_bound`` is the same idea for GPU sharing: a GPU carries at most 1000
milli-GPU of slices at once and interference only lengthens a task, so no placement
occupies fewer device-hours than the slices' milli-GPU-hours plus the whole GPUs' hours,
each task at its solo speed on its fastest accepted GPU type.
"""

from __future__ import annotations

from collections.abc import Iterable

from andreas.costs import SECONDS_PER_HOUR
from andreas.errors import InputError
from andreas.model import GPU_MILLI, CatalogEntry, Job, Trace


def gpu_offers(catalog: Iterable[CatalogEntry]) -> dict[str, tuple[float, int]]:
    """Per GPU type: the lowest catalog price of one of its GPUs per hour, and the most GPUs
    one VM of the type has (the most a job can run on)."""
    offers: dict[str, tuple[float, int]] = {}
    for entry in catalog:
        per_gpu = entry.cost_per_hour / entry.gpus
        price, largest = offers.get(entry.gpu_type, (per_gpu, entry.gpus))
        offers[entry.gpu_type] = (min(price, per_gpu), max(largest, entry.gpus))
    return offers


def job_bound(job: Job, catalog: Iterable[CatalogEntry],
              offers: dict[str, tuple[float, int]] | None = None) -> float:
    """The least any schedule can bill ``job`` from its submission (see the module doc);
    ``offers``: ``gpu_offers(catalog)``, when the caller has it already."""
    points = []   # (whole-job seconds, GPU-priced dollars) per configuration
    for gpu_type, (price, largest) in (offers or gpu_offers(catalog)).items():
        times = job.epoch_time_s.get(gpu_type, ())
        for g in range(1, min(largest, len(times)) + 1):
            if job.runs_on(gpu_type, g):
                seconds = job.epochs_left * times[g - 1]
                points.append((seconds, g * price * seconds / SECONDS_PER_HOUR))
    if not points:
        raise InputError(f"job {job.id}: no epoch time on any VM of the catalog")
    slack = job.due_s - job.submit_s
    best = min(e + job.weight * max(0.0, s - slack) for s, e in points)
    for s_fast, e_fast in points:      # two configurations ending exactly on the due date
        for s_slow, e_slow in points:
            if s_fast < slack < s_slow:
                fast_share = (s_slow - slack) / (s_slow - s_fast)
                best = min(best, fast_share * e_fast + (1 - fast_share) * e_slow)
    return best


def cloud_lower_bound(trace: Trace) -> float:
    """The sum of ``job_bound`` over a cloud trace's jobs: below any schedule's bill."""
    if not trace.cloud:
        raise InputError(f"trace {trace.name}: the lower bound is defined for cloud traces only")
    offers = gpu_offers(trace.catalog)
    return sum(job_bound(job, trace.catalog, offers) for job in trace.jobs)


def device_hours_bound(trace: Trace) -> tuple[float, float]:
    """(the least device-hours any placement of the rigid tasks can occupy, what exclusive
    placement occupies at solo speed): their ratio bounds what sharing can save."""
    least = exclusive = 0.0
    for job in trace.jobs:
        if job.demand is None:
            raise InputError(f"job {job.id}: device-hours bounds need rigid tasks (a demand)")
        gpus = job.demand.gpus
        times = [t[gpus - 1] for t in job.epoch_time_s.values() if len(t) >= gpus]
        if not times:
            raise InputError(f"job {job.id}: no epoch time on {gpus} GPUs")
        hours = job.epochs_left * min(times) / SECONDS_PER_HOUR * gpus
        share = job.demand.gpu_milli / GPU_MILLI if job.demand.shared else 1.0
        least += hours * share
        exclusive += hours
    return least, exclusive
