"""Settings of the node agent: ``/etc/andreas/agent.toml``, the environment, the command line.

Highest priority first: command-line options (``--fake-gpus``, ``--interval-s``), then
environment variables (``ANDREAS_DB_URL``, ``ANDREAS_DB_PASSWORD_FILE``,
``ANDREAS_NODE_NAME``, ``ANDREAS_SPOOL_DIR``, ``ANDREAS_SPOOL_MAX_SIZE``,
``ANDREAS_FAKE_GPUS``), then the file (``--config PATH``; without it
``/etc/andreas/agent.toml`` when present), then defaults. The file::

    [agent]
    node_name = "gpu-07"                 # default: the host name
    interval_s = 1.0                     # sampling period
    docker_url = "unix:///var/run/docker.sock"   # the local daemon; "" = follow no containers
    docker_endpoint = "ssh://gpu-07"     # how the manager reaches this node's Docker
    heartbeat_s = 10.0
    fake_gpus = ""                       # e.g. "2xV100": SIMULATED GPUs (CI, laptops only)
    powercap_root = "/sys/class/powercap"
    job_energy_window_s = 60.0           # rows of job_energy: one per job and window
    log_level = "info"

    [store]
    url = "mysql+pymysql://andreas_agent@db.example.org/andreas"   # no password here
    password_file = "/etc/andreas/agent-db-password"
    self_register = false                # the agent account may not write the inventory

    [spool]
    path = "/var/lib/andreas-agent/spool"
    max_size = "1GiB"

    [delivery]
    batch_rows = 500
    batch_s = 1.0

Secrets: the database password comes from ``password_file`` / ``ANDREAS_DB_PASSWORD_FILE``
or a URL in the service's root-only environment file; it is never printed (URLs go
through :func:`andreas.config.mask_url`). Every problem is one ``InputError`` line (the
CLI exits 2).
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.spool import DEFAULT_MAX_BYTES, parse_size
from andreas.config import mask_url, read_toml
from andreas.errors import InputError

DEFAULT_CONFIG = Path("/etc/andreas/agent.toml")
DEFAULT_SPOOL = Path("/var/lib/andreas-agent/spool")
DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"

_NUMBER = (int, float)
_KEYS: dict[str, dict[str, Any]] = {
    "agent": {"node_name": str, "interval_s": _NUMBER, "docker_url": str,
              "docker_endpoint": str, "heartbeat_s": _NUMBER, "fake_gpus": str,
              "powercap_root": str, "job_energy_window_s": _NUMBER, "log_level": str,
              "min_energy_interval_s": _NUMBER},
    "store": {"url": str, "password_file": str, "self_register": bool},
    "spool": {"path": str, "max_size": (str, int)},
    "delivery": {"batch_rows": int, "batch_s": _NUMBER, "shutdown_s": _NUMBER,
                 "max_backoff_s": _NUMBER},
}
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """The resolved settings (``config_path``: the file read, if any)."""

    node_name: str
    db_url: str
    db_password_file: str | None = None
    self_register: bool | None = None          # None: yes on SQLite, no on MariaDB
    interval_s: float = 1.0
    min_energy_interval_s: float = 1.0
    docker_url: str = DEFAULT_DOCKER_URL
    docker_endpoint: str = ""
    heartbeat_s: float = 10.0
    fake_gpus: str = ""
    powercap_root: str = "/sys/class/powercap"
    job_energy_window_s: float = 60.0
    log_level: str = "info"
    spool_dir: str = str(DEFAULT_SPOOL)
    spool_max_bytes: int = DEFAULT_MAX_BYTES
    batch_rows: int = 500
    batch_s: float = 1.0
    shutdown_s: float = 10.0
    max_backoff_s: float = 60.0
    config_path: str | None = None

    @property
    def db_url_masked(self) -> str:
        return mask_url(self.db_url)

    @property
    def registered_docker_endpoint(self) -> str:
        """What the node row says the manager should use (default ``ssh://<node>``)."""
        return self.docker_endpoint or f"ssh://{self.node_name}"


def read_env_file(path: str | Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a systemd EnvironmentFile (``#`` comments, optional quotes),
    so ``andreas-agent --check --env-file /etc/andreas/agent.env`` sees what the service
    sees."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"environment file {path}: cannot read ({e.strerror})") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum():
            raise InputError(f"environment file {path}: line {n} is not KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = value
    return out


def load_config(path: str | Path | None = None, *, environ: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> AgentConfig:
    """Read the file (``path``, else the default when it exists), the environment and the
    command-line ``overrides`` (keys of :class:`AgentConfig`, None = not given)."""
    env = os.environ if environ is None else environ
    explicit = path is not None
    file = Path(path) if explicit else DEFAULT_CONFIG
    data: dict[str, Any] = {}
    if explicit and not file.is_file():
        raise InputError(f"config file {file}: not found")
    if file.is_file():
        data = _read(file)
    where = str(file) if file.is_file() else "defaults"
    agent, store = data.get("agent", {}), data.get("store", {})
    spool, delivery = data.get("spool", {}), data.get("delivery", {})

    node = env.get("ANDREAS_NODE_NAME") or agent.get("node_name") or socket.gethostname()
    url = env.get("ANDREAS_DB_URL") or store.get("url")
    if not url:
        raise InputError(f"{where}: no database: set [store] url or ANDREAS_DB_URL "
                         "(the agent has no default database)")
    max_size = env.get("ANDREAS_SPOOL_MAX_SIZE") or spool.get("max_size", DEFAULT_MAX_BYTES)
    cfg = AgentConfig(
        node_name=node, db_url=url,
        db_password_file=env.get("ANDREAS_DB_PASSWORD_FILE") or store.get("password_file"),
        self_register=store.get("self_register"),
        interval_s=float(agent.get("interval_s", 1.0)),
        min_energy_interval_s=float(agent.get("min_energy_interval_s", 1.0)),
        docker_url=agent.get("docker_url", DEFAULT_DOCKER_URL),
        docker_endpoint=agent.get("docker_endpoint", ""),
        heartbeat_s=float(agent.get("heartbeat_s", 10.0)),
        fake_gpus=env.get("ANDREAS_FAKE_GPUS") or agent.get("fake_gpus", ""),
        powercap_root=agent.get("powercap_root", "/sys/class/powercap"),
        job_energy_window_s=float(agent.get("job_energy_window_s", 60.0)),
        log_level=agent.get("log_level", "info"),
        spool_dir=env.get("ANDREAS_SPOOL_DIR") or spool.get("path", str(DEFAULT_SPOOL)),
        spool_max_bytes=parse_size(max_size, "[spool] max_size / ANDREAS_SPOOL_MAX_SIZE"),
        batch_rows=int(delivery.get("batch_rows", 500)),
        batch_s=float(delivery.get("batch_s", 1.0)),
        shutdown_s=float(delivery.get("shutdown_s", 10.0)),
        max_backoff_s=float(delivery.get("max_backoff_s", 60.0)),
        config_path=str(file) if file.is_file() else None)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if given:
        cfg = replace(cfg, **given)
    _check(cfg, where)
    return cfg


def _check(cfg: AgentConfig, where: str) -> None:
    def positive(name: str, value: float, minimum: float = 0.0) -> None:
        if not (math.isfinite(value) and value > minimum):
            raise InputError(f"{where}: {name} must be a number > {minimum:g}, got {value!r}")

    positive("interval_s", cfg.interval_s)
    positive("min_energy_interval_s", cfg.min_energy_interval_s)
    positive("heartbeat_s", cfg.heartbeat_s)
    positive("job_energy_window_s", cfg.job_energy_window_s)
    positive("batch_s", cfg.batch_s)
    positive("shutdown_s", cfg.shutdown_s)
    positive("max_backoff_s", cfg.max_backoff_s)
    if cfg.batch_rows < 1:
        raise InputError(f"{where}: [delivery] batch_rows must be >= 1, got {cfg.batch_rows}")
    if cfg.log_level not in LOG_LEVELS:
        raise InputError(f"{where}: [agent] log_level must be one of {', '.join(LOG_LEVELS)}, "
                         f"got {cfg.log_level!r}")
    if not cfg.node_name or len(cfg.node_name) > 128 or any(c.isspace() for c in cfg.node_name):
        raise InputError(f"{where}: node name must be 1-128 characters without spaces, "
                         f"got {cfg.node_name!r}")
    if cfg.docker_url and not cfg.docker_url.startswith(("unix://", "tcp://", "ssh://",
                                                         "npipe://", "http://", "https://")):
        raise InputError(f"{where}: [agent] docker_url must be unix://, tcp:// or ssh://..., "
                         f"got {cfg.docker_url!r}")
    if cfg.fake_gpus:
        from agents.nvml_fake import parse_spec

        try:
            parse_spec(cfg.fake_gpus)
        except InputError as e:
            raise InputError(f"fake GPUs {cfg.fake_gpus!r}: {e}") from None


def _read(path: Path) -> dict[str, Any]:
    return read_toml(path, _KEYS)
