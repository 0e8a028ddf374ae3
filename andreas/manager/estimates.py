"""What the optimizer needs to know about the hardware and the applications, best source first.

Epoch time of an application on g GPUs of a type, per (application, type, g):

1. ``measured``: the median of the most recent ``RECENT_EPOCHS`` epoch events of that
   application on that type and g (at least ``MIN_EPOCHS``);
2. the ``app_profiles`` row the Job Profiler wrote (tagged with the row's ``source``);
3. ``model``: the Job Profiler's Amdahl fit in ``app_models``, tagged with its error and
   the prediction's confidence (``model(mape 4%, conf 0.81)``, ``andreas.profiler.fit``);
4. ``profiles``: ``profiles/apps.toml`` (an application without an entry for a type cannot
   run on it);
5. ``unprofiled``: an application nobody knows gets ``unprofiled_epoch_s`` on every type
   and g (no speed-up assumed, so it is not given many GPUs on a guess); logged once.

Node power ``P_n(g)``, g = 0 .. G, per g: ``measured`` (mean node power with g GPUs busy
over the last ``POWER_WINDOW_S`` from the 1-minute aggregates: the sum over the node's GPUs
of each GPU's mean, plus the mean host power; at least ``min_power_samples`` GPU samples
and every GPU of the node seen) else ``profiles`` (``profiles/`` power model) else
``default`` (a GPU type the profiles lack: a conservative generic GPU, logged once).

Every table is read with one query per call, whatever the number of jobs and nodes.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from andreas.config import ManagerSettings
from andreas.errors import InputError
from andreas.profiler.fit import confidence, source_tag
from andreas.profiles import Profiles, load_profiles
from andreas.store.profiles import ModelFit, ProfileRow, app_models, app_profiles
from andreas.store.epochs import epochs_after, newest_epochs
from andreas.store.nodes import Db
from andreas.store.samples import NodePower, mean_power_table

log = logging.getLogger(__name__)

RECENT_EPOCHS = 20
MIN_EPOCHS = 3
POWER_WINDOW_S = 24 * 3600.0
DEFAULT_UNPROFILED_EPOCH_S = 3600.0
ID_MARGIN = 1000                  # epoch event ids re-read at each incremental refresh
# A GPU type missing from profiles/gpus.toml: a generic data-centre GPU, on the high side.
DEFAULT_GPU_IDLE_W = 50.0
DEFAULT_GPU_BUSY_W = 300.0


@dataclass(frozen=True, kw_only=True)
class EpochEstimate:
    """Seconds per epoch and where the number comes from (``samples``: epochs measured;
    ``confidence``: the profiler model's, in [0, 1], None for other sources)."""

    seconds: float
    source: str
    samples: int = 0
    confidence: float | None = None


@dataclass(frozen=True, kw_only=True)
class PowerCurve:
    """``power_w[g]``: watts of the whole node with g GPUs busy; per-g sources and samples.

    ``source`` is ``measured`` or ``profiles`` (or ``default``) when every g has that
    source, ``mixed`` otherwise; ``samples`` counts the measured GPU samples.
    """

    node: str
    power_w: tuple[float, ...]
    sources: tuple[str, ...]
    samples_per_g: tuple[int, ...]

    @property
    def source(self) -> str:
        kinds = set(self.sources)
        return kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def samples(self) -> int:
        return sum(self.samples_per_g)


@dataclass(frozen=True, kw_only=True)
class NodeHardware:
    """What the power estimate needs of a node: its id, name, GPU type and GPU count."""

    id: int
    name: str
    gpu_type: str
    gpus: int


class Estimator:
    """Epoch times and power curves with their sources; ``profiles`` default: the repo's."""

    def __init__(self, settings: ManagerSettings | None = None, *,
                 profiles: Profiles | None = None,
                 unprofiled_epoch_s: float | None = None,
                 power_refresh_s: float = 0.0) -> None:
        self.settings = settings or ManagerSettings()
        self._profiles = profiles
        self.unprofiled_epoch_s = float(
            unprofiled_epoch_s if unprofiled_epoch_s is not None
            else self.settings.unprofiled_epoch_s)
        self._logged: set[tuple] = set()
        self.power_refresh_s = power_refresh_s
        self._epochs: dict[tuple[str, str, int], dict[int, tuple[float, float]]] = {}
        self._epoch_max_id: int | None = None
        self._power: tuple[float, dict[tuple[int, int], NodePower]] | None = None

    @property
    def profiles(self) -> Profiles:
        if self._profiles is None:
            self._profiles = load_profiles()
        return self._profiles

    def _once(self, key: tuple, message: str, *args) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning(message, *args)

    # ----------------------------------------------------------------- epoch times

    def epoch_tables(self, db: Db, apps: Iterable[str],
                     types: Mapping[str, int]) -> dict[tuple[str, str], tuple[EpochEstimate, ...]]:
        """(application, GPU type) -> estimates for g = 1 .. ``types[type]``; a pair is
        missing when the application cannot run on that type (profiles say so)."""
        apps = sorted(set(apps))
        out: dict[tuple[str, str], tuple[EpochEstimate, ...]] = {}
        if not apps or not types:
            return out
        measured = self._measured_epochs(db, apps)
        rows = app_profiles(db, apps)
        models = app_models(db, apps)
        for app in apps:
            for gpu_type, max_g in types.items():
                if max_g < 1:
                    continue
                est = self._estimates(app, gpu_type, max_g, measured, rows, models)
                if est is not None:
                    out[(app, gpu_type)] = est
        return out

    def _estimates(self, app: str, gpu_type: str, max_g: int,
                   measured: Mapping[tuple[str, str, int], list[float]],
                   rows: Mapping[tuple[str, str, int], ProfileRow],
                   models: Mapping[tuple[str, str], ModelFit]
                   ) -> tuple[EpochEstimate, ...] | None:
        profile = self.profiles.apps.get(app)
        profile_t1 = profile.epoch_s.get(gpu_type) if profile is not None else None
        direct: dict[int, EpochEstimate] = {}          # measured, else the profiler's row
        for g in range(1, max_g + 1):
            m = measured.get((app, gpu_type, g))
            if m is not None and len(m) >= MIN_EPOCHS:
                direct[g] = EpochEstimate(seconds=statistics.median(m), source="measured",
                                          samples=len(m))
            elif (app, gpu_type, g) in rows:
                row = rows[(app, gpu_type, g)]
                direct[g] = EpochEstimate(seconds=row.epoch_time_s, source=row.source,
                                          samples=row.samples)
        model = models.get((app, gpu_type)) or self._fit_known(direct, max_g, profile)
        known_here = (profile_t1 is not None or model is not None
                      or any((app, gpu_type, g) in rows or (app, gpu_type, g) in measured
                             for g in range(1, max_g + 1)))
        if profile is not None and not known_here:
            return None              # profiles say: this application does not run on this type
        out = []
        for g in range(1, max_g + 1):
            if g in direct:
                out.append(direct[g])
            elif model is not None:
                serial = model.serial_fraction
                out.append(EpochEstimate(seconds=model.t1_s * (serial + (1 - serial) / g),
                                         source=source_tag(model.mape, model.gpu_counts, g),
                                         samples=model.samples,
                                         confidence=confidence(model.mape, model.gpu_counts, g)))
            elif profile is not None and profile_t1 is not None:   # (t1 only with a profile)
                s = profile.serial_fraction
                out.append(EpochEstimate(seconds=round(profile_t1 * (s + (1 - s) / g), 3),
                                         source="profiles"))
            else:
                self._once(("app", app), "application %r: no measured epochs, profiler data or "
                           "profiles/ entry; assuming %.0f s per epoch on any GPU count until "
                           "it is measured", app, self.unprofiled_epoch_s)
                out.append(EpochEstimate(seconds=self.unprofiled_epoch_s, source="unprofiled"))
        return tuple(out)

    @staticmethod
    def _fit_known(direct: dict[int, EpochEstimate], max_g: int, profile) -> ModelFit | None:
        """Without an app_models row, Amdahl's law fitted to the GPU counts that have
        measured epochs or profile rows, so that the other counts of this type get a
        prediction (with its confidence) instead of the unprofiled guess. None: no data,
        or every count has its own."""
        if not direct or len(direct) == max_g:
            return None
        from andreas.profiler.fit import DEFAULT_PRIOR_SERIAL, fit_amdahl

        prior = profile.serial_fraction if profile is not None else DEFAULT_PRIOR_SERIAL
        fit = fit_amdahl(list(direct), [e.seconds for e in direct.values()],
                         prior_serial_fraction=prior)
        return ModelFit(t1_s=fit.t1_s, serial_fraction=fit.serial_fraction,
                        samples=len(direct), mape=fit.mape, gpu_counts=tuple(fit.gpu_counts))

    def _measured_epochs(self, db: Db, apps: Sequence[str]
                         ) -> dict[tuple[str, str, int], list[float]]:
        """The most recent epoch durations per (application, type, g).

        The first call reads the newest ``RECENT_EPOCHS`` per key (a window query); later
        calls read only events added since (by id, re-reading the last ``ID_MARGIN`` ids
        because concurrent inserts may commit out of id order) and merge them, so the cost
        per rescheduling does not grow with the history.
        """
        if self._epoch_max_id is None:
            events, top = newest_epochs(db, RECENT_EPOCHS)
        else:
            events, top = epochs_after(db, self._epoch_max_id - ID_MARGIN), None
        for e in events:
            if e.seconds is None or e.seconds <= 0:
                continue
            recent = self._epochs.setdefault((e.application, e.gpu_type, e.gpus), {})
            recent[e.event_id] = (e.end_s, e.seconds)
            if len(recent) > 2 * RECENT_EPOCHS:
                keep = sorted(recent.items(), key=lambda kv: kv[1][0])[-RECENT_EPOCHS:]
                recent.clear()
                recent.update(keep)
            top = max(top or 0, e.event_id)
        if top is not None:
            self._epoch_max_id = max(self._epoch_max_id or 0, int(top))
        wanted = set(apps)
        return {key: [d for _, d in sorted(v.values())[-RECENT_EPOCHS:]]
                for key, v in self._epochs.items() if key[0] in wanted}

    # ----------------------------------------------------------------- power

    def power_curves(self, db: Db, nodes: Iterable[NodeHardware],
                     now_s: float, window_s: float = POWER_WINDOW_S) -> dict[str, PowerCurve]:
        """Node name -> power curve over g = 0 .. node GPUs (two queries for all nodes; with
        ``power_refresh_s`` > 0 the means are reused for that long: a 24-h mean moves
        slowly and reading a day of aggregates is the most expensive query here)."""
        nodes = list(nodes)
        if not nodes:
            return {}
        cached = self._power
        if (cached is not None and self.power_refresh_s > 0
                and 0 <= now_s - cached[0] < self.power_refresh_s):
            table = cached[1]
        else:
            table = mean_power_table(db, now_s - window_s, now_s + 60.0)
            self._power = (now_s, table)
        return {n.name: self._curve(n, table) for n in nodes}

    def _curve(self, node: NodeHardware, table: Mapping[tuple[int, int], NodePower]
               ) -> PowerCurve:
        fallback, fallback_source = self._profile_curve(node)
        host = self._profile_host(node)
        power, sources, samples = [], [], []
        for g in range(node.gpus + 1):
            m = table.get((node.id, g))
            if (m is not None and m.samples >= self.settings.min_power_samples
                    and m.gpus_seen >= node.gpus and m.samples > 0):
                host_w = m.host_w if m.host_w is not None else host[g]
                power.append(round(m.gpu_w + host_w, 3))
                sources.append("measured")
                samples.append(m.samples)
            else:
                power.append(fallback[g])
                sources.append(fallback_source)
                samples.append(0)
        return PowerCurve(node=node.name, power_w=tuple(power), sources=tuple(sources),
                          samples_per_g=tuple(samples))

    def _profile_curve(self, node: NodeHardware) -> tuple[tuple[float, ...], str]:
        if node.gpus < 1:
            return (0.0,), "profiles"
        try:
            return self.profiles.node_power_w(node.gpu_type, node.gpus), "profiles"
        except InputError:
            self._once(("gpu", node.gpu_type), "GPU type %r is not in profiles/gpus.toml: "
                       "node %s is costed as a generic %.0f/%.0f W (idle/busy) GPU until its "
                       "power is measured", node.gpu_type, node.name, DEFAULT_GPU_IDLE_W,
                       DEFAULT_GPU_BUSY_W)
            host = self._profile_host(node)
            return tuple(round(host[g] + node.gpus * DEFAULT_GPU_IDLE_W
                               + g * (DEFAULT_GPU_BUSY_W - DEFAULT_GPU_IDLE_W), 3)
                         for g in range(node.gpus + 1)), "default"

    def _profile_host(self, node: NodeHardware) -> tuple[float, ...]:
        """The profiles' host watts with g busy (used where a node reports no host power)."""
        host = self.profiles.host(node.gpu_type)
        gpus = max(node.gpus, 1)
        return tuple(host.idle_w + (host.busy_w - host.idle_w) * g / gpus
                     for g in range(node.gpus + 1))
