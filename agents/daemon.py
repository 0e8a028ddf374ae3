"""The node agent's daemon: one sampling loop, the container tracker, and delivery.

Threads and why:

- the **sampling loop** (the main thread, so SIGTERM/SIGINT handlers run promptly) ticks
  every ``interval_s`` on the monotonic clock: GPU sampler, host sampler, attribution,
  then hands entries to delivery. It never does I/O on the database and never blocks on
  it, so a slow or absent database cannot disturb the measurements;
- the **epoch tracker** (:class:`agents.tracker.EpochTracker`) follows the labelled
  containers' logs in its own threads and reports epochs (straight to delivery) and
  container starts and exits (to the sampling loop, which turns them into the GPU
  ownership that attribution uses; an exit is kept for the interval it happened in, so
  a short container still gets its energy);
- the **delivery thread** (:class:`agents.delivery.Delivery`) batches to the store and
  spools while it is unreachable.

With fake GPUs (``--fake-gpus``, only when asked for) the loop also tells the fake which
containers hold which GPUs, so the simulated utilization follows the real containers.

Every OS input (samplers, Docker client, store writer, clocks) is a constructor argument
with the production default, so tests run the same loop with stubs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.attribution import ContainerJob, JobEnergyWindows, Mismatch, ProcContainers, attribute
from agents.config import AgentConfig
from agents.delivery import Delivery, DeliveryMode, Writer
from agents.entries import heartbeat, to_entry
from agents.fake_gpus import drive_fake
from agents.fence import Fence, Verdicts
from agents.meter import Meter
from agents.bindings import NvmlModule
from agents.epochs import ContainerExit, ContainerInfo
from agents.records import EpochRecord, GpuGap, GpuSample
from agents.resume import Resume
from agents.seams import GpuSource, HostSource, Tracker
from agents.spool import Spool
from agents.store_writer import StoreWriter
from andreas.config import ExecutorKind
from andreas.store.registry import NodeSpec, agent_engine
from andreas.infra.backoff import Backoff
from andreas.store.engine import is_sqlite, parse_url

if TYPE_CHECKING:                   # both imported on use
    from agents.nvml_fake import FakeNvml
    from agents.powerlimits import LimitApplier

log = logging.getLogger(__name__)

RECONCILE_AFTER_S = 5.0      # a followed container the tracker no longer reads is gone
GAP_WAIT_S = 30.0            # a restart's gap waits this long at most for the containers
# Ticks are on a grid (t0 + k * interval); each one wakes a little late, so two ticks can be
# a few ms *less* than an interval apart. The GPU sampler emits energy only over windows of
# at least its minimum: with exactly the interval, about every other window would miss it
# and the GPU rows would come at 0.5 Hz. A 5 % tolerance keeps one row per tick and every
# window still at least 0.95 of the minimum (1 s by default: counters tick every 10-100 ms).
TICK_TOLERANCE = 0.05
DOCKER_RETRY = Backoff(initial_s=5.0, max_s=300.0)


@dataclass
class _Running:
    job: ContainerJob
    since_mono: float


@dataclass
class AgentStats:
    ticks: int = 0
    overruns: int = 0          # ticks that started late by more than one interval
    tick_errors: int = 0
    clock_jumps: int = 0       # the wall clock moved unlike the monotonic one (NTP, a hand)
    findings: list[str] = field(default_factory=list)


# Samples are stamped with the wall clock: a jump this large between two ticks (against
# the monotonic clock) is a clock set by hand or a broken NTP, and is said loudly.
CLOCK_JUMP_S = 60.0


def node_gpu_type(models: list[str]) -> str:
    """The profiles/ GPU type of the node ("V100"), else the most common NVML model name."""
    from agents.host import profile_gpu_type

    found = profile_gpu_type(models) if models else None
    if found:
        return found
    return max(set(models), key=models.count) if models else "none"


class Agent:
    """The daemon; :meth:`start`, then :meth:`run` until the stop event, then :meth:`close`."""

    def __init__(self, cfg: AgentConfig, *, gpu_sampler: GpuSource | None = None,
                 host_sampler: HostSource | None = None,
                 fake: FakeNvml | None = None, writer: Writer | None = None,
                 spool: Spool | None = None,
                 tracker_factory: Callable[..., Tracker] | None = None,
                 docker_client_factory: Callable[[str], Any] | None = None,
                 pid_container: Callable[[int], str | None] | None = None,
                 fence_verdicts: Verdicts | None = None,
                 mono: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.mono, self.wall = mono, wall
        self.fake = fake
        self.gpus = gpu_sampler
        self.host = host_sampler
        self.spool = spool
        self.writer = writer
        self._tracker_factory = tracker_factory
        self._docker_client_factory = docker_client_factory
        self.pid_container = pid_container if pid_container is not None else ProcContainers()
        self.tracker: Tracker | None = None
        self.delivery: Delivery | None = None
        self.windows = JobEnergyWindows(window_s=cfg.job_energy_window_s)
        self.stats = AgentStats()
        self.meter = Meter()               # totals for the metrics exporter (agents/exporter.py)
        self.started_wall = wall()
        self._events: queue.SimpleQueue[tuple[str, ContainerInfo | ContainerExit]] = \
            queue.SimpleQueue()
        self._running: dict[str, _Running] = {}
        self._spec: NodeSpec | None = None
        self._spec_key: tuple | None = None
        self._spec_sampled: tuple[str, ...] = ()
        self._fake_busy: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = {}
        self._pid_cache: dict[str, tuple[int, ...]] = {}
        self._findings: set[tuple] = set()
        self._next_heartbeat = 0.0
        self._docker_retry_at = 0.0
        self._docker_failures = 0           # failed connections to Docker in a row
        self._fence_verdicts = fence_verdicts
        self.resume: Resume | None = None
        self._gap_at: tuple[float, float, dict[str, int | None]] | None = None
        self._gap_ready = False
        self.fence: Fence | None = None
        self._fence_stop = threading.Event()
        self._fence_thread: threading.Thread | None = None
        self._last_clock: tuple[float, float] | None = None
        self.limits: LimitApplier | None = None
        self._limits_thread: threading.Thread | None = None
        self._current: list[ContainerJob] = []

    # ------------------------------------------------------------------ life cycle

    def _gpu_source(self) -> GpuSource:
        """The GPU source that :meth:`start` set; asking before it is a bug."""
        if self.gpus is None:
            raise RuntimeError("agent: GPU source used before start()")
        return self.gpus

    def _host_source(self) -> HostSource:
        """The host source that :meth:`start` set; asking before it is a bug."""
        if self.host is None:
            raise RuntimeError("agent: host source used before start()")
        return self.host

    def start(self) -> None:
        """Open the spool, the samplers (NVML must work: NvmlUnavailable otherwise) and
        delivery, and start following containers. The database may be down: delivery
        registers the node as soon as it answers and spools until then."""
        cfg = self.cfg
        if self.spool is None:
            self.spool = Spool(cfg.spool_dir, max_bytes=cfg.spool_max_bytes)
        self.resume = Resume(self.spool.directory)
        if self.gpus is None:
            self.gpus = self._make_gpu_sampler()
        inventory = self.gpus.start()
        log.info("node %s: %d GPU(s): %s", cfg.node_name, len(inventory),
                 ", ".join(f"{g.uuid} ({g.model})" for g in inventory) or "none")
        if self.host is None:
            self.host = self._make_host_sampler(inventory)
        self._refresh_spec()
        if self.writer is None:
            self_register = cfg.self_register
            if self_register is None:
                self_register = is_sqlite(parse_url(cfg.db_url))
            self.writer = StoreWriter(agent_engine(cfg.db_url, cfg.db_password_file),
                                      spec=self.node_spec, self_register=self_register)
        self.delivery = Delivery(self.writer, self.spool, batch_rows=cfg.batch_rows,
                                 batch_s=cfg.batch_s, shutdown_s=cfg.shutdown_s,
                                 max_backoff_s=cfg.max_backoff_s,
                                 on_stored=self.resume.stored)
        self.delivery.start()
        log.info("delivering to %s (spool %s, at most %d bytes)", cfg.db_url_masked,
                 cfg.spool_dir, cfg.spool_max_bytes)
        self._start_tracker()
        self._start_fence()
        self._start_limits()

    def node_spec(self) -> NodeSpec:
        """The inventory as last seen by the sampling thread (immutable; any thread)."""
        assert self._spec is not None
        return self._spec

    def published_spec(self) -> NodeSpec | None:
        """:meth:`node_spec`, or None before the first inventory (the metrics exporter)."""
        return self._spec

    def run(self, stop: threading.Event, *, ticks: int | None = None) -> None:
        """Tick every interval until ``stop`` is set (or ``ticks`` ticks have run)."""
        interval = self.cfg.interval_s
        next_tick = self.mono()
        done = 0
        while not stop.is_set():
            self.tick()
            done += 1
            if ticks is not None and done >= ticks:
                return
            next_tick += interval
            now = self.mono()
            if now > next_tick + interval:        # fell behind (suspend, overload): re-phase
                self.stats.overruns += 1
                next_tick = now
            stop.wait(max(0.0, next_tick - self.mono()))

    def close(self) -> None:
        """Stop the fence and following containers, close the open job-energy windows,
        flush delivery (database, else spool), mark the node down, release NVML."""
        self._fence_stop.set()
        if self._fence_thread is not None:
            self._fence_thread.join(timeout=5.0)
        if self._limits_thread is not None:
            self._limits_thread.join(timeout=5.0)
        if self.tracker is not None:
            try:
                self.tracker.stop()
            except Exception:
                log.exception("stopping the epoch tracker")
        if self.delivery is not None:
            self.delivery.put_many([to_entry(r) for r in self.windows.flush()])
            if not self.delivery.stop():
                log.error("delivery did not finish within its shutdown time")
            s = self.delivery.stats
            log.info("delivery: %d written, %d spooled, %d replayed, %d rejected, %d refused "
                     "(spool full); %d outage(s)", s.written, s.spooled, s.replayed,
                     s.rejected, s.refused, s.outages)
            mark_down = getattr(self.writer, "mark_down", None)
            if s.mode is DeliveryMode.DIRECT and mark_down is not None:
                mark_down()
        elif self.spool is not None:          # start() failed before delivery took it over
            self.spool.close()
        if self.writer is not None and hasattr(self.writer, "close"):
            self.writer.close()
        if self.gpus is not None:
            self.gpus.close()

    # ------------------------------------------------------------------ one tick

    def tick(self) -> None:
        """One sampling interval; never raises (a failing tick is logged and counted)."""
        now_mono, now_wall = self.mono(), self.wall()
        self._check_clock(now_mono, now_wall)
        try:
            self._tick(now_mono, now_wall)
        except Exception:
            self.stats.tick_errors += 1
            if self.stats.tick_errors <= 10 or self.stats.tick_errors % 100 == 0:
                log.exception("sampling interval failed (%d so far)", self.stats.tick_errors)
        self.stats.ticks += 1

    def _check_clock(self, now_mono: float, now_wall: float) -> None:
        last, self._last_clock = self._last_clock, (now_mono, now_wall)
        if last is None:
            return
        jump = (now_wall - last[1]) - (now_mono - last[0])
        if abs(jump) >= CLOCK_JUMP_S:
            self.stats.clock_jumps += 1
            log.warning("the wall clock jumped by %+.0f s between two samples (against the "
                        "monotonic clock): samples and epochs are stamped with it, so their "
                        "times are off by that much; check NTP (chrony, timesyncd)", jump)

    def _tick(self, now_mono: float, now_wall: float) -> None:
        assert self.delivery is not None
        if self.tracker is None and self.cfg.docker_url and self.cfg.engine == ExecutorKind.DOCKER \
                and now_mono >= self._docker_retry_at:
            self._start_tracker()
        containers, current = self._containers(now_mono)
        if self.fake is not None:
            self._drive_fake(current)
        if self.limits is not None and current != self._current:
            self.limits.wake()               # a container started or ended: apply now
        self._current = current
        readings = self._gpu_source().sample(now_mono, now_wall)
        if self.stats.ticks == 0 and self.resume is not None \
                and self.resume.previous is not None:
            self._gap_at = (now_mono, now_wall,  # the baseline
                            self._gpu_source().counters())
        if self.limits is not None:
            in_force = self.limits.controller.in_force
            readings = [dataclasses.replace(r, power_limit_w=in_force.get(r.uuid))
                        if isinstance(r, GpuSample) else r for r in readings]
        self._refresh_spec()
        sampled = set(self._spec_sampled)
        busy = {u for c in current for u in c.gpu_uuids if u in sampled}
        host = self._host_source().sample(now_mono, now_wall, len(busy) / max(1, len(sampled)))
        entries = [to_entry(r, busy_gpus=len(busy)) for r in readings
                   if isinstance(r, (GpuSample, GpuGap))]
        shares: list[Any] = []
        if host is not None:
            entries.append(to_entry(host, busy_gpus=len(busy)))
            shares, findings = attribute(readings, host, containers, sampled,
                                         pid_container=self.pid_container)
            self._log_findings(findings)
            entries += [to_entry(r) for r in self.windows.add(now_wall, host.interval_s,
                                                              shares)]
        self.meter.observe(now_wall, [r for r in readings if isinstance(r, (GpuSample, GpuGap))],
                           host, shares)
        if self.resume is not None:
            self.resume.holding = tuple(current)
            if self._gap_at is not None:
                entries += self._charge_gap(now_mono, current, len(busy))
        if now_mono >= self._next_heartbeat:
            entries.append(heartbeat(now_wall))
            self._next_heartbeat = now_mono + self.cfg.heartbeat_s
        self.delivery.put_many(entries)

    def _charge_gap(self, now_mono: float, current: list[ContainerJob],
                    busy: int) -> list[dict]:
        """The time the previous run did not sample, charged from the GPUs' energy
        counters (agents/resume.py), once the containers running now are known (the
        tracker connected, a tick later) or after GAP_WAIT_S."""
        assert self._gap_at is not None and self.resume is not None
        first_mono, first_wall, counters = self._gap_at
        wait = getattr(self.tracker, "wait_connected", None)
        connected = wait is None or wait(0)
        if not (self._gap_ready or now_mono - first_mono >= GAP_WAIT_S):
            self._gap_ready = connected     # one more tick: its starts reach _running
            return []
        self._gap_at = None
        limits = {g.uuid: g.power_limit_w for g in self._gpu_source().inventory}
        gap = self.resume.gap(first_wall, counters, current, power_limits_w=limits)
        if gap is None:
            return []
        (log.warning if not gap.row.charged else log.info)("%s", gap.row.reason)
        return ([to_entry(s, busy_gpus=busy) for s in gap.samples]
                + [to_entry(j) for j in gap.jobs] + [to_entry(gap.row)])

    # ------------------------------------------------------------------ containers

    def _containers(self, now_mono: float) -> tuple[list[ContainerJob], list[ContainerJob]]:
        """(containers to attribute this interval, containers running now): exits since
        the last tick stay in the first list for this one interval."""
        ended: list[ContainerJob] = []
        while True:
            try:
                kind, item = self._events.get_nowait()
            except queue.Empty:
                break
            job = ContainerJob(container_id=item.container_id, job_id=item.job_id,
                               attempt=item.attempt, gpu_uuids=tuple(item.gpu_uuids),
                               gpu_milli=item.gpu_milli,
                               power_limit_w=getattr(item, "power_limit_w", None))
            if kind == "start":
                self._running[item.container_id] = _Running(job, now_mono)
            else:
                gone = self._running.pop(item.container_id, None)
                if gone is not None:     # (else dropped already: its process ended while
                    ended.append(gone.job)   # the engine was away; nothing more to charge)
        if self.tracker is not None and self._running:
            followed = {i.container_id for i in self.tracker.followed()}
            for cid in [c for c, r in self._running.items()
                        if c not in followed and now_mono - r.since_mono > RECONCILE_AFTER_S]:
                ended.append(self._running.pop(cid).job)
        current = [r.job for r in self._running.values()]
        return current + ended, current

    def _start_tracker(self) -> None:
        if self.cfg.engine == ExecutorKind.SLURM:
            from agents.slurm_jobs import SlurmJobTracker

            self.tracker = SlurmJobTracker(node=self.cfg.node_name, on_epoch=self._on_epoch,
                                           on_start=self._on_start, on_exit=self._on_exit,
                                           uuid_of=self._uuid_at,
                                           output_dir=self.cfg.slurm_output_dir,
                                           map_dir=self.cfg.slurm_map_dir,
                                           poll_s=self.cfg.interval_s).start()
            if isinstance(self.pid_container, ProcContainers):   # not a test's own
                self.pid_container = self.tracker.container_of_pid
            log.info("following the andreas jobs Slurm runs on node %s (%s)",
                     self.cfg.node_name, f"map files in {self.cfg.slurm_map_dir}"
                     if self.cfg.slurm_map_dir else "their processes' environment")
            return
        if not self.cfg.docker_url:
            log.info("docker_url is empty: containers are not followed (no epochs, no job "
                     "energy)")
            return
        try:
            client = (self._docker_client_factory or _docker_client)(self.cfg.docker_url)
            factory = self._tracker_factory or _epoch_tracker
            self.tracker = factory(on_epoch=self._on_epoch, on_start=self._on_start,
                                   on_exit=self._on_exit, client=client)
            self.tracker.start()
            self._docker_failures = 0
            log.info("following andreas containers of Docker at %s", self.cfg.docker_url)
        except Exception as e:  # noqa: BLE001 - Docker down: sample anyway, retry later
            self.tracker = None
            delay_s = DOCKER_RETRY.delay_s(self._docker_failures)
            self._docker_failures += 1
            self._docker_retry_at = self.mono() + delay_s
            log.warning("Docker at %s not reachable (%s); containers not followed, retry in "
                        "%.0f s", self.cfg.docker_url, e, delay_s)

    def _uuid_at(self, index: int) -> str | None:
        """The UUID of this node's GPU at NVML index ``index`` (Slurm's GPU index)."""
        return next((g.uuid for g in self._gpu_source().inventory if g.index == index), None)

    def _start_fence(self) -> None:
        """The fence thread (agents/fence.py): stale andreas containers here are stopped."""
        if not self.cfg.docker_url or self.cfg.engine != ExecutorKind.DOCKER:
            return
        verdicts = self._fence_verdicts
        if verdicts is None:
            engine = getattr(self.writer, "engine", None)
            if engine is None:
                log.warning("no store engine: the fence is off")
                return
            verdicts = functools.partial(store_verdicts, engine, self.cfg.node_name)
        url = self.cfg.docker_url
        factory = self._docker_client_factory or default_docker_client
        self.fence = Fence(docker=lambda: factory(url), verdicts=verdicts,
                           check_s=self.cfg.fence_check_s, after_s=self.cfg.fence_after_s,
                           mono=self.mono)
        self._fence_thread = threading.Thread(target=self.fence.run, args=(self._fence_stop,),
                                              name="andreas-fence", daemon=True)
        self._fence_thread.start()
        log.info("fence: checking the andreas containers here every %.0f s; %s",
                 self.cfg.fence_check_s,
                 f"all stopped after {self.cfg.fence_after_s:.0f} s without the store"
                 if self.cfg.fence_after_s > 0 else "never stopped for want of the store")

    def _start_limits(self) -> None:
        """The power-limit thread (agents/powerlimits.py): the planned limits of the running
        attempts, applied through andreas-powerd; what the node can do, to the store."""
        from agents.powerlimits import LimitApplier, LimitController, PowerdClient

        engine = getattr(self.writer, "engine", None)
        if engine is None:
            return
        client = PowerdClient(self.cfg.powerd_socket) if self.cfg.powerd_socket else None
        uuids = [g.uuid for g in self._gpu_source().inventory if not g.mig_enabled]
        controller = LimitController(client, self.cfg.node_name, uuids)
        self.limits = LimitApplier(
            controller, planned=functools.partial(store_limits, engine, self.cfg.node_name),
            current=lambda: self._current,
            report=functools.partial(store_caps, engine, self.cfg.node_name),
            every_s=self.cfg.fence_check_s)
        self._limits_thread = threading.Thread(target=self.limits.run,
                                               args=(self._fence_stop,),
                                               name="andreas-powerlimits", daemon=True)
        self._limits_thread.start()

    def _on_epoch(self, record: EpochRecord) -> None:
        assert self.delivery is not None
        self.delivery.put(to_entry(record))

    def _on_start(self, info: ContainerInfo) -> None:
        self._events.put(("start", info))

    def _on_exit(self, info: ContainerExit) -> None:
        self._events.put(("exit", info))

    def _drive_fake(self, current: list[ContainerJob]) -> None:
        """Fake GPUs follow the containers that hold them (:func:`drive_fake`)."""
        self._fake_busy = drive_fake(self.fake, current, self._container_pids,
                                     self._fake_busy)

    def _container_pids(self, container_id: str) -> tuple[int, ...]:
        pids_of = getattr(self.tracker, "pids_of", None)
        if pids_of is not None:                 # Slurm jobs: their processes, as scanned
            return tuple(pids_of(container_id))
        cache = self._pid_cache
        if container_id not in cache:
            pid = 0
            try:
                docker_tracker: Any = self.tracker   # followed here: Docker's, with a client
                c = docker_tracker.client.containers.get(container_id)
                pid = int((c.attrs.get("State") or {}).get("Pid") or 0)
            except Exception as e:  # noqa: BLE001
                log.debug("container %s: no PID (%s)", container_id[:12], e)
            cache[container_id] = (pid,) if pid > 0 else ()
            if len(cache) > 1000:
                cache.clear()
        return cache[container_id]

    # ------------------------------------------------------------------ helpers

    def _refresh_spec(self) -> None:
        inventory = tuple(self._gpu_source().inventory)
        unhealthy = frozenset(self._gpu_source().unhealthy)
        key = (inventory, unhealthy)
        if key == self._spec_key:
            return
        self._spec_key = key
        self._spec_sampled = tuple(g.uuid for g in inventory if not g.mig_enabled)
        self._spec = NodeSpec(name=self.cfg.node_name,
                              docker_endpoint=self.cfg.registered_docker_endpoint,
                              gpu_type=node_gpu_type([g.model for g in inventory]),
                              gpus=inventory, unhealthy=unhealthy)

    def _log_findings(self, findings: list[Mismatch]) -> None:
        keys = {f.key for f in findings}
        for f in findings:
            if f.key not in self._findings:
                log.warning("attribution: %s", f.message)
                self.stats.findings.append(f.message)
        self._findings = keys

    def _make_gpu_sampler(self) -> GpuSource:
        from agents.gpu import GpuSampler

        nvml: NvmlModule
        if self.cfg.fake_gpus:
            from agents.nvml_fake import make_fake_nvml

            self.fake = make_fake_nvml(self.cfg.fake_gpus, node=self.cfg.node_name,
                                       limit_dir=self.cfg.fake_gpu_dir or None)
            nvml = self.fake
            log.warning("FAKE GPUs (%s): simulated NVML, nothing real is measured",
                        self.cfg.fake_gpus)
        else:
            import pynvml

            nvml = pynvml
        return GpuSampler(nvml, min_interval_s=self.cfg.min_energy_interval_s
                          * (1.0 - TICK_TOLERANCE))

    def _make_host_sampler(self, inventory: list[Any]) -> HostSource:
        from agents.host import HostPowerModel, HostSampler

        model = None
        try:
            model = HostPowerModel.for_gpu_models([g.model for g in inventory])
        except Exception as e:  # noqa: BLE001 - no model: host power simply not estimated
            log.warning("no host power model from profiles/: %s", e)
        return HostSampler(self.cfg.powercap_root, fallback_model=model)


def _docker_client(url: str) -> Any:
    from agents.tracker import default_client

    client = default_client(url)
    client.ping()
    return client


def default_docker_client(url: str) -> Any:
    from agents.tracker import default_client

    return default_client(url)


def store_verdicts(engine: Any, node_name: str,
                   keys: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
    """The store's fence verdicts through the agent's engine (its own short connection)."""
    from andreas.store.fence import verdicts

    with engine.connect() as conn:
        return verdicts(conn, node_name, keys)


def store_limits(engine: Any, node_name: str,
                 keys: list[tuple[str, int]]) -> dict[tuple[str, int], float | None]:
    """The power limits the plan chose for the attempts running here."""
    return {k: v.power_limit_w for k, v in store_verdicts(engine, node_name, keys).items()}


def store_caps(engine: Any, node_name: str, caps: dict[str, Any]) -> None:
    """What this node's GPUs accept as power limits, for the manager."""
    from andreas.store.nodes import set_power_caps

    with engine.begin() as conn:
        set_power_caps(conn, node_name, caps)


def _epoch_tracker(**kwargs: Any) -> Tracker:
    from agents.tracker import EpochTracker

    return EpochTracker(**kwargs)
