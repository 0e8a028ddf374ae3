"""What the Job Manager asks of a node's engine, and what it reads back.

One small abstract class (:class:`Executor`) with a Docker implementation
(``docker.py``), a Slurm one (``slurm.py``: one batch job per attempt), a dry-run one
that only records (``dryrun.py``) and, in the tests, an in-memory fake. The manager never
imports the Docker SDK nor runs a Slurm command itself.

Every call names the node by :class:`NodeRef` (its name, Docker endpoint and GPUs, from
the node table). A run of an attempt ("container": a Docker container or a Slurm job) is
named ``andreas-<job>-<attempt>``, so a manager that crashed between "start" and "record
the container id" finds it again, and a second start of the same attempt is refused
instead of duplicating it.

Engines differ in what they can do; :attr:`Executor.capabilities` says it
(:class:`Capability`). An engine that queues (Slurm) reports a started attempt as
``pending`` with its reason until it runs, and the GPUs it chose once it runs; one with
an inventory (:meth:`Executor.inventory`) says which nodes and GPUs it can use now.

Stopping never blocks for the grace period: :meth:`Executor.signal` sends SIGTERM and
returns; the manager records when it asked and sends SIGKILL with :meth:`Executor.kill`
once the job's grace period has passed (the deadline survives a manager restart because
it is in the store).
"""

from __future__ import annotations

import abc
import enum
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field


# Container ids of the dry-run executor (``andreas manager run --dry-run``): no container
# exists, and the views say so instead of "running".
DRY_RUN_PREFIX = "dryrun-"
class Capability(enum.Flag):
    """What an executor can do; the manager asks before it relies on it."""

    NONE = 0
    IMAGES = enum.auto()           # runs Docker images (a job with an image)
    COMMANDS = enum.auto()         # runs plain commands (a job without an image)
    EVENTS = enum.auto()           # watch(): wakes the manager between polls
    PENDING = enum.auto()          # a started attempt may wait in the engine's queue
    PICKS_GPUS = enum.auto()       # the engine chooses the GPUs; containers() reports them
    INVENTORY = enum.auto()        # inventory(): nodes' state and usable GPUs
    POWER = enum.auto()            # power(): switches nodes off and on itself


@dataclass(frozen=True, kw_only=True)
class NodeRef:
    """A node as the executor needs it: a name, a Docker endpoint (``unix://``,
    ``ssh://`` or ``tcp://`` with TLS) and its GPUs as (index, UUID) pairs (an engine that
    picks GPUs reports them by index)."""

    name: str
    docker_endpoint: str
    # not part of the node's identity (equality, hash): the event watch keys streams by ref
    gpus: tuple[tuple[int, str], ...] = field(default=(), compare=False)

    def uuid_of(self, index: int) -> str | None:
        return next((u for i, u in self.gpus if i == index), None)


@dataclass(frozen=True, kw_only=True)
class StartRequest:
    """Start attempt ``attempt`` of job ``job_id`` on the GPUs ``gpu_uuids``.

    ``fake_gpus``: the node's GPUs are the fake NVML's; no device request is made and
    the labels alone tell the node's agent which fake GPUs the container holds.
    ``restart_count``: attempts before this one (``ANDREAS_RESTART_COUNT``).
    """

    job_id: str
    attempt: int
    image: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    epochs: int
    gpu_uuids: tuple[str, ...]
    fake_gpus: bool = False
    grace_s: float = 120.0
    restart_count: int = 0
    gpu_milli: int | None = None          # a share of its one GPU (CUDA MPS); None: whole
    # A limit for a run no attempt row plans (andreas profile's level runs, a container
    # label the node agent applies); the manager's attempts carry theirs in the store.
    power_limit_w: float | None = None


@dataclass(frozen=True, kw_only=True)
class ContainerState:
    """A run of an attempt as the engine reports it: running, exited, or (an engine that
    queues) ``pending`` with the engine's ``pending_reason``; ``gpu_uuids`` are the GPUs
    it holds (an engine that picks them: known once it runs)."""

    container_id: str
    name: str
    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...] = ()
    running: bool
    exit_code: int | None = None          # None while running
    oom_killed: bool = False
    error: str = ""                       # the engine's own error (e.g. exec failure)
    started_s: float | None = None        # UTC seconds
    finished_s: float | None = None
    pending: bool = False                 # queued by the engine, not started yet
    pending_reason: str = ""              # the engine's word for why (Slurm: Resources, ...)
    submitted_s: float | None = None      # when the engine took the request


class EngineNodeState(enum.Enum):
    """A node as the engine sees it (:meth:`Executor.inventory`)."""

    UP = "up"                  # runs jobs
    DRAINING = "draining"      # runs what it has, takes nothing new
    DOWN = "down"              # failed or not responding
    POWERED_DOWN = "powered-down"      # switched off by the engine's power saving
    POWERING_UP = "powering-up"
    POWERING_DOWN = "powering-down"
    UNKNOWN = "unknown"        # not a node of the engine (or of its partition)


@dataclass(frozen=True, kw_only=True)
class NodeInventory:
    """One node in the engine's inventory: its state (and the engine's reason), its GPU
    type and count as configured there, and the GPU indexes jobs that are not andreas'
    hold (pinned: neither planned nor started on)."""

    name: str
    state: EngineNodeState
    gpu_type: str = ""
    gpus: int = 0
    foreign_gpus: tuple[int, ...] = ()
    reason: str = ""

    @property
    def takes_jobs(self) -> bool:
        """Whether a new attempt may be sent there (a powered-down node is woken by the
        engine for it)."""
        return self.state in (EngineNodeState.UP, EngineNodeState.POWERED_DOWN,
                              EngineNodeState.POWERING_UP)


def container_name(job_id: str, attempt: int) -> str:
    """``andreas-<job>-<attempt>``: unique per attempt on an engine."""
    return f"andreas-{job_id}-{attempt}"


class Executor(abc.ABC):
    """The container engines of the cluster, one endpoint per node."""

    capabilities: Capability = Capability.IMAGES

    @abc.abstractmethod
    def ping(self, node: NodeRef) -> None:
        """Raise NodeUnreachable unless the node's engine answers."""

    @abc.abstractmethod
    def start(self, node: NodeRef, request: StartRequest) -> str:
        """Create and start the attempt's container; returns its id. Raises
        ImageNotAllowed, ImageNotFound, ContainerConflict, NodeUnreachable, ExecutorError."""

    def ensure_image(self, node: NodeRef, image: str) -> None:  # noqa: B027 - optional hook
        """Make sure the node has ``image`` (pull it), before an attempt is recorded.
        Raises ImagePullFailed (may pass), ImageNotFound, ImageNotAllowed, NodeUnreachable.
        Default: nothing to prepare (the dry run, fakes)."""

    @abc.abstractmethod
    def signal(self, node: NodeRef, container_id: str, signal: str = "SIGTERM") -> None:
        """Send a signal (a container already gone is not an error)."""

    @abc.abstractmethod
    def kill(self, node: NodeRef, container_id: str) -> None:
        """SIGKILL (a container already gone is not an error)."""

    @abc.abstractmethod
    def containers(self, node: NodeRef) -> list[ContainerState]:
        """Every andreas-labelled container of the node, running or exited."""

    @abc.abstractmethod
    def remove(self, node: NodeRef, container_id: str) -> None:
        """Remove an exited container (gone already is not an error)."""

    @abc.abstractmethod
    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        """The container's output (stdout and stderr), optionally followed."""

    def log_tail(self, node: NodeRef, container_id: str, lines: int = 20) -> str:
        """The last lines of the log as text, for a failure reason ('' if unavailable)."""
        try:
            return b"".join(self.logs(node, container_id, tail=lines)).decode(
                "utf-8", "replace")
        except Exception:  # noqa: BLE001 - a reason is best effort
            return ""

    def watch(self, nodes: Callable[[], list[NodeRef]], wake: Callable[[str], None],
              stop: threading.Event) -> None:
        """Call ``wake(node_name)`` soon after a labelled container of a node starts or
        ends, until ``stop`` is set; returns at once (the watching runs in threads).

        A hint only: the manager's polling of :meth:`containers` stays the source of
        truth, and a wake only makes its next tick come sooner, so a lost or duplicated
        wake changes nothing. ``nodes()`` is re-read now and then (the nodes to watch
        change). Never raises. This default does nothing, which is right for executors
        whose containers change only inside calls (the dry run computes a finished
        container when :meth:`containers` is read; the tests' fakes change when a test
        says so): there is nothing to hear between two polls.
        """
        return None

    def rewatch(self) -> None:  # noqa: B027 - optional hook
        """Re-read the ``nodes()`` of :meth:`watch` now, not at its next look: the
        streams of nodes no longer in it are closed before this returns (the manager
        stops watching a node before it switches it off, so its engine going away is no
        outage). Never raises. This default does nothing (no watch)."""

    def inventory(self, nodes: Sequence[NodeRef]) -> Mapping[str, NodeInventory]:
        """The engine's view of ``nodes`` (Capability.INVENTORY), by name; a node the engine
        does not know is there with state UNKNOWN. Raises EngineUnavailable when the engine
        does not answer. This default knows nothing (an empty mapping)."""
        return {}

    def power(self, node: NodeRef, on: bool) -> None:
        """Switch the node off or on through the engine (Capability.POWER); raises
        ExecutorError with one line when the engine refuses."""
        raise NotImplementedError(f"{type(self).__name__} does not switch nodes")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
