"""Settings of the node agent: ``/etc/andreas/agent.toml``, the environment, the command line.

Highest priority first: command-line options (``--fake-gpus``, ``--interval-s``,
``--metrics-port``), then
environment variables (``ANDREAS_DB_URL``, ``ANDREAS_DB_PASSWORD_FILE``,
``ANDREAS_NODE_NAME``, ``ANDREAS_SPOOL_DIR``, ``ANDREAS_SPOOL_MAX_SIZE``,
``ANDREAS_FAKE_GPUS``), then the file (``--config PATH``; without it
``/etc/andreas/agent.toml`` when present), then defaults. The file's sections:

    [agent]
    node_name = "gpu-07"                 # default: the host name
    interval_s = 1.0                     # sampling period
    docker_url = "unix:///var/run/docker.sock"   # the local daemon; "" = follow no containers
    docker_endpoint = "ssh://gpu-07"     # how the manager reaches this node's Docker
    fake_gpus = ""                       # e.g. "2xV100": SIMULATED GPUs (CI, laptops only)
    fence_after_s = 60.0                 # store unreachable this long: stop andreas containers
    engine = "docker"                    # "slurm": the jobs are Slurm batch jobs (docs/slurm.md)

    [store]
    url = "mysql+pymysql://andreas_agent@db.example.org/andreas"   # no password here
    password_file = "/etc/andreas/agent-db-password"

    [spool]
    path = "/var/lib/andreas-agent/spool"
    max_size = "1GiB"

    [delivery]
    batch_rows = 500

Every key, commented: ``systemd/agent.toml.example``. Secrets: the database password
comes from ``password_file`` / ``ANDREAS_DB_PASSWORD_FILE`` or a URL in the service's
root-only environment file; it is never printed (URLs go through
:func:`andreas.config.mask_url`). Every problem is one ``InputError`` line (the CLI exits
2), checked through ``andreas.infra.fields`` as the manager's settings are.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from agents.spool import DEFAULT_MAX_BYTES, parse_size
from andreas.config import EXECUTOR_KINDS, mask_url, normal_path, read_toml
from andreas.errors import InputError
from andreas.infra.fileio import read_text_capped
from andreas.infra.fields import Rule, check, rule

DEFAULT_CONFIG = Path("/etc/andreas/agent.toml")
DEFAULT_SPOOL = Path("/var/lib/andreas-agent/spool")
DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"

# The file's sections and keys -> the AgentConfig field each one sets (its type and limits
# come from there: andreas.infra.fields); [spool] max_size is parsed by parse_size.
_KEYS: dict[str, dict[str, str]] = {
    "agent": {k: k for k in ("node_name", "interval_s", "docker_url", "docker_endpoint",
                             "heartbeat_s", "fake_gpus", "powercap_root",
                             "job_energy_window_s", "log_level", "min_energy_interval_s",
                             "metrics_port", "metrics_address", "fence_check_s",
                             "fence_after_s", "powerd_socket", "fake_gpu_dir", "engine",
                             "slurm_output_dir", "slurm_map_dir")},
    "store": {"url": "db_url", "password_file": "db_password_file",
              "self_register": "self_register"},
    "spool": {"path": "spool_dir", "max_size": "spool_max_bytes"},
    "delivery": {k: k for k in ("batch_rows", "batch_s", "shutdown_s", "max_backoff_s")},
}
LOG_LEVELS = ("debug", "info", "warning", "error")
# Bounds of the agent's durations and counts: a period shorter than the floor would spin,
# one longer than the ceiling is a typo (1e9 s) that hangs `--once` and the shutdown.
MIN_PERIOD_S = 0.05
MAX_SAMPLE_PERIOD_S = 60.0         # sampling: coarser is no power measurement
MAX_PERIOD_S = 3600.0              # heartbeats, windows, batches, back-off, shutdown
MAX_BATCH_ROWS = 100_000
# Kernel file systems: a spool there is a typo, and writes would fail or do harm.
_NO_SPOOL_UNDER = ("/proc", "/sys", "/dev")
ENGINES = EXECUTOR_KINDS          # andreas.config.ExecutorKind


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """The resolved settings (``config_path``: the file read, if any)."""

    node_name: str
    db_url: str = field(metadata=rule(secret=True))
    db_password_file: str | None = None
    self_register: bool | None = None          # None: yes on SQLite, no on MariaDB
    interval_s: float = field(default=1.0, metadata=rule(ge=MIN_PERIOD_S,
                                                        le=MAX_SAMPLE_PERIOD_S))
    min_energy_interval_s: float = field(default=1.0, metadata=rule(
        ge=MIN_PERIOD_S, le=MAX_SAMPLE_PERIOD_S))
    docker_url: str = DEFAULT_DOCKER_URL
    docker_endpoint: str = ""
    heartbeat_s: float = field(default=10.0, metadata=rule(ge=MIN_PERIOD_S, le=MAX_PERIOD_S))
    fake_gpus: str = ""
    powercap_root: str = "/sys/class/powercap"
    job_energy_window_s: float = field(default=60.0, metadata=rule(ge=MIN_PERIOD_S,
                                                                  le=MAX_PERIOD_S))
    log_level: str = field(default="info", metadata=rule(choices=LOG_LEVELS))
    # Prometheus /metrics (docs/METRICS.md); None: no exporter, prometheus_client not imported.
    metrics_port: int | None = field(default=None, metadata=rule(ge=1, le=65535))
    metrics_address: str = "127.0.0.1"
    # The fence (agents/fence.py): every fence_check_s the store says whether each andreas
    # container here is still its job's current attempt (stale ones are stopped); with no
    # answer for fence_after_s (0: never) every andreas container here is stopped. Keep it
    # at most the manager's [manager] fence_after_s (docs/design/manager.md, "Fencing").
    fence_check_s: float = field(default=5.0, metadata=rule(ge=MIN_PERIOD_S, le=MAX_PERIOD_S))
    fence_after_s: float = field(default=60.0, metadata=rule(ge=0, le=86400))
    # GPU power limits (agents/powerlimits.py): the privileged daemon's socket ("" = none:
    # every GPU at its default limit) and, with fake GPUs, where that daemon keeps them
    powerd_socket: str = ""
    fake_gpu_dir: str = ""
    # What runs the jobs here: the node's Docker engine, or Slurm (agents/slurm_jobs.py:
    # jobs and their GPUs from Slurm, epochs from their output files; no Docker needed).
    engine: str = field(default="docker", metadata=rule(choices=ENGINES))
    slurm_output_dir: str = ""
    slurm_map_dir: str = ""
    spool_dir: str = str(DEFAULT_SPOOL)
    spool_max_bytes: int = DEFAULT_MAX_BYTES
    batch_rows: int = field(default=500, metadata=rule(ge=1, le=MAX_BATCH_ROWS))
    batch_s: float = field(default=1.0, metadata=rule(gt=0, le=MAX_PERIOD_S))
    shutdown_s: float = field(default=10.0, metadata=rule(gt=0, le=MAX_PERIOD_S))
    max_backoff_s: float = field(default=60.0, metadata=rule(gt=0, le=MAX_PERIOD_S))
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
    text = read_text_capped(path, what="environment file", limit=1 << 20,
                            label=f"environment file {path}")
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
    file = Path(path) if path is not None else DEFAULT_CONFIG
    if explicit and not file.is_file():
        raise InputError(f"config file {file}: not found")
    where = str(file) if file.is_file() else "defaults"
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if file.is_file():
        for section, table in read_toml(file, _KEYS).items():
            for key, value in table.items():
                if key not in _KEYS[section]:
                    raise InputError(f"{file}: [{section}] unknown key '{key}' "
                                     f"(known: {', '.join(sorted(_KEYS[section]))})")
                values[_KEYS[section][key]] = value
                origin[_KEYS[section][key]] = f"{file}: [{section}] {key}"
    for name, var in _ENV.items():
        if env.get(var):
            values[name], origin[name] = env[var], var
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name], origin[name] = value, name
    values.setdefault("node_name", socket.gethostname())
    if not values.get("db_url"):
        raise InputError(f"{where}: no database: set [store] url or ANDREAS_DB_URL "
                         "(the agent has no default database)")
    if "spool_max_bytes" in values:
        values["spool_max_bytes"] = parse_size(values["spool_max_bytes"],
                                               origin["spool_max_bytes"])
    hints = get_type_hints(AgentConfig)
    rules = {f.name: f.metadata.get("rule", Rule()) for f in fields(AgentConfig)}
    checked = {name: check(origin.get(name, name), value, hints[name], rules[name])
               for name, value in values.items()}
    cfg = AgentConfig(**checked, config_path=str(file) if file.is_file() else None)
    _check(cfg, where, origin.get("fake_gpus", "fake_gpus"))
    return cfg


# Environment variables -> the field each one sets (they win over the file).
_ENV = {"node_name": "ANDREAS_NODE_NAME", "db_url": "ANDREAS_DB_URL",
        "db_password_file": "ANDREAS_DB_PASSWORD_FILE", "fake_gpus": "ANDREAS_FAKE_GPUS",
        "spool_dir": "ANDREAS_SPOOL_DIR", "spool_max_bytes": "ANDREAS_SPOOL_MAX_SIZE",
        "powerd_socket": "ANDREAS_POWERD_SOCKET"}


def _check(cfg: AgentConfig, where: str, fake_gpus_origin: str) -> None:
    """What one field's type and limits cannot say."""
    if not cfg.node_name or len(cfg.node_name) > 128 or any(c.isspace() for c in cfg.node_name):
        raise InputError(f"{where}: node name must be 1-128 characters without spaces, "
                         f"got {cfg.node_name!r}")
    if cfg.docker_url and not cfg.docker_url.startswith("unix://"):
        raise InputError(f"{where}: [agent] docker_url must be the local engine's unix:// "
                         f"socket (or \"\" for none), got {cfg.docker_url!r}: a plain "
                         "tcp:// engine is root on the node for anyone on the network")
    spool = normal_path(cfg.spool_dir, f"{where}: [spool] path")
    if spool == "/" or any(spool == p or spool.startswith(p + "/") for p in _NO_SPOOL_UNDER):
        raise InputError(f"{where}: [spool] path {cfg.spool_dir!r}: not a place for a spool "
                         "(use e.g. /var/lib/andreas-agent/spool)")
    if cfg.fake_gpus:
        from agents.nvml_fake import parse_spec

        try:
            parse_spec(cfg.fake_gpus)
        except InputError as e:
            raise e.named(fake_gpus_origin) from None
