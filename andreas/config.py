"""Settings of andreas: one frozen object built from a TOML file and environment variables.

Where each setting comes from, highest priority first:

1. environment variables: ``ANDREAS_DB_URL``, ``ANDREAS_DB_PASSWORD_FILE``;
2. the TOML file ``$ANDREAS_CONFIG`` (must exist when set) or ``/etc/andreas/andreas.toml``
   (used when present);
3. defaults: an SQLite database at ``$XDG_DATA_HOME/andreas/andreas.db``
   (``~/.local/share/andreas/andreas.db`` when XDG_DATA_HOME is unset).

The file::

    [store]
    url = "mysql+pymysql://andreas_manager@db.example.org/andreas"
    password_file = "/etc/andreas/db-password"   # keeps the password out of the URL
    raw_retention_days = 7                        # raw samples kept, then 1-minute aggregates
    connect_retries = 5                           # daemons: tries at start, with back-off

    [manager]                    # the Job Manager (`andreas manager run`)
    policy = "rg"                # rg | pr | greedy | fifo | edf | priority (env ANDREAS_POLICY)
    period_s = 3600              # rescheduling period H (env ANDREAS_PERIOD_S)
    poll_s = 1.0                 # store and container polling
    max_retries = 3              # non-zero exits retried from the checkpoint, then failed
    lock = "wait"                # a second manager waits for the lock, or "exit"s
    unprofiled_epoch_s = 3600    # epoch time assumed for an application nobody measured
    image_pull_grace_s = 900     # a pull failing in a way that may pass (registry down):
                                 # the job waits this long, then fails with the reason

    [executor]                   # how containers are run
    checkpoint_root = "/var/lib/andreas/checkpoints"   # shared path, as the nodes see it
    network = "bridge"           # "host" only with allow_host_network = true
    image_allowlist = ["registry.example.org/ml/*"]    # empty: any image
    tls_ca_cert = "/etc/andreas/docker-ca.pem"         # for tcp:// endpoints (TLS only)

    [report]                     # `andreas report`
    grid_co2_g_per_kwh = 250     # grid carbon intensity; reports then show kg CO2

Passwords never appear in messages or logs: print URLs through :func:`mask_url`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andreas.errors import InputError

DEFAULT_CONFIG_PATH = Path("/etc/andreas/andreas.toml")
DEFAULT_RAW_RETENTION_DAYS = 7.0
DEFAULT_CONNECT_RETRIES = 5
ENV_CONFIG = "ANDREAS_CONFIG"
ENV_DB_URL = "ANDREAS_DB_URL"
ENV_DB_PASSWORD_FILE = "ANDREAS_DB_PASSWORD_FILE"

# Sections other components own are listed here as they are added; unknown ones are errors
# so that a typo does not silently fall back to a default.
_STORE_KEYS = {"url": str, "password_file": str, "raw_retention_days": (int, float),
               "connect_retries": int}
_NUMBER = (int, float)
_MANAGER_KEYS = {"policy": str, "period_s": _NUMBER, "poll_s": _NUMBER, "max_retries": int,
                 "seed": int, "energy_pue": _NUMBER, "price_per_kwh": _NUMBER,
                 "restart_overhead_s": _NUMBER, "lock": str, "min_power_samples": int,
                 "unprofiled_epoch_s": _NUMBER, "image_pull_grace_s": _NUMBER}
_EXECUTOR_KEYS = {"checkpoint_root": str, "checkpoint_mount": str, "network": str,
                  "allow_host_network": bool, "image_allowlist": list, "extra_volumes": list,
                  "tls_ca_cert": str, "tls_client_cert": str, "tls_client_key": str,
                  "stop_grace_s": _NUMBER, "docker_timeout_s": _NUMBER}
_REPORT_KEYS = {"grid_co2_g_per_kwh": _NUMBER}
_SECTIONS: dict[str, dict[str, Any]] = {"store": _STORE_KEYS, "manager": _MANAGER_KEYS,
                                        "executor": _EXECUTOR_KEYS, "report": _REPORT_KEYS}
POLICY_CHOICES = ("rg", "pr", "greedy", "fifo", "edf", "priority")
LOCK_CHOICES = ("wait", "exit")


@dataclass(frozen=True, kw_only=True)
class ExecutorSettings:
    """How the manager runs containers (``[executor]``; see docs in the module header).

    ``checkpoint_root`` is the shared directory *as the Docker hosts see it*: job j's
    checkpoints live in ``<checkpoint_root>/<j>`` and are mounted at ``checkpoint_mount``
    inside the container. ``extra_volumes`` ("host:container[:ro]") exists for laptops and
    tests whose images bind-mount a runtime from the host; production images need none.
    """

    checkpoint_root: str = "/var/lib/andreas/checkpoints"
    checkpoint_mount: str = "/andreas/checkpoint"
    network: str = "bridge"
    allow_host_network: bool = False
    image_allowlist: tuple[str, ...] = ()       # fnmatch patterns; empty: every image
    extra_volumes: tuple[str, ...] = ()
    tls_ca_cert: str | None = None
    tls_client_cert: str | None = None
    tls_client_key: str | None = None
    stop_grace_s: float = 120.0                 # default grace when a job has none
    docker_timeout_s: float = 30.0              # API calls (not the stop grace period)


@dataclass(frozen=True, kw_only=True)
class ManagerSettings:
    """The Job Manager's loop (``[manager]``): policy, period H, polling, retries."""

    policy: str = "rg"
    period_s: float = 3600.0
    poll_s: float = 1.0                         # how often the store / containers are read
    max_retries: int = 3                        # non-zero exits before a job fails
    seed: int | None = None                     # rg / pr randomness; None: from the clock
    energy_pue: float = 1.33
    price_per_kwh: float = 0.172
    restart_overhead_s: float = 10.0
    lock: str = "wait"                          # a second manager waits, or exits (2)
    min_power_samples: int = 60                 # measured c_ng replaces profiles/ after this
    unprofiled_epoch_s: float = 3600.0          # epoch time guessed for an unknown application
    image_pull_grace_s: float = 900.0           # a job whose image pull keeps failing, then fails


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    """``andreas report`` (``[report]``): the grid's carbon intensity, None: no CO2 figure."""

    grid_co2_g_per_kwh: float | None = None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The resolved settings; ``*_source`` says where a value came from (for messages)."""

    db_url: str
    db_url_source: str
    db_password_file: str | None = None
    raw_retention_days: float = DEFAULT_RAW_RETENTION_DAYS
    connect_retries: int = DEFAULT_CONNECT_RETRIES
    config_path: str | None = None
    manager: ManagerSettings = ManagerSettings()
    executor: ExecutorSettings = ExecutorSettings()
    report: ReportSettings = ReportSettings()


def default_sqlite_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/andreas/andreas.db``, or ``~/.local/share/andreas/andreas.db``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home()) /
                                           ".local" / "share")
    return Path(base) / "andreas" / "andreas.db"


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (if any) and the environment; every problem is one InputError."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_CONFIG)
    path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    data: dict[str, Any] = {}
    if explicit and not path.is_file():
        raise InputError(f"{ENV_CONFIG}={explicit}: config file not found")
    if path.is_file():
        data = read_toml(path, _SECTIONS)
    store = data.get("store", {})

    if env.get(ENV_DB_URL):
        url, source = env[ENV_DB_URL], ENV_DB_URL
    elif "url" in store:
        url, source = store["url"], f"{path} [store] url"
    else:
        url, source = f"sqlite:///{default_sqlite_path(env)}", "default"
    password_file = env.get(ENV_DB_PASSWORD_FILE) or store.get("password_file")
    days = float(store.get("raw_retention_days", DEFAULT_RAW_RETENTION_DAYS))
    if not days > 0:
        raise InputError(f"{path}: [store] raw_retention_days must be > 0, got {days:g}")
    retries = store.get("connect_retries", DEFAULT_CONNECT_RETRIES)
    if retries < 0:
        raise InputError(f"{path}: [store] connect_retries must be >= 0, got {retries}")
    return Settings(db_url=url, db_url_source=source, db_password_file=password_file,
                    raw_retention_days=days, connect_retries=retries,
                    config_path=str(path) if path.is_file() else None,
                    manager=_manager(data.get("manager", {}), env, path),
                    executor=_executor(data.get("executor", {}), path),
                    report=_report(data.get("report", {}), path))


def _manager(raw: Mapping[str, Any], env: Mapping[str, str], path: Path) -> ManagerSettings:
    """``[manager]`` plus ``ANDREAS_POLICY`` / ``ANDREAS_PERIOD_S`` (environment wins)."""
    values = dict(raw)
    where = {k: f"{path}: [manager] {k}" for k in values}
    if env.get("ANDREAS_POLICY"):
        values["policy"], where["policy"] = env["ANDREAS_POLICY"], "ANDREAS_POLICY"
    if env.get("ANDREAS_PERIOD_S"):
        try:
            values["period_s"] = float(env["ANDREAS_PERIOD_S"])
        except ValueError:
            raise InputError(f"ANDREAS_PERIOD_S={env['ANDREAS_PERIOD_S']!r}: not a number") \
                from None
        where["period_s"] = "ANDREAS_PERIOD_S"
    if "policy" in values and values["policy"] not in POLICY_CHOICES:
        raise InputError(f"{where['policy']}: unknown policy {values['policy']!r} "
                         f"(known: {', '.join(POLICY_CHOICES)})")
    if "lock" in values and values["lock"] not in LOCK_CHOICES:
        raise InputError(f"{where['lock']}: must be one of {', '.join(LOCK_CHOICES)}, "
                         f"got {values['lock']!r}")
    for key in ("period_s", "poll_s", "energy_pue", "price_per_kwh", "unprofiled_epoch_s"):
        if key in values and not values[key] > 0:
            raise InputError(f"{where[key]} must be > 0, got {values[key]!r}")
    for key in ("max_retries", "restart_overhead_s", "min_power_samples", "image_pull_grace_s"):
        if key in values and values[key] < 0:
            raise InputError(f"{where[key]} must be >= 0, got {values[key]!r}")
    return ManagerSettings(**values)


def _executor(raw: Mapping[str, Any], path: Path) -> ExecutorSettings:
    values = dict(raw)
    for key in ("image_allowlist", "extra_volumes"):
        if key in values:
            items = values[key]
            if not all(isinstance(i, str) and i for i in items):
                raise InputError(f"{path}: [executor] {key} must be a list of non-empty "
                                 f"strings, got {items!r}")
            values[key] = tuple(items)
    if values.get("network") == "host" and not values.get("allow_host_network", False):
        raise InputError(f"{path}: [executor] network = 'host' needs allow_host_network = "
                         "true (containers get no host network by default)")
    for key in ("stop_grace_s", "docker_timeout_s"):
        if key in values and not values[key] > 0:
            raise InputError(f"{path}: [executor] {key} must be > 0, got {values[key]!r}")
    for key in ("checkpoint_root", "checkpoint_mount"):
        if key in values and not values[key].startswith("/"):
            raise InputError(f"{path}: [executor] {key} must be an absolute path, got "
                             f"{values[key]!r}")
    return ExecutorSettings(**values)


def _report(raw: Mapping[str, Any], path: Path) -> ReportSettings:
    co2 = raw.get("grid_co2_g_per_kwh")
    if co2 is not None and not co2 >= 0:
        raise InputError(f"{path}: [report] grid_co2_g_per_kwh must be >= 0, got {co2!r}")
    return ReportSettings(grid_co2_g_per_kwh=None if co2 is None else float(co2))


def read_toml(path: Path, sections: Mapping[str, Mapping[str, type]]) -> dict[str, Any]:
    """A config file checked against ``sections`` (section -> key -> type): unknown sections
    or keys and wrong types are one-line errors; a bool is accepted only where a bool is
    expected (TOML booleans are ints to Python)."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read config file: {e.strerror}") from None
    for section, value in data.items():
        if section not in sections:
            raise InputError(f"{path}: unknown section [{section}] "
                             f"(known: {', '.join(sorted(sections))})")
        if not isinstance(value, dict):
            raise InputError(f"{path}: '{section}' must be a table ([{section}])")
        keys = sections[section]
        for key, item in value.items():
            if key not in keys:
                raise InputError(f"{path}: [{section}] unknown key '{key}' "
                                 f"(known: {', '.join(sorted(keys))})")
            kind = keys[key]
            if (isinstance(item, bool) and kind is not bool) or not isinstance(item, kind):
                # A URL may hold a password: name its type only.
                shown = "a " + type(item).__name__ if key == "url" else repr(item)
                raise InputError(f"{path}: [{section}] {key} has the wrong type: {shown}")
    return data


def mask_url(url: Any) -> str:
    """The URL with its password replaced by ``***``; safe to print or log.

    Works on strings that are not valid URLs too: whatever stands between the first ':'
    after the scheme and the last '@' is treated as the password.
    """
    if not isinstance(url, str):
        try:
            return url.render_as_string(hide_password=True)
        except AttributeError:
            url = str(url)
    if "@" not in url:
        return url
    userinfo, rest = url.rsplit("@", 1)
    scheme_end = userinfo.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    colon = userinfo.find(":", start)
    if colon < 0:
        return url
    return f"{userinfo[:colon]}:***@{rest}"
