"""Charging the time the agent was not running (it was killed, crashed or stopped).

NVML's energy counter of a GPU counts on while nobody reads it, so a restarted agent
can charge the gap: the counter now minus the counter of the GPU's last *stored* sample
is exactly the energy of the interval in between. What "stored" means: the delivery
thread calls :meth:`Resume.stored` after every batch the database committed or the spool
made durable, and the newest sample per GPU (with its counter: ``GpuSample.counter_mj``)
and each running job's newest stored energy window are kept in ``resume.json`` in the
spool directory (replaced atomically, not fsync'd: only a crash of the machine loses the
last writes, and a reboot resets the counters anyway, which :meth:`Resume.gap` detects
by the boot id).

At start, :meth:`Resume.gap` turns the counters now into: one GPU sample per GPU over the
gap (energy from the counters, mean power derived), one job-energy window per job that
held whole GPUs before and still runs in the same container now (its GPUs' energy since
its last stored window; its host share is not known: NULL), and one ``agent_gaps`` row
for the node saying whether the gap was charged, and what was not. A GPU without a
counter, a counter that went down or rose more than the board can draw, another boot,
or no state at all: not charged, and the row says why, so reports can say so.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from agents.entries import EntryKind
from agents.attribution import ContainerJob
from agents.records import AgentGap, GpuSample, JobEnergy
from andreas.infra import procs
from andreas.infra.fileio import replace_atomic
from andreas.sources import EnergySource

log = logging.getLogger(__name__)

STATE_FILE = "resume.json"
HISTORY = 600                 # stored samples remembered per GPU (to find a window's end)
MIN_GAP_S = 3.0               # shorter pauses are the sampling's own jitter


@dataclass(frozen=True, kw_only=True)
class Gap:
    """What a restart charges: GPU samples and job windows over the gap, and its row."""

    samples: tuple[GpuSample, ...]
    jobs: tuple[JobEnergy, ...]
    row: AgentGap


class Resume:
    """The agent's state for charging a gap; see the module docstring."""

    def __init__(self, directory: str | Path, *, boot: str | None = None) -> None:
        self.path = Path(directory) / STATE_FILE
        self.boot = boot if boot is not None else procs.boot_id()
        self.previous = self._load()
        self._history: dict[str, collections.deque[tuple[float, int | None]]] = {}
        self._windows: dict[tuple[str, int], dict[str, Any]] = {}
        self.holding: tuple[ContainerJob, ...] = ()      # set by the sampling loop

    # ------------------------------------------------------------------ while running

    def stored(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Entries now durable (database or spool): remember, then write the file."""
        changed = False
        for e in entries:
            kind = e.get("kind")
            if kind == EntryKind.GPU and e.get("counter_mj") is not None:
                history = self._history.setdefault(e["uuid"],
                                                   collections.deque(maxlen=HISTORY))
                if not history or float(e["t"]) > history[-1][0]:   # not a replay
                    history.append((float(e["t"]), int(e["counter_mj"])))
                    changed = True
            elif kind == EntryKind.JOB_ENERGY:
                marks = {u: self._counter_at(u, float(e["t"])) for u in e.get("gpu_uuids") or ()}
                self._windows[(e["job_id"], int(e["attempt"]))] = {
                    "t": float(e["t"]), "counters": marks}
                changed = True
        if changed:
            self._write()

    def _counter_at(self, uuid: str, t: float) -> list[float | int] | None:
        """The newest stored sample of the GPU at or before ``t``: [t, counter]."""
        for ts, counter in reversed(self._history.get(uuid, ())):
            if ts <= t + 1e-6 and counter is not None:
                return [ts, counter]
        return None

    def _write(self) -> None:
        running = {(j.job_id, j.attempt): j for j in self.holding}
        jobs = []
        for key, j in running.items():
            w = self._windows.get(key)
            jobs.append({"job_id": j.job_id, "attempt": j.attempt,
                         "container_id": j.container_id, "gpu_uuids": list(j.gpu_uuids),
                         "gpu_milli": j.gpu_milli, "window": w})
        for key in [k for k in self._windows if k not in running]:
            del self._windows[key]                 # ended: no longer needed
        state = {"boot": self.boot,
                 "gpus": {u: list(h[-1]) for u, h in self._history.items() if h},
                 "jobs": jobs}
        try:
            replace_atomic(self.path, json.dumps(state), durable=False)
        except OSError as e:
            log.warning("resume state %s not written: %s", self.path, e)

    def _load(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning("resume state %s unreadable (%s): a gap since the last run is "
                        "recorded as not measured", self.path, e)
            return {}
        return state if isinstance(state, dict) else {}

    # ------------------------------------------------------------------ at start

    def gap(self, now_wall: float, counters: Mapping[str, int | None],
            running: Iterable[ContainerJob], *,
            power_limits_w: Mapping[str, float | None] | None = None) -> Gap | None:
        """What to charge for the time since the previous run (None: no previous run,
        or a pause too short to count)."""
        prev = self.previous
        self.previous = None
        if prev is None:
            return None
        gpus = (cast("dict[str, Any]", prev.get("gpus"))
                if isinstance(prev.get("gpus"), dict) else {})
        starts = [float(v[0]) for v in gpus.values() if _mark(v)]
        if not starts:
            return _uncharged(now_wall, "no sample of the previous run was stored") \
                if prev == {} else None
        start = min(starts)
        if now_wall - start < MIN_GAP_S:
            return None
        problems: list[str] = []
        if prev.get("boot") != self.boot:
            problems.append("the machine was restarted (counters reset)")
        samples, now_counter = [], {}
        for uuid, mark in gpus.items():
            if not _mark(mark) or problems:
                continue
            counter = counters.get(uuid)
            t_prev, c_prev = float(mark[0]), int(mark[1])
            limit = (power_limits_w or {}).get(uuid)
            why = _implausible(counter, c_prev, now_wall - t_prev, limit)
            if why:
                problems.append(f"GPU {uuid}: {why}")
                continue
            assert counter is not None
            now_counter[uuid] = counter
            samples.append(GpuSample(uuid=uuid, t=now_wall, interval_s=now_wall - t_prev,
                                     power_w=None, power_source=None,
                                     energy_mj=counter - c_prev,
                                     energy_source=EnergySource.COUNTER, counter_mj=counter))
        missing = [u for u in counters if u not in gpus]
        if missing and not problems:
            problems.append(f"no stored sample of GPU {', '.join(missing)}")
        jobs, unattributed = _jobs(prev.get("jobs") or [], now_wall, now_counter,
                                   {(j.job_id, j.attempt, j.container_id) for j in running})
        parts = [f"agent not running for {now_wall - start:.0f} s"]
        if samples:
            parts.append(f"GPU energy of {len(samples)} GPU(s) from their energy counters")
        if jobs:
            parts.append("charged to " + ", ".join(f"{j.job_id}/{j.attempt}" for j in jobs))
        parts += problems + unattributed + ["host energy not measured"]
        row = AgentGap(start_s=start, end_s=now_wall, charged=bool(samples) and not problems,
                       reason="; ".join(parts)[:255])
        return Gap(samples=tuple(samples), jobs=tuple(jobs), row=row)


def _mark(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value))


def _implausible(counter: int | None, before: int, interval_s: float,
                 limit_w: float | None) -> str:
    if counter is None:
        return "no energy counter"
    if counter < before:
        return f"energy counter went down ({before} -> {counter} mJ): reset"
    if limit_w and counter - before > 2.0 * limit_w * interval_s * 1000.0:
        return f"energy counter rose by {counter - before} mJ, more than the board can draw"
    return ""


def _jobs(held: list[Any], now_wall: float, counters: Mapping[str, int],
          running: set[tuple[str, int, str]]) -> tuple[list[JobEnergy], list[str]]:
    """Job windows over the gap for jobs that held whole GPUs before and still run."""
    out, problems = [], []
    for h in held:
        if not isinstance(h, dict) or not isinstance(h.get("job_id"), str):
            continue
        name = f"{h['job_id']}/{h.get('attempt')}"
        uuids = [u for u in h.get("gpu_uuids") or [] if isinstance(u, str)]
        window = h.get("window") if isinstance(h.get("window"), dict) else None
        marks = window.get("counters", {}) if window is not None else {}
        if (h["job_id"], h.get("attempt"), h.get("container_id")) not in running:
            problems.append(f"{name} ended while the agent was down: not attributed")
        elif h.get("gpu_milli") is not None:
            problems.append(f"{name} shares a GPU: not attributed")
        elif window is None or not uuids or not all(
                _mark(marks.get(u)) and u in counters for u in uuids):
            problems.append(f"{name}: no stored window to count from: not attributed")
        else:
            energy = sum(counters[u] - int(marks[u][1]) for u in uuids)
            out.append(JobEnergy(job_id=h["job_id"], attempt=int(h["attempt"]), t=now_wall,
                                 interval_s=now_wall - float(window["t"]),
                                 gpu_energy_mj=max(0, energy), host_energy_mj=None,
                                 gpu_uuids=tuple(uuids)))
    return out, problems


def _uncharged(now_wall: float, why: str) -> Gap:
    return Gap(samples=(), jobs=(), row=AgentGap(start_s=now_wall, end_s=now_wall,
                                                  charged=False, reason=why[:255]))
