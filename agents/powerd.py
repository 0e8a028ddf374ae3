"""``andreas-powerd``: the privileged helper that sets and resets GPU power limits.

Setting a power limit needs root (NVML answers NoPermission otherwise); the agent runs
unprivileged. As Zeus' own privileged daemon does, this small process (its own systemd
unit, ``systemd/andreas-powerd.service``) does that one job and nothing else: set a GPU's
limit within the GPU's constraints, or reset it to the default, for the members of one
group (the agent's), over a Unix socket only they may open (mode 0660, owner root, that
group; the peer's credentials are checked as well).

Protocol: one JSON object per line, one answer per line.

- ``{"op": "caps"}`` -> ``{"ok": true, "gpus": {uuid: {"min_w", "max_w", "default_w",
  "limit_w"} or {"error": "..."}}}``: what each GPU accepts (NVML's constraints);
- ``{"op": "set", "gpu": uuid, "watts": w, "holder": "job/attempt"}`` -> ``{"ok": true,
  "limit_w": read back}`` or ``{"ok": false, "error": "..."}`` (outside the range, the
  driver refused, unknown GPU);
- ``{"op": "reset", "gpu": uuid}``: back to the default.

Crash safety. A limit is *held* by a lease: each ``set`` (the agent repeats it at every
fence check, about every 5 s) renews it for ``lease_s`` (default 60 s). A lease that is
not renewed (the agent died, or the job ended and nobody reset the GPU) expires and the
GPU goes back to its default limit. Leases are kept in a state file (written atomically),
so a restarted daemon resets, at once, every GPU that is not at its default limit and
that no live lease holds (a limit set before a crash of the daemon, the agent or the
job), and keeps the others until their leases end.
"""

from __future__ import annotations

import argparse
import grp
import json
import logging
import os
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("andreas.powerd")

DEFAULT_SOCKET = "/run/andreas-powerd/powerd.sock"
DEFAULT_STATE = "/var/lib/andreas-powerd/leases.json"
DEFAULT_LEASE_S = 60.0
MAX_REQUEST = 4096


class PowerDaemon:
    """The daemon's logic, without the socket: NVML (real or fake), leases, state file."""

    def __init__(self, nvml: Any, *, state_path: str | None = None,
                 lease_s: float = DEFAULT_LEASE_S,
                 wall: Callable[[], float] = time.time) -> None:
        self.nvml = nvml
        self.state_path = state_path
        self.lease_s = lease_s
        self.wall = wall
        self.lock = threading.Lock()
        nvml.nvmlInit()
        self.handles: dict[str, Any] = {}
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            uuid = nvml.nvmlDeviceGetUUID(h)
            self.handles[uuid.decode() if isinstance(uuid, bytes) else uuid] = h
        self.leases: dict[str, dict[str, Any]] = self._load()
        self.expire(startup=True)

    # ------------------------------------------------------------------ requests
    def handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, Mapping):
            return {"ok": False, "error": "request must be a JSON object"}
        op = request.get("op")
        with self.lock:
            if op == "caps":
                return {"ok": True, "gpus": {u: self._caps(u) for u in self.handles}}
            uuid = request.get("gpu")
            if uuid not in self.handles:
                return {"ok": False, "error": f"unknown GPU {str(uuid)[:80]!r}"}
            if op == "reset":
                return self._reset(uuid)
            if op == "set":
                return self._set(uuid, request.get("watts"), str(request.get("holder", ""))[:80])
        return {"ok": False, "error": f"unknown op {str(op)[:40]!r} (caps, set, reset)"}

    def _caps(self, uuid: str) -> dict[str, Any]:
        h, nv = self.handles[uuid], self.nvml
        try:
            lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(h)
            default = nv.nvmlDeviceGetPowerManagementDefaultLimit(h)
            limit = nv.nvmlDeviceGetPowerManagementLimit(h)
        except nv.NVMLError as e:
            return {"error": _nvml_text(e)}
        return {"min_w": lo / 1000.0, "max_w": hi / 1000.0, "default_w": default / 1000.0,
                "limit_w": limit / 1000.0}

    def _set(self, uuid: str, watts: Any, holder: str) -> dict[str, Any]:
        if isinstance(watts, bool) or not isinstance(watts, (int, float)):
            return {"ok": False, "error": f"watts must be a number, got {watts!r}"[:120]}
        caps = self._caps(uuid)
        if "error" in caps:
            return {"ok": False, "error": caps["error"]}
        if not caps["min_w"] <= watts <= caps["max_w"]:
            return {"ok": False, "error": f"{watts:g} W is outside the GPU's range "
                    f"[{caps['min_w']:g}, {caps['max_w']:g}] W"}
        result = self._write(uuid, int(round(watts * 1000)))
        if result["ok"]:
            if abs(watts - caps["default_w"]) < 1e-9:
                self.leases.pop(uuid, None)
            else:
                self.leases[uuid] = {"limit_w": float(watts), "holder": holder,
                                     "until": self.wall() + self.lease_s}
            self._save()
        return result

    def _reset(self, uuid: str) -> dict[str, Any]:
        caps = self._caps(uuid)
        if "error" in caps:
            return {"ok": False, "error": caps["error"]}
        result = self._write(uuid, int(round(caps["default_w"] * 1000)))
        if result["ok"]:
            self.leases.pop(uuid, None)
            self._save()
        return result

    def _write(self, uuid: str, milliwatts: int) -> dict[str, Any]:
        h, nv = self.handles[uuid], self.nvml
        try:
            if nv.nvmlDeviceGetPowerManagementLimit(h) != milliwatts:
                nv.nvmlDeviceSetPowerManagementLimit(h, milliwatts)
            return {"ok": True, "limit_w": nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0}
        except nv.NVMLError as e:
            return {"ok": False, "error": _nvml_text(e)}

    # ------------------------------------------------------------------ leases
    def expire(self, *, startup: bool = False) -> list[str]:
        """Reset the GPUs whose lease ended (at startup also those with no lease at all
        whose limit is not their default: a limit this daemon set before a crash)."""
        now = self.wall()
        reset = []
        with self.lock:
            for uuid in list(self.handles):
                lease = self.leases.get(uuid)
                if lease is not None and lease["until"] > now:
                    continue
                if lease is None and not startup:
                    continue
                caps = self._caps(uuid)
                if "error" in caps or (lease is None
                                       and abs(caps["limit_w"] - caps["default_w"]) < 1e-9):
                    self.leases.pop(uuid, None)
                    continue
                if self._reset(uuid)["ok"]:
                    reset.append(uuid)
                    log.info("GPU %s: limit back to its default %g W (%s)", uuid,
                             caps["default_w"], "no live lease at start" if startup
                             else f"lease of {lease.get('holder') if lease else '?'} ended")
            self._save()
        return reset

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.state_path:
            return {}
        try:
            raw = json.loads(Path(self.state_path).read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("state %s unreadable (%s): every limit is reset", self.state_path, e)
            return {}
        return {u: v for u, v in raw.items() if isinstance(v, dict) and u in self.handles
                and isinstance(v.get("until"), (int, float))}

    def _save(self) -> None:
        if not self.state_path:
            return
        from andreas.infra.fileio import write_text_atomic
        Path(self.state_path).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.state_path, json.dumps(self.leases, sort_keys=True) + "\n")


def _nvml_text(e: Exception) -> str:
    text = str(e) or type(e).__name__
    return f"NVML: {text}"[:200]


# ---------------------------------------------------------------------- the socket

def peer_allowed(conn: socket.socket, gid: int | None) -> bool:
    """The caller is root, or runs with the daemon's group (primary or supplementary)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, peer_gid = struct.unpack("3i", creds)
    if uid == 0 or gid is None or peer_gid == gid:
        return True
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return str(gid) in line.split()[1:]
    except OSError:
        pass
    return False


def serve(daemon: PowerDaemon, socket_path: str, group: str | None,
          stop: threading.Event | None = None, tick_s: float = 5.0) -> None:
    """Accept requests on ``socket_path`` until ``stop``; expire leases every ``tick_s``."""
    gid = grp.getgrnam(group).gr_gid if group else None

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            if not peer_allowed(self.connection, gid):
                self._answer({"ok": False, "error": "not permitted"})
                return
            for line in self.rfile:
                if len(line) > MAX_REQUEST:
                    self._answer({"ok": False, "error": "request too long"})
                    return
                try:
                    request = json.loads(line)
                except ValueError:
                    self._answer({"ok": False, "error": "not JSON"})
                    continue
                self._answer(daemon.handle(request))

        def _answer(self, doc: dict[str, Any]) -> None:
            self.wfile.write((json.dumps(doc) + "\n").encode())

    path = Path(socket_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    os.chmod(path, 0o660)
    if gid is not None:
        os.chown(path, 0, gid) if os.geteuid() == 0 else os.chown(path, -1, gid)
    thread = threading.Thread(target=server.serve_forever, name="powerd", daemon=True)
    thread.start()
    log.info("listening on %s (group %s), %d GPUs", path, group or "-", len(daemon.handles))
    stop = stop or threading.Event()
    try:
        while not stop.wait(tick_s):
            daemon.expire()
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    import signal

    ap = argparse.ArgumentParser(prog="andreas-powerd", description=__doc__.splitlines()[0])
    ap.add_argument("--socket", default=os.environ.get("ANDREAS_POWERD_SOCKET", DEFAULT_SOCKET))
    ap.add_argument("--group", default=os.environ.get("ANDREAS_POWERD_GROUP", "andreas"),
                    help="the group whose members may ask (the agent's); '' for any")
    ap.add_argument("--state", default=DEFAULT_STATE, help="lease file (kept across restarts)")
    ap.add_argument("--lease-s", type=float, default=DEFAULT_LEASE_S)
    ap.add_argument("--fake-gpus", help="fake GPUs (COUNTxTYPE), for tests and laptops")
    ap.add_argument("--fake-gpu-dir", help="with --fake-gpus: the directory the agent's fake "
                    "GPUs read their limits from")
    ap.add_argument("--node", default=socket.gethostname(), help="with --fake-gpus: node name")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if not 0 < args.lease_s <= 86400:
        print(f"andreas-powerd: error: --lease-s must be in (0, 86400], got {args.lease_s}",
              file=sys.stderr)
        return 2
    if args.fake_gpus:
        from agents.nvml_fake import make_fake_nvml
        nvml: Any = make_fake_nvml(args.fake_gpus, node=args.node, limit_dir=args.fake_gpu_dir)
    else:
        import pynvml

        nvml = pynvml                      # the real module, the same interface
    try:
        daemon = PowerDaemon(nvml, state_path=args.state, lease_s=args.lease_s)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        serve(daemon, args.socket, args.group or None, stop)
    except (OSError, KeyError, nvml.NVMLError) as e:
        print(f"andreas-powerd: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
