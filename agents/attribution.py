"""Attribution: how much of the node's energy each job used.

Per sampling interval:

- a job's **GPU energy** is the energy of the GPUs assigned to its container. Ownership
  comes from Docker (the container's device assignment, which the executor also writes
  in the ``andreas.gpus`` label), not from NVML: NVML lists host PIDs, which say nothing
  about which job a GPU was given to, and a job loading data may have no GPU process
  yet. NVML's process list is the *check*: processes on a GPU that do not belong to the
  owning container (or a GPU nobody owns that runs processes) are reported as
  :class:`Mismatch` findings for the log;
- a GPU **shared** by several jobs (submitted with a GPU share: the ``andreas.gpu_milli``
  label, also the CUDA MPS compute cap the executor sets) is split by what each job's
  processes used over the interval, as NVML reports it: their SM utilisation
  (``nvmlDeviceGetProcessUtilization``), else the GPU memory they hold, else, without
  either (or without the PID-to-container map), their declared shares. NVML has no
  per-process energy; SM time is the closest measure of a process's dynamic power. A GPU
  given beyond its whole (a whole-GPU job beside anyone, or shares above 1000 milli) is
  a :class:`Mismatch`;
- its **host energy** is a share of the host's energy for the interval, in proportion to
  the GPU it holds (milli-GPU over its GPUs) among the node's busy GPUs;
- **idle GPUs' energy stays with the node**: it is in the GPU samples and no job's.

Energies are integer millijoules; splits use the largest-remainder method so the shares
add up exactly to what was measured. "No reading" stays ``None`` all the way (a GPU with
a gap or without an energy value makes its job's GPU energy unknown for that interval),
never 0. The functions here are pure; :class:`JobEnergyWindows` sums intervals into the
rows written to ``job_energy`` (one per job and window, closed early when the job's
container goes away or a reading goes missing, so no row mixes known and unknown parts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agents.records import GpuGap, GpuSample, HostSample, JobEnergy

_CONTAINER_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class ContainerJob:
    """A running andreas container: its job, attempt and the GPUs Docker gave it."""

    container_id: str
    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...] = ()
    gpu_milli: int | None = None          # its share of its one GPU; None: whole GPUs
    power_limit_w: float | None = None    # its label's limit, for a run no attempt plans

    @property
    def share(self) -> int:
        """Milli-GPU it holds on each of its GPUs (the attribution weight)."""
        return self.gpu_milli if self.gpu_milli is not None else 1000


@dataclass(frozen=True, kw_only=True)
class JobShare:
    """One job's energy over one interval (GPU part and host part, None = no reading)."""

    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...]
    gpu_energy_mj: int | None
    host_energy_mj: int | None


@dataclass(frozen=True)
class Mismatch:
    """Something the attribution could not square; ``key`` identifies it for de-duplicated
    logging (the daemon logs a finding when it appears, not every second)."""

    key: tuple
    message: str


def split(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` in integer parts proportional to ``weights``, summing exactly to ``total``
    (largest remainder; ties go to the earlier weight). All-zero weights give zeros."""
    weight_sum = sum(weights)
    if weight_sum <= 0:
        return [0] * len(weights)
    parts = [total * w // weight_sum for w in weights]
    remainders = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % weight_sum), i))
    for i in remainders[:total - sum(parts)]:
        parts[i] += 1
    return parts


def gpu_owners(containers: Iterable[ContainerJob],
               node_gpus: Iterable[str]) -> tuple[dict[str, list[ContainerJob]], list[Mismatch]]:
    """GPU UUID -> containers that were given it; findings for GPUs given twice or not on
    this node."""
    known = set(node_gpus)
    owners: dict[str, list[ContainerJob]] = {}
    findings: list[Mismatch] = []
    for c in containers:
        for uuid in dict.fromkeys(c.gpu_uuids):
            if uuid not in known:
                findings.append(Mismatch(("unknown-gpu", c.container_id, uuid),
                                         f"job {c.job_id} (container {c.container_id[:12]}) "
                                         f"was given GPU {uuid}, which is not on this node "
                                         "(or not sampled, e.g. MIG): not attributed"))
                continue
            owners.setdefault(uuid, []).append(c)
    for uuid, cs in owners.items():
        if len(cs) > 1 and (any(c.gpu_milli is None for c in cs)
                            or sum(c.share for c in cs) > 1000):
            jobs = ", ".join(f"{c.job_id} ({c.container_id[:12]}, "
                             f"{'whole' if c.gpu_milli is None else f'{c.gpu_milli}m'})"
                             for c in cs)
            findings.append(Mismatch(("shared-gpu", uuid, tuple(c.container_id for c in cs)),
                                     f"GPU {uuid} is assigned beyond its whole: {jobs}; its "
                                     "energy is split in proportion to their shares"))
    return owners, findings


def check_processes(samples: Iterable[GpuSample], owners: Mapping[str, Sequence[ContainerJob]],
                    pid_container: Callable[[int], str | None]) -> list[Mismatch]:
    """Compare NVML's compute processes with Docker's assignment.

    ``pid_container(pid)`` names the container a host PID runs in (None: not in a
    container, or unknown). A process on an assigned GPU outside its container(s), or any
    process on a GPU that no job was given, is a finding; the assignment stays as Docker
    says (ownership is Docker's; the energy of an unassigned GPU stays with the node).
    """
    findings: list[Mismatch] = []
    for s in samples:
        if not s.pids:
            continue
        assigned = owners.get(s.uuid, ())
        ids = {c.container_id for c in assigned}
        foreign = {pid: pid_container(pid) for pid in s.pids}
        foreign = {pid: cid for pid, cid in foreign.items() if cid not in ids}
        if not foreign:
            continue
        where = ", ".join(f"{pid} ({'container ' + cid[:12] if cid else 'not in a container'})"
                          for pid, cid in sorted(foreign.items()))
        if assigned:
            jobs = ", ".join(c.job_id for c in assigned)
            findings.append(Mismatch(("foreign-process", s.uuid, tuple(sorted(foreign))),
                                     f"GPU {s.uuid} is assigned to job {jobs} but NVML lists "
                                     f"processes outside its container: {where}; the energy "
                                     "still goes to the assigned job"))
        else:
            findings.append(Mismatch(("unassigned-process", s.uuid, tuple(sorted(foreign))),
                                     f"GPU {s.uuid} is assigned to no andreas job but NVML "
                                     f"lists processes on it: {where}; its energy stays with "
                                     "the node"))
    return findings


def usage_weights(sample: GpuSample, owners: Sequence[ContainerJob],
                  pid_container: Callable[[int], str | None] | None) -> list[int]:
    """How a shared GPU's energy is split among ``owners`` (module docstring): SM
    utilisation of their processes, else their GPU memory, else their shares."""
    if pid_container is not None:
        index = {c.container_id: k for k, c in enumerate(owners)}
        for per_pid, scale in ((sample.process_sm, 1000.0), (sample.process_memory_mib, 1.0)):
            weights = [0] * len(owners)
            for pid, value in per_pid:
                k = index.get(pid_container(pid) or "")
                if k is not None and value > 0:
                    weights[k] += int(round(value * scale))
            if sum(weights) > 0:
                return weights
    return [c.share for c in owners]


def attribute(readings: Iterable[GpuSample | GpuGap], host: HostSample | None,
              containers: Sequence[ContainerJob], node_gpus: Iterable[str], *,
              pid_container: Callable[[int], str | None] | None = None
              ) -> tuple[list[JobShare], list[Mismatch]]:
    """The jobs' shares of one interval's energy, and what did not square.

    ``readings`` are the GPU sampler's output for the interval (a GPU without a sample
    this time contributes nothing now: its energy comes in a later interval's sample);
    ``host`` the host sample (None: no host energy to share); ``node_gpus`` the UUIDs the
    node samples. ``pid_container`` enables the NVML process check.
    """
    samples: dict[str, GpuSample] = {}
    unknown: set[str] = set()
    for r in readings:
        if isinstance(r, GpuGap):
            unknown.add(r.uuid)
        else:
            samples[r.uuid] = r
            if r.energy_mj is None:
                unknown.add(r.uuid)
    owners, findings = gpu_owners(containers, node_gpus)
    if pid_container is not None:
        findings += check_processes(samples.values(), owners, pid_container)

    gpu_mj: dict[str, int] = {c.container_id: 0 for c in containers}
    gpu_known: dict[str, bool] = {c.container_id: True for c in containers}
    weights: dict[str, int] = {c.container_id: 0 for c in containers}
    for uuid, cs in owners.items():
        for c in cs:
            weights[c.container_id] += c.share
        if uuid in unknown:
            for c in cs:
                gpu_known[c.container_id] = False
            continue
        sample = samples.get(uuid)
        if sample is None or sample.energy_mj is None:
            continue
        weights_here = ([c.share for c in cs] if len(cs) < 2
                        else usage_weights(sample, cs, pid_container))
        for c, part in zip(cs, split(sample.energy_mj, weights_here)):
            gpu_mj[c.container_id] += part

    host_mj: list[int | None]
    if host is None or host.energy_mj is None:
        host_mj = [None] * len(containers)
    else:
        host_mj = list(split(host.energy_mj, [weights[c.container_id] for c in containers]))
    shares = [JobShare(job_id=c.job_id, attempt=c.attempt,
                       gpu_uuids=tuple(u for u in dict.fromkeys(c.gpu_uuids) if u in owners),
                       gpu_energy_mj=gpu_mj[c.container_id] if gpu_known[c.container_id]
                       else None,
                       host_energy_mj=h)
              for c, h in zip(containers, host_mj)]
    return shares, findings


@dataclass
class _Window:
    gpu_uuids: tuple[str, ...]
    known: tuple[bool, bool]
    t: float = 0.0
    interval_s: float = 0.0
    gpu_mj: int = 0
    host_mj: int = 0

    def record(self, job_id: str, attempt: int) -> JobEnergy:
        return JobEnergy(job_id=job_id, attempt=attempt, t=self.t, interval_s=self.interval_s,
                         gpu_energy_mj=self.gpu_mj if self.known[0] else None,
                         host_energy_mj=self.host_mj if self.known[1] else None,
                         gpu_uuids=self.gpu_uuids)


@dataclass
class JobEnergyWindows:
    """Sums each job's interval shares into windows of about ``window_s`` seconds.

    A window is closed (one :class:`JobEnergy`) when it has covered ``window_s``, when the
    job is no longer among the running containers (its ``die``: short containers are not
    lost), when whether its GPU or host energy is known changes, or on :meth:`flush`
    (shutdown). Windows end at a sample time, so (job, attempt, t) is unique.
    """

    window_s: float = 60.0
    _open: dict[tuple[str, int], _Window] = field(default_factory=dict)

    def add(self, t: float, interval_s: float, shares: Iterable[JobShare]) -> list[JobEnergy]:
        out: list[JobEnergy] = []
        seen: set[tuple[str, int]] = set()
        for s in shares:
            key = (s.job_id, s.attempt)
            seen.add(key)
            known = (s.gpu_energy_mj is not None, s.host_energy_mj is not None)
            w = self._open.get(key)
            if w is not None and (w.known != known or w.gpu_uuids != s.gpu_uuids):
                out.append(self._open.pop(key).record(*key))
                w = None
            if w is None:
                w = self._open[key] = _Window(gpu_uuids=s.gpu_uuids, known=known)
            w.t = t
            w.interval_s += interval_s
            w.gpu_mj += s.gpu_energy_mj or 0
            w.host_mj += s.host_energy_mj or 0
            if w.interval_s >= self.window_s - 1e-9:
                out.append(self._open.pop(key).record(*key))
        for key in [k for k in self._open if k not in seen]:
            out.append(self._open.pop(key).record(*key))
        return out

    def flush(self) -> list[JobEnergy]:
        out = [w.record(*key) for key, w in self._open.items()]
        self._open.clear()
        return out


class ProcContainers:
    """Which container a host PID runs in, from ``/proc/<pid>/cgroup`` (Docker puts the
    64-hex container id in the cgroup path, with cgroup v1 or v2, either driver).

    Cheap enough for every interval: NVML lists a handful of PIDs, each one small read,
    cached until the PID disappears from a later lookup batch.
    """

    def __init__(self, proc_root: str | Path = "/proc") -> None:
        self.root = Path(proc_root)
        self._cache: dict[int, str | None] = {}

    def __call__(self, pid: int) -> str | None:
        if pid in self._cache:
            return self._cache[pid]
        try:
            text = (self.root / str(pid) / "cgroup").read_text()
        except OSError:
            return None          # gone, or not visible: not cached (it may appear)
        ids = _CONTAINER_ID.findall(text)
        found = ids[-1] if ids else None
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[pid] = found
        return found
