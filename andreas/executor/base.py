"""What the Job Manager asks of a node's container engine, and what it reads back.

One small abstract class (:class:`Executor`) with a Docker implementation
(``docker.py``), a dry-run one that only records (``dryrun.py``) and, in the tests, an
in-memory fake. The manager never imports the Docker SDK.

Every call names the node by :class:`NodeRef` (its name and Docker endpoint, from the
node table). Containers are identified by name ``andreas-<job>-<attempt>`` and the job
contract's labels, so a manager that crashed between "start" and "record the container
id" finds the container again, and a second start of the same attempt is refused instead
of duplicating it.

Stopping never blocks for the grace period: :meth:`Executor.signal` sends SIGTERM and
returns; the manager records when it asked and sends SIGKILL with :meth:`Executor.kill`
once the job's grace period has passed (the deadline survives a manager restart because
it is in the store).
"""

from __future__ import annotations

import abc
import fnmatch
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field


# Container ids of the dry-run executor (``andreas manager run --dry-run``): no container
# exists, and the views say so instead of "running".
DRY_RUN_PREFIX = "dryrun-"

@dataclass(frozen=True, kw_only=True)
class NodeRef:
    """A node as the executor needs it: a name and a Docker endpoint
    (``unix://``, ``ssh://`` or ``tcp://`` with TLS)."""

    name: str
    docker_endpoint: str


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


@dataclass(frozen=True, kw_only=True)
class ContainerState:
    """A labelled container as the engine reports it (running or exited)."""

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


def image_allowed(image: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``[executor] image_allowlist`` admits ``image``; empty: any image. Checked
    at submission (``andreas submit``) and again at start (the executor).

    fnmatch (case-sensitive) component by component, so a ``*`` never crosses a ``/``:
    ``img:*`` cannot match ``img:5000/evil/x`` (a registry host) and ``reg.io/ml/*`` does
    not admit ``reg.io/ml/other/x``. Wildcards in the registry host are refused when the
    config is loaded (:func:`andreas.config.check_image_pattern`)."""
    if not patterns:
        return True
    parts = image.split("/")
    return any(len(p.split("/")) == len(parts)
               and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, p.split("/")))
               for p in patterns)


def container_name(job_id: str, attempt: int) -> str:
    """``andreas-<job>-<attempt>``: unique per attempt on an engine."""
    return f"andreas-{job_id}-{attempt}"


class Executor(abc.ABC):
    """The container engines of the cluster, one endpoint per node."""

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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
