"""The Docker executor: every node's engine through the Docker SDK, one client per endpoint.

Endpoints: ``unix://`` as given; ``ssh://[user@]host[:port]`` through the SDK's paramiko
transport (needs ``paramiko``, i.e. ``docker[ssh]``; host keys must be known, unknown
ones are rejected, ``~/.ssh/config`` is read); ``tcp://`` only with TLS, the server
verified against ``[executor] tls_ca_cert`` and the client certificate sent when
configured. A plain ``tcp://`` (root on the node for anyone on the network) or any other
scheme is refused.

Clients are created on first use, cached per endpoint and shared by the manager's
threads (the SDK's session pools its connections); a client whose engine stopped
answering is dropped so the next call builds a fresh one. Docker SDK and transport
errors are translated here, once, into :mod:`andreas.executor.errors`.

Cost of :meth:`DockerExecutor.containers`, called every tick for every node: one list
call; a container is inspected only when it is first seen and when its state changes
(exited containers are immutable), so a steady node costs one API call per tick.

:meth:`DockerExecutor.watch`: Docker events as a wake-up for the manager
(:mod:`andreas.executor.events`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from andreas.config import ExecutorSettings
from andreas.executor.base import (Capability, ContainerState, Executor, NodeRef,
                                   StartRequest, container_name)
from andreas.jobspec import image_allowed
from andreas.errors import error_line
from andreas.executor.errors import (ContainerConflict, ExecutorError, ImageNotAllowed,
                                     ImageNotFound, ImagePullFailed, NodeUnreachable)
from andreas.executor.events import WATCH_JOIN_S, EventWatch, docker_time
from andreas.executor.run_options import prepare_checkpoint_dir, run_options
from andreas.job import LABEL_JOB, job_labels

log = logging.getLogger("andreas.executor")

ClientFactory = Callable[[str], Any]       # endpoint -> docker.DockerClient
_RUNNING = ("running", "paused", "restarting")

IMAGE_SEEN_S = 2.0             # an image found on a node is not inspected again so soon
PULL_RETRY_S = 30.0            # a pull that failed in a way that may pass is retried after
# What a registry answers when the image will never come (unknown, forbidden, bad name):
_PULL_PERMANENT = ("manifest unknown", "not found", "pull access denied",
                   "repository does not exist", "invalid reference format", "unauthorized",
                   "no such image", "requested access to the resource is denied")


# --------------------------------------------------------------------- pure parts
def pull_error_is_permanent(message: str) -> bool:
    """Whether a failed pull will fail again the same way: the registry answered that the
    image does not exist, may not be pulled, or the reference is invalid. Anything else
    (DNS, connection refused, timeouts, 5xx) may pass: the job waits and the pull is
    retried (ImagePullFailed) instead of failing the job at once."""
    text = message.lower()
    return any(p in text for p in _PULL_PERMANENT)




def create_and_start(client: Any, options: dict[str, Any]) -> str:
    """``client.containers.run(**options)`` of a detached container in two engine calls,
    create and start (the SDK's ``run`` inspects the new container between them, which
    nothing here reads); the new container's id. The options go through the SDK's own
    translation of ``run``'s arguments, so the container is the one ``run`` makes, and an
    image gone since :meth:`DockerExecutor.ensure_image` is pulled and the create tried
    again, as ``run`` does."""
    import docker.errors
    from docker.models.containers import _create_container_args

    def create() -> str:
        args = _create_container_args({"command": None, **options,
                                       "version": client.api.api_version})
        return str(client.api.create_container(**args)["Id"])

    try:
        container_id = create()
    except docker.errors.ImageNotFound:
        client.images.pull(options["image"])
        container_id = create()
    client.api.start(container_id)
    return container_id


def container_state(info: dict[str, Any]) -> ContainerState | None:
    """An inspected container as the manager sees it (None: not andreas-labelled).
    Raises ValueError for a labelled container with unreadable labels."""
    labels = job_labels((info.get("Config") or {}).get("Labels"))
    if labels is None:
        return None
    st = info.get("State") or {}
    status = st.get("Status", "")
    running = status in _RUNNING or (not status and bool(st.get("Running")))
    never = status == "created"
    return ContainerState(
        container_id=info["Id"], name=(info.get("Name") or "").lstrip("/"),
        job_id=labels.job_id, attempt=labels.attempt, gpu_uuids=labels.gpu_uuids,
        running=running,
        exit_code=None if running or never else int(st.get("ExitCode", -1)),
        oom_killed=bool(st.get("OOMKilled")), error=st.get("Error") or "",
        started_s=docker_time(st.get("StartedAt")),
        finished_s=None if running else docker_time(st.get("FinishedAt")))


# --------------------------------------------------------------------- errors

def _unreachable(e: BaseException) -> bool:
    """Transport trouble anywhere in the chain (the SDK wraps it in DockerException)."""
    import docker.errors
    import requests.exceptions
    import urllib3.exceptions

    seen = 0
    cur: BaseException | None = e
    while cur is not None and seen < 10:
        if isinstance(cur, docker.errors.APIError):
            return False                          # the engine answered
        if isinstance(cur, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                            urllib3.exceptions.HTTPError, OSError)):
            return True
        if type(cur).__module__.startswith("paramiko"):
            return True
        cur, seen = cur.__cause__ or cur.__context__, seen + 1
    return False


def _inspect(cid: str) -> Callable[[Any], Any]:
    """A call of :meth:`DockerExecutor._call`: inspect container ``cid``."""
    return lambda c: c.api.inspect_container(cid)


@dataclass(eq=False)
class _Engine:
    """One endpoint: its client (created once, under ``lock``) and what was inspected."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    client: Any = None
    seen: dict[str, tuple[str, ContainerState | None]] = field(default_factory=dict)
    memory_mib: int | None = None          # MemTotal of the node (0: unknown)


class DockerExecutor(Executor):
    """The cluster's Docker engines. ``client_factory(endpoint)``: for tests; by default a
    ``docker.DockerClient`` with the settings' timeout (and TLS for ``tcp://``)."""

    capabilities = Capability.IMAGES | Capability.EVENTS

    def __init__(self, settings: ExecutorSettings, *,
                 client_factory: ClientFactory | None = None) -> None:
        self.settings = settings
        self._factory = client_factory or self._default_client
        self._lock = threading.Lock()
        self._engines: dict[str, _Engine] = {}
        self._watches: list[EventWatch] = []
        self._pull_failed: dict[tuple[str, str], tuple[float, str]] = {}
        self._seen_images: dict[tuple[str, str], float] = {}   # (node, image) -> when

    # ------------------------------------------------------------ clients

    def _check_endpoint(self, node: NodeRef) -> str:
        """The endpoint if its scheme is allowed; a one-line ExecutorError if not."""
        endpoint = node.docker_endpoint.strip()
        scheme = endpoint.split("://", 1)[0].lower() if "://" in endpoint else ""
        where = f"node {node.name}: endpoint {endpoint}"
        if scheme == "tcp":
            s = self.settings
            if not s.tls_ca_cert:
                raise ExecutorError(f"{where}: plain tcp:// is refused; set [executor] "
                                    "tls_ca_cert (and tls_client_cert, tls_client_key)")
            if bool(s.tls_client_cert) != bool(s.tls_client_key):
                raise ExecutorError(f"{where}: [executor] tls_client_cert and "
                                    "tls_client_key go together")
        elif scheme not in ("unix", "ssh"):
            raise ExecutorError(f"{where}: refused, not unix://, ssh:// or tcp:// with TLS")
        return endpoint

    def _default_client(self, endpoint: str) -> Any:
        import docker
        import docker.tls

        s = self.settings
        tls: Any = False
        if endpoint.lower().startswith("tcp://"):        # checked: a CA is configured
            cert = (s.tls_client_cert, s.tls_client_key) if s.tls_client_cert else None
            tls = docker.tls.TLSConfig(client_cert=cert, ca_cert=s.tls_ca_cert, verify=True)
        return docker.DockerClient(base_url=endpoint, version="auto", tls=tls,
                                   timeout=s.docker_timeout_s, use_ssh_client=False)

    def _client(self, node: NodeRef) -> tuple[_Engine, Any]:
        endpoint = self._check_endpoint(node)
        with self._lock:
            engine = self._engines.setdefault(endpoint, _Engine())
        with engine.lock:                 # a slow endpoint blocks only its own callers
            if engine.client is None:
                try:
                    engine.client = self._factory(endpoint)
                except ExecutorError:
                    raise
                except Exception as e:
                    raise self._translate(e, node, "connect") from e
            return engine, engine.client

    def _watch_client(self, node: NodeRef) -> Any:
        """A new client for one event stream (never the shared one: a stream holds its
        connection for as long as it is open)."""
        return self._factory(self._check_endpoint(node))

    def _drop(self, node: NodeRef, client: Any) -> None:
        with self._lock:
            engine = self._engines.get(node.docker_endpoint.strip())
        if engine is None:
            return
        with engine.lock:
            if engine.client is not client:
                return
            engine.client = None
            engine.seen.clear()
        try:
            client.close()
        except Exception:  # noqa: BLE001 - closing a broken client is best effort
            pass

    def _translate(self, e: BaseException, node: NodeRef, what: str) -> ExecutorError:
        if _unreachable(e):
            return NodeUnreachable(f"node {node.name} ({node.docker_endpoint}): engine "
                                   f"unreachable: {what}: {error_line(e)}")
        return ExecutorError(f"node {node.name}: {what}: {error_line(e)}")

    def _call(self, node: NodeRef, what: str, fn: Callable[[Any], Any]) -> Any:
        _, client = self._client(node)
        try:
            return fn(client)
        except ExecutorError:
            raise
        except Exception as e:
            err = self._translate(e, node, what)
            if isinstance(err, NodeUnreachable):
                self._drop(node, client)
            raise err from e

    # ------------------------------------------------------------ Executor

    def ping(self, node: NodeRef) -> None:
        self._call(node, "ping", lambda c: c.ping())

    def start(self, node: NodeRef, request: StartRequest) -> str:
        import docker.errors

        name = container_name(request.job_id, request.attempt)
        self.ensure_image(node, request.image)          # allow-list first, then the image
        options = run_options(request, self.settings,
                              node_memory_mib=self._memory_mib(node))
        prepare_checkpoint_dir(request.job_id, self.settings)
        _, client = self._client(node)
        try:
            container_id = create_and_start(client, options)
        except docker.errors.ImageNotFound as e:
            raise ImageNotFound(f"image {request.image}: not found on node {node.name}: "
                                f"{error_line(e)}") from e
        except docker.errors.APIError as e:
            if e.status_code == 409:
                raise ContainerConflict(f"container {name} exists on node {node.name}: "
                                        f"{error_line(e)}") from e
            self._remove_unstarted(client, name)
            raise ExecutorError(f"node {node.name}: start container {name}: "
                                f"{error_line(e)}") from e
        except Exception as e:
            err = self._translate(e, node, f"start container {name}")
            if isinstance(err, NodeUnreachable):
                self._drop(node, client)
            raise err from e
        log.info("started container %s (%s) on node %s", name, container_id[:12], node.name)
        return container_id

    def _memory_mib(self, node: NodeRef) -> int | None:
        """The node's memory as its engine reports it (asked once per engine client);
        None when the engine does not say."""
        if self.settings.memory_limit_mib is not None:
            return None                       # configured: the node's size does not matter
        engine, client = self._client(node)
        if engine.memory_mib is None:
            try:
                engine.memory_mib = int(client.info()["MemTotal"]) >> 20
            except Exception as e:  # noqa: BLE001 - the limit is a safeguard, not a must
                log.warning("node %s: memory unknown (%s); its jobs get no default memory "
                            "limit", node.name, error_line(e))
                engine.memory_mib = 0
        return engine.memory_mib or None

    def ensure_image(self, node: NodeRef, image: str) -> None:
        """Inspect the image; pull it when the node lacks it. A pull the registry refuses
        for good (:func:`pull_error_is_permanent`) is ImageNotFound; any other failed pull
        is ImagePullFailed, and the same (node, image) is not pulled again for
        ``PULL_RETRY_S`` (the manager asks at every tick)."""
        import docker.errors

        if not image:
            raise ImageNotAllowed("a job without an image (a --cmd job): the Docker executor "
                                  "runs images only")
        if not image_allowed(image, self.settings.image_allowlist):
            raise ImageNotAllowed(f"image {image}: not in the image allowlist "
                                  f"({', '.join(self.settings.image_allowlist)})")
        failed = self._pull_failed.get((node.name, image))
        if failed is not None and time.monotonic() < failed[0]:
            raise ImagePullFailed(f"{failed[1]} (next pull in "
                                  f"{failed[0] - time.monotonic():.0f} s)")

        def present(c: Any) -> bool:
            try:
                c.api.inspect_image(image)
                return True
            except docker.errors.NotFound:
                return False

        if self._image_seen(node, image):
            return
        if self._call(node, f"inspect image {image}", present):
            self._seen_images[(node.name, image)] = time.monotonic()
            return
        log.info("node %s: pulling image %s", node.name, image)

        def pull(c: Any) -> str | None:
            try:
                for line in c.api.pull(image, stream=True, decode=True):
                    if isinstance(line, dict) and line.get("error"):
                        return str(line["error"])
            except docker.errors.APIError as e:
                return error_line(e)
            return None

        why = self._call(node, f"pull image {image}", pull)
        if why is None:
            self._pull_failed.pop((node.name, image), None)
            self._seen_images[(node.name, image)] = time.monotonic()
            return
        message = (f"image {image}: not on node {node.name} and the pull failed: "
                   f"{' '.join(why.split())[:400]}")
        if pull_error_is_permanent(why):
            raise ImageNotFound(message)
        self._pull_failed[(node.name, image)] = (time.monotonic() + PULL_RETRY_S, message)
        raise ImagePullFailed(message)

    def _image_seen(self, node: NodeRef, image: str) -> bool:
        """Whether the node had the image ``IMAGE_SEEN_S`` ago at most: the manager makes
        sure of the image before it records an attempt, and the start that follows need
        not ask again (an image removed meanwhile is pulled by the create)."""
        seen = self._seen_images.get((node.name, image))
        return seen is not None and time.monotonic() - seen < IMAGE_SEEN_S

    @staticmethod
    def _remove_unstarted(client: Any, name: str) -> None:
        """A start that failed after create leaves a 'created' container: remove it
        (without force, so a running container is never touched)."""
        try:
            client.api.remove_container(name)
        except Exception:  # noqa: BLE001 - best effort; the manager removes it later
            pass

    def signal(self, node: NodeRef, container_id: str, signal: str = "SIGTERM") -> None:
        self._gone_is_fine(node, f"{signal} container {container_id[:12]}",
                           lambda c: c.api.kill(container_id, signal=signal))

    def kill(self, node: NodeRef, container_id: str) -> None:
        self._gone_is_fine(node, f"SIGKILL container {container_id[:12]}",
                           lambda c: c.api.kill(container_id, signal="SIGKILL"))

    def remove(self, node: NodeRef, container_id: str) -> None:
        import docker.errors

        def rm(c: Any) -> None:
            try:
                c.api.remove_container(container_id)
            except docker.errors.NotFound:
                pass

        self._call(node, f"remove container {container_id[:12]}", rm)

    def _gone_is_fine(self, node: NodeRef, what: str, fn: Callable[[Any], Any]) -> None:
        """Signals to a removed (404) or already exited (409 not running) container."""
        import docker.errors

        def call(c: Any) -> None:
            try:
                fn(c)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if e.status_code != 409:
                    raise

        self._call(node, what, call)

    def containers(self, node: NodeRef) -> list[ContainerState]:
        import docker.errors

        engine, _ = self._client(node)
        rows = self._call(node, "list containers", lambda c: c.api.containers(
            all=True, filters={"label": LABEL_JOB}))
        seen: dict[str, tuple[str, ContainerState | None]] = {}
        for row in rows:
            cid = row["Id"]
            status = row.get("State") or row.get("Status") or ""
            cached = engine.seen.get(cid)
            if cached is None or cached[0] != status:
                try:
                    info = self._call(node, f"inspect container {cid[:12]}",
                                      _inspect(cid))
                except ExecutorError as e:
                    if isinstance(e.__cause__, docker.errors.NotFound):
                        continue             # removed between the list and the inspect
                    raise
                try:
                    state = container_state(info)
                except ValueError as e:
                    log.warning("node %s: container %s ignored: %s", node.name, cid[:12], e)
                    state = None
                cached = (status, state)
            seen[cid] = cached
        with engine.lock:
            engine.seen = seen
        return [state for _, state in seen.values() if state is not None]

    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        what = f"logs of container {container_id[:12]}"
        stream = self._call(node, what, lambda c: c.api.logs(
            container_id, stdout=True, stderr=True, stream=True, follow=follow,
            tail="all" if tail is None else tail))
        try:
            yield from stream
        except ExecutorError:
            raise
        except Exception as e:
            raise self._translate(e, node, what) from e

    def watch(self, nodes: Callable[[], list[NodeRef]], wake: Callable[[str], None],
              stop: threading.Event) -> None:
        """One event stream per node of ``nodes()`` (re-read every ``WATCH_NODES_S``),
        ``wake(node)`` per event, until ``stop`` is set or the executor is closed."""
        w = EventWatch(self._watch_client, nodes, wake, stop)
        with self._lock:
            self._watches = [x for x in self._watches if x.thread.is_alive()]
            self._watches.append(w)
        w.thread.start()

    def rewatch(self) -> None:
        with self._lock:
            watches = [x for x in self._watches if x.thread.is_alive()]
        for w in watches:
            w.sync()

    def watching(self) -> list[str]:
        """The nodes whose event stream is open now (for operators and tests)."""
        with self._lock:
            watches = list(self._watches)
        return sorted(ref.name for x in watches for ref, w in list(x.watchers.items())
                      if w.streaming)

    def close(self) -> None:
        with self._lock:
            watches, self._watches = self._watches, []
        for w in watches:
            w.closed.set()
        for w in watches:
            w.thread.join(WATCH_JOIN_S + 1.0)
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            with engine.lock:
                client, engine.client = engine.client, None
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
