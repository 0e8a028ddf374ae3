"""The agent's side of GPU power limits: ask ``andreas-powerd`` to set what the plan chose.

The agent runs unprivileged, so every change goes through the privileged daemon
(``agents/powerd.py``) over its Unix socket. :class:`LimitController` keeps, per GPU, the
limit the running containers want (the attempt's ``power_limit_w`` in the store at every
fence check: a plan may change it while the job runs; for a run that no attempt plans,
``andreas profile``'s level runs, its ``andreas.power_limit_w`` label) and the limit in
force (read back), which the samples carry. GPUs no running container holds go back to
their default.

Nothing here stops a job: a daemon that is not running, a GPU that refuses limits (no
permission, not supported) or a limit the driver refuses is one warning line naming the
node and GPU (once per GPU and reason), and the job runs at the default limit. What the
node can do is reported once at start (:meth:`LimitController.capabilities`) and goes to
the store (``nodes.power_caps``), where the manager reads it: a node that cannot set
limits is planned at the default level.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

log = logging.getLogger(__name__)

TIMEOUT_S = 2.0
RETRY_CAPS_S = 30.0      # a node that could not set limits asks the daemon again this often


class PowerdError(Exception):
    """The daemon could not be asked (not running, no permission on its socket, garbled)."""


class PowerdClient:
    """One request per connection: simple and robust across daemon restarts."""

    def __init__(self, socket_path: str, timeout_s: float = TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s

    def request(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout_s)
                s.connect(self.socket_path)
                s.sendall((json.dumps(dict(doc)) + "\n").encode())
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise PowerdError(f"privileged daemon at {self.socket_path} not reachable "
                              f"({why})") from None
        try:
            answer = json.loads(data)
        except ValueError:
            raise PowerdError(f"privileged daemon at {self.socket_path}: not a JSON answer"
                              ) from None
        if not isinstance(answer, dict):
            raise PowerdError(f"privileged daemon at {self.socket_path}: bad answer")
        return answer


@dataclass(frozen=True, kw_only=True)
class GpuCaps:
    """What one GPU accepts (NVML's constraints), or why it cannot be capped."""

    min_w: float | None = None
    max_w: float | None = None
    default_w: float | None = None
    error: str | None = None

    @property
    def settable(self) -> bool:
        return self.error is None and self.min_w is not None


class LimitController:
    """Per GPU: the limit wanted, the limit in force; errors logged once."""

    def __init__(self, client: PowerdClient | None, node: str, uuids: Iterable[str]) -> None:
        self.client = client
        self.node = node
        self.uuids = list(uuids)
        self.caps: dict[str, GpuCaps] = {}
        self.in_force: dict[str, float] = {}
        self._said: set[tuple[str, str]] = set()
        self.sets = 0
        self.failures = 0

    def _once(self, gpu: str, why: str) -> None:
        if (gpu, why) not in self._said:
            self._said.add((gpu, why))
            log.warning("node %s: GPU %s: power limit not applied, the job runs at the "
                        "default limit: %s", self.node, gpu, why)

    def capabilities(self) -> dict[str, GpuCaps]:
        """Ask the daemon what each GPU accepts; a node that cannot set limits says so once."""
        if self.client is None:
            self.caps = {u: GpuCaps(error="no privileged daemon configured") for u in self.uuids}
            return self.caps
        try:
            answer = self.client.request({"op": "caps"})
        except PowerdError as e:
            self.caps = {u: GpuCaps(error=str(e)) for u in self.uuids}
            if ("node", str(e)) not in self._said:       # once, though it is asked again
                self._said.add(("node", str(e)))
                log.warning("node %s: GPU power limits cannot be set (%s): planned at the "
                            "default limit", self.node, e)
            return self.caps
        gpus = (cast("dict[str, Any]", answer.get("gpus"))
                if isinstance(answer.get("gpus"), dict) else {})
        for u in self.uuids:
            c = gpus.get(u) or {"error": "the daemon does not see this GPU"}
            if "error" in c:
                self.caps[u] = GpuCaps(error=str(c["error"])[:200])
                if (u, self.caps[u].error) not in self._said:
                    self._said.add((u, self.caps[u].error or ""))
                    log.warning("node %s: GPU %s cannot be power-capped (%s): planned at the "
                                "default limit", self.node, u, self.caps[u].error)
                continue
            self.caps[u] = GpuCaps(min_w=float(c["min_w"]), max_w=float(c["max_w"]),
                                   default_w=float(c["default_w"]))
            self.in_force[u] = float(c["limit_w"])
        return self.caps

    def node_caps(self) -> dict[str, Any]:
        """What the store keeps for the node (``nodes.power_caps``): the range every GPU
        accepts, or why it cannot be capped."""
        ok = [c for c in self.caps.values() if c.settable]
        if not self.caps or len(ok) < len(self.caps):
            bad = next((c.error for c in self.caps.values() if not c.settable),
                       "no GPU")
            return {"settable": False, "why": bad}
        def watts(values: Iterable[float | None]) -> list[float]:
            return [v for v in values if v is not None]   # settable: all three are set
        return {"settable": True, "min_w": max(watts(c.min_w for c in ok)),
                "max_w": min(watts(c.max_w for c in ok)),
                "default_w": min(watts(c.default_w for c in ok))}

    def apply(self, wanted: Mapping[str, tuple[float | None, str]]) -> None:
        """``wanted``: GPU -> (limit or None for the default, holder "job/attempt"). Every
        other GPU whose limit is not its default is reset; held limits are renewed."""
        for u in self.uuids:
            caps = self.caps.get(u)
            if caps is None or not caps.settable or self.client is None:
                if wanted.get(u, (None, ""))[0] is not None and caps is not None:
                    self._once(u, caps.error or "not settable")
                continue
            limit, holder = wanted.get(u, (None, ""))
            if limit is None or abs(limit - (caps.default_w or 0.0)) < 1e-9:
                if self.in_force.get(u) != caps.default_w:
                    self._call(u, {"op": "reset", "gpu": u})
                continue
            self._call(u, {"op": "set", "gpu": u, "watts": float(limit), "holder": holder})

    def _call(self, gpu: str, request: dict[str, Any]) -> None:
        assert self.client is not None
        try:
            answer = self.client.request(request)
        except PowerdError as e:
            self.failures += 1
            self._once(gpu, str(e))
            return
        if not answer.get("ok"):
            self.failures += 1
            self._once(gpu, str(answer.get("error", "refused"))[:200])
            if request["op"] == "set" and self.in_force.get(gpu) != self.caps[gpu].default_w:
                self._call(gpu, {"op": "reset", "gpu": gpu})   # refused: back to the default
            return
        self.sets += 1
        if isinstance(answer.get("limit_w"), (int, float)):
            self.in_force[gpu] = float(answer["limit_w"])


Planned = Callable[[list[tuple[str, int]]], Mapping[tuple[str, int], float | None]]


class LimitApplier:
    """The agent's power-limit thread: every ``every_s`` (and at once when a container
    starts or ends: :meth:`wake`) it reads the planned limit of each running attempt from
    the store and has the controller apply them; GPUs no container holds go back to
    their default. The node's capabilities go to the store once (retried until the store
    answers). The sampling loop never waits for the daemon or the store."""

    def __init__(self, controller: LimitController, *, planned: Planned,
                 current: Callable[[], list[Any]],
                 report: Callable[[dict[str, Any]], None], every_s: float = 5.0) -> None:
        self.controller = controller
        self.planned = planned
        self.current = current
        self.report = report
        self.every_s = every_s
        self._wake = threading.Event()
        self._known: dict[tuple[str, int], float | None] = {}
        self._reported = False
        self._store_down = False
        self._caps_at = 0.0            # when the daemon was last asked what the GPUs accept

    def wake(self) -> None:
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        self._ask()
        while not stop.is_set():
            try:
                self.step()
            except Exception:   # never let limits stop the agent
                log.exception("power limits: step failed")
            self._wake.wait(self.every_s)
            self._wake.clear()

    def _ask(self) -> None:
        self.controller.capabilities()
        self._caps_at = time.monotonic()
        self._reported = False

    def step(self) -> None:
        caps = self.controller.caps
        if (self.controller.client is not None and caps
                and not any(c.settable for c in caps.values())
                and time.monotonic() - self._caps_at >= RETRY_CAPS_S):
            self._ask()          # a daemon started after the agent: use it, say so
        if not self._reported:
            try:
                self.report(self.controller.node_caps())
                self._reported = True
            except Exception as e:  # noqa: BLE001 - the store may be down: next time
                log.debug("power caps not reported yet: %s", e)
        jobs = list(self.current())
        keys = sorted({(j.job_id, j.attempt) for j in jobs})
        if keys and any(c.settable for c in self.controller.caps.values()):
            try:
                self._known = {k: v for k, v in self.planned(keys).items()}
                self._store_down = False
            except Exception as e:  # noqa: BLE001 - keep the last known limits
                if not self._store_down:
                    log.warning("power limits: planned limits not readable (%s); the "
                                "limits in force stay", e)
                self._store_down = True
        wanted: dict[str, tuple[float | None, str]] = {}
        for j in jobs:
            for uuid in j.gpu_uuids:
                planned = self._known.get((j.job_id, j.attempt))
                wanted[uuid] = (planned if planned is not None else j.power_limit_w,
                                f"{j.job_id}/{j.attempt}")
        self.controller.apply(wanted)
