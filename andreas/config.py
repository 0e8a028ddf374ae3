"""Settings of andreas: one frozen object built from a TOML file and environment variables.

Where each setting comes from, highest priority first:

1. environment variables: ``ANDREAS_DB_URL``, ``ANDREAS_DB_PASSWORD_FILE`` (and, for the
   manager, ``ANDREAS_POLICY``, ``ANDREAS_PERIOD_S``);
2. the TOML file ``$ANDREAS_CONFIG`` (must exist when set) or ``/etc/andreas/andreas.toml``
   (used when present);
3. defaults: an SQLite database at ``$XDG_DATA_HOME/andreas/andreas.db``
   (``~/.local/share/andreas/andreas.db`` when XDG_DATA_HOME is unset).

The file has the sections ``[store]`` (URL, password file, retention), ``[manager]`` (the
Job Manager: policy, period, polling, retries, the lease, tariff, metrics), ``[executor]``
and ``[executor.slurm]`` (how containers or Slurm jobs are run, and what they may touch),
``[profiler]``, ``[report]`` and ``[power]``. The full template, every section and key
commented, is ``systemd/andreas.toml.example`` (a test loads it through this loader);
the keys in a table: docs/operations.md.

Every key is checked against its settings dataclass through ``andreas.infra.fields``
(the one way to check settings), so a bad value is one line naming the key, the file or
variable it came from and the value. Paths the containers may see are normalised and
sensitive host paths refused here, once, when the file is loaded
(:func:`check_executor`). Passwords never appear in messages or logs: print URLs through
:func:`mask_url`.
"""

from __future__ import annotations

import enum
import os
import re
import shlex
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from andreas.errors import InputError
from andreas.formats.tariff import TariffFile, load_tariff
from andreas.infra.fileio import read_text_capped
from andreas.infra.fields import build, rule
from andreas.limits import (DEFAULT_RESTART_OVERHEAD_S, MAX_DAYS, MAX_GRACE_S, MAX_PERIOD_S,
                            MAX_PRICE_PER_KWH, MAX_PUE, MAX_SEED, MIN_PERIOD_S, MIN_PUE)
from andreas.policies import manager_policies

DEFAULT_CONFIG_PATH = Path("/etc/andreas/andreas.toml")
DEFAULT_RAW_RETENTION_DAYS = 7.0
DEFAULT_JOB_ENERGY_RETENTION_DAYS = 400.0
DEFAULT_CONNECT_RETRIES = 5
ENV_CONFIG = "ANDREAS_CONFIG"
ENV_DB_URL = "ANDREAS_DB_URL"
ENV_DB_PASSWORD_FILE = "ANDREAS_DB_PASSWORD_FILE"

_SECTIONS = ("store", "manager", "executor", "report", "profiler", "power")


class LockMode(enum.StrEnum):
    """What a manager does while another holds the lease (``[manager] lock``)."""

    WAIT = "wait"               # a standby: take over when the lease is free
    EXIT = "exit"               # refuse to start


LOCK_CHOICES = tuple(LockMode)
# Upper bounds of the settings: a value past them is a typo, and would hang a
# loop, overflow a column or make a job impossible to stop.
MAX_CONFIG_BYTES = 1 << 20


class ExecutorKind(enum.StrEnum):
    """What runs the jobs (``[executor] kind``; the agent's ``engine`` follows the same)."""

    DOCKER = "docker"
    SLURM = "slurm"


EXECUTOR_KINDS = tuple(ExecutorKind)
_SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
# sbatch options andreas sets for every attempt (or must never set: --deadline cancels a
# job at its due date, andreas plans around due dates instead): refused in sbatch_args.
SLURM_OWN_OPTIONS = ("--job-name", "-J", "--nodelist", "-w", "--partition", "-p", "--output",
                     "-o", "--error", "-e", "--export", "--wrap", "--gres", "--gpus", "-G",
                     "--parsable", "--deadline", "--requeue", "--no-requeue", "--array", "-a",
                     "--account", "-A", "--chdir", "-D", "--open-mode")
DEFAULT_CONTAINER_USER = "65534:65534"      # nobody:nogroup
# Containers run as a numeric uid[:gid], never 0: a name is looked up in the image's own
# /etc/passwd, which the image's author writes (any name may be uid 0 there).
_USER = re.compile(r"([0-9]{1,10})(?::([0-9]{1,10}))?")
# Docker networks: bridge, none or a network's name; never another container's namespace
# (container:<id>), and host only with allow_host_network.
_NETWORK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Host paths a job must never see, nor any directory above one (so never /): the
# container engines' sockets and state are root on the node; the kernel's views, the
# system's configuration and credentials, people's homes and the agent's spool are not
# a job's business. Paths are compared after normalisation (normal_path).
SENSITIVE_HOST_PATHS = ("/proc", "/sys", "/dev", "/etc", "/run", "/var/run", "/root",
                        "/boot", "/home", "/var/lib/docker", "/var/lib/containerd",
                        "/var/lib/kubelet", "/var/lib/andreas-agent", "/var/log",
                        "/run/docker.sock", "/var/run/docker.sock", "/run/docker",
                        "/run/containerd", "/var/run/containerd", "/run/user")


@dataclass(frozen=True, kw_only=True)
class StoreSettings:
    """``[store]``: where the database is and how long raw samples stay (flattened into
    :class:`Settings`, where the environment may override the URL)."""

    url: str | None = field(default=None, metadata=rule(secret=True))
    password_file: str | None = None
    raw_retention_days: float = field(default=DEFAULT_RAW_RETENTION_DAYS,
                                      metadata=rule(gt=0, le=MAX_DAYS))
    job_energy_retention_days: float = field(default=DEFAULT_JOB_ENERGY_RETENTION_DAYS,
                                             metadata=rule(gt=0, le=MAX_DAYS))
    connect_retries: int = field(default=DEFAULT_CONNECT_RETRIES, metadata=rule(ge=0, le=1000))


@dataclass(frozen=True, kw_only=True)
class SlurmSettings:
    """``[executor.slurm]``: how the Slurm executor submits attempts (docs/slurm.md).
    ``output_dir`` holds each attempt's output file (``andreas-<job>-<attempt>.out``): a
    directory the nodes, the agents and the manager all see. ``bin_dir``: where sbatch,
    squeue, scontrol and scancel are (default: the PATH)."""

    partition: str = ""
    output_dir: str = field(default="", metadata=rule(absolute_path=True))
    account: str | None = None
    sbatch_args: tuple[str, ...] = ()
    command_timeout_s: float = field(default=30.0, metadata=rule(gt=0, le=3600))
    bin_dir: str | None = field(default=None, metadata=rule(absolute_path=True))


@dataclass(frozen=True, kw_only=True)
class ExecutorSettings:
    """How the manager runs containers (``[executor]``; see docs in the module header).

    ``checkpoint_root`` is the shared directory *as the Docker hosts see it*: job j's
    checkpoints live in ``<checkpoint_root>/<j>`` and are mounted at ``checkpoint_mount``
    inside the container. ``extra_volumes`` ("host:container[:ro]") exists for laptops and
    tests whose images bind-mount a runtime from the host; production images need none.
    """

    checkpoint_root: str = field(default="/var/lib/andreas/checkpoints",
                                 metadata=rule(absolute_path=True))
    checkpoint_mount: str = field(default="/andreas/checkpoint", metadata=rule(absolute_path=True))
    network: str = "bridge"
    allow_host_network: bool = False
    # patterns ('*' and '?' never cross '/'; the registry host is literal); empty: every image
    image_allowlist: tuple[str, ...] = ()
    extra_volumes: tuple[str, ...] = ()         # "host:container[:ro|rw]", checked at load
    # The container's security profile: every capability dropped, no new privileges, a
    # non-root numeric user ("uid:gid"), and memory / process limits (0: none; memory
    # unset: the node's memory less memory_reserve_mib, so a job never starves the node's
    # agent; jobs are also the OOM killer's first choice). The job's checkpoint directory
    # is made writable for that user.
    user: str = DEFAULT_CONTAINER_USER
    memory_limit_mib: int | None = field(default=None, metadata=rule(ge=0, le=1 << 24))
    memory_reserve_mib: int = field(default=2048, metadata=rule(ge=0, le=1 << 20))
    pids_limit: int = field(default=4096, metadata=rule(ge=0, le=1 << 22))
    tls_ca_cert: str | None = None
    tls_client_cert: str | None = None
    tls_client_key: str | None = None
    # when a job has none
    stop_grace_s: float = field(default=120.0, metadata=rule(gt=0, le=MAX_GRACE_S))
    # API calls, not stops
    docker_timeout_s: float = field(default=30.0, metadata=rule(gt=0, le=3600))
    # Exited containers of finished attempts are removed this long after their exit (the
    # end of the log is kept in the store first, so `andreas logs` still answers).
    keep_exited_s: float = field(default=3600.0, metadata=rule(ge=0, le=MAX_DAYS * 86400))
    # GPU sharing: the host directory of the CUDA MPS control daemon's pipes. Set, a job with
    # a GPU share gets it at MPS_PIPE_MOUNT and its compute capped by MPS; unset, shares
    # time-slice the GPU (the percentage variable is still passed; without MPS it does nothing).
    mps_pipe_dir: str | None = field(default=None, metadata=rule(absolute_path=True))
    # Fake GPUs only (tests, demos): a host directory shared by the jobs of a node, where
    # the example job marks the fake GPUs it runs on, so co-located jobs slow each other
    # down as shared real GPUs would (ANDREAS_FAKE_GPU_DIR, ANDREAS_FAKE_GPUS).
    fake_gpu_dir: str | None = field(default=None, metadata=rule(absolute_path=True))
    # Which engine runs the attempts: Docker engines on the nodes, or Slurm ([executor.slurm]).
    kind: str = field(default="docker", metadata=rule(choices=EXECUTOR_KINDS))
    # An attempt the engine keeps queued (Slurm: pending) longer than this is cancelled and
    # its job planned again.
    pending_timeout_s: float = field(default=600.0, metadata=rule(gt=0, le=MAX_GRACE_S))
    slurm: SlurmSettings = field(default=SlurmSettings(), metadata=rule(derived=True))


@dataclass(frozen=True, kw_only=True)
class ManagerSettings:
    """The Job Manager's loop (``[manager]``): policy, period H, polling, retries."""

    policy: str = field(default="rg", metadata=rule(choices=manager_policies()))
    period_s: float = field(default=3600.0, metadata=rule(ge=MIN_PERIOD_S, le=MAX_PERIOD_S))
    # store and container polling
    poll_s: float = field(default=1.0, metadata=rule(ge=0.001, le=3600))
    max_retries: int = field(default=3, metadata=rule(ge=0, le=1000))  # non-zero exits, then failed
    # rg / pr randomness; None: from the clock
    seed: int | None = field(default=None, metadata=rule(ge=0, le=MAX_SEED))
    energy_pue: float = field(default=1.33, metadata=rule(ge=MIN_PUE, le=MAX_PUE))
    price_per_kwh: float = field(default=0.172, metadata=rule(gt=0, le=MAX_PRICE_PER_KWH))
    restart_overhead_s: float = field(default=DEFAULT_RESTART_OVERHEAD_S,
                                      metadata=rule(ge=0, le=MAX_GRACE_S))
    # The policies run in a helper process that ends after this long without a decision
    # (its ~110 MB of compiled kernels go with it); 0: in the manager's process.
    optimizer_idle_s: float = field(default=300.0, metadata=rule(ge=0, le=MAX_DAYS * 86400))
    # A second manager waits for the lock, or exits (2).
    lock: str = field(default="wait", metadata=rule(choices=LOCK_CHOICES))
    # The manager lease lasts this long unless renewed (every third of it): a standby on
    # another host takes over this long after the holder's host died (same host: at once).
    lease_s: float = field(default=15.0, metadata=rule(ge=1, le=600))
    # Measured c_ng replaces profiles/ after this many samples.
    min_power_samples: int = field(default=60, metadata=rule(ge=0, le=10**9))
    # Epoch time guessed for an application nobody measured.
    unprofiled_epoch_s: float = field(default=3600.0, metadata=rule(gt=0, le=MAX_GRACE_S * 30))
    # A job whose image pull keeps failing waits this long, then fails.
    image_pull_grace_s: float = field(default=900.0, metadata=rule(ge=0, le=MAX_GRACE_S * 7))
    # The agents' self-fence ([agent] fence_after_s; this must be at least the largest):
    # a job whose node stopped answering while it ran starts elsewhere only after its
    # grace_s + fence_after_s + a margin, when any copy on the cut-off node has stopped.
    fence_after_s: float = field(default=60.0, metadata=rule(ge=0, le=MAX_GRACE_S))
    # Prometheus /metrics of `andreas manager run` (docs/METRICS.md); None: no exporter.
    metrics_port: int | None = field(default=None, metadata=rule(ge=1, le=65535))
    metrics_address: str = "127.0.0.1"
    # Time-of-use tariff CSV (docs/FORMAT.md "Tariff"); relative to the config file. With
    # it, plans, reports and views bill price(t) x PUE(t) (hours without a pue column take
    # energy_pue) and price_per_kwh is not used. Read and checked once, at load.
    tariff: str | None = None
    tariff_file: TariffFile | None = field(default=None, metadata=rule(derived=True))
    # The policies choose GPU power limits where nodes can set them (docs/power-limits.md);
    # false: every GPU at its default limit.
    power_levels: bool = True


@dataclass(frozen=True, kw_only=True)
class ProfilerSettings:
    """``[profiler]``: the Job Manager's automatic profiling. ``nodes`` are reserved for it
    (marked ``profiling`` when the manager starts; nothing else is planned there); a job
    of an application with no profile or model for a profiling node's GPU type runs there
    first, ``epochs`` epochs per GPU count (the first is warm-up), at most ``timeout_s``
    per count, before the optimizer plans it (``andreas.manager.profiling``)."""

    nodes: tuple[str, ...] = ()
    epochs: int = field(default=3, metadata=rule(ge=1, le=1000))
    timeout_s: float = field(default=3600.0, metadata=rule(gt=0, le=7 * 86400.0))


@dataclass(frozen=True, kw_only=True)
class PowerSettings:
    """``[power]``: the manager switches a node off when it has been idle ``idle_s`` and
    the latest plan leaves it empty, and on when a plan places work on it
    (``andreas.manager.power``). The commands are argv lists (or strings split like a
    shell would, but run without one); ``{node}`` in an argument becomes the node's name,
    and the command also gets ``ANDREAS_NODE``. Logs name the program and the node only."""

    enabled: bool = False
    idle_s: float = field(default=1800.0, metadata=rule(gt=0, le=MAX_DAYS * 86400))
    off_command: tuple[str, ...] | str = ()
    on_command: tuple[str, ...] | str = ()
    # Boot until the node's container engine answers; not answering by 3x this: off again.
    wake_lead_s: float = field(default=300.0, metadata=rule(ge=0, le=MAX_GRACE_S))
    command_timeout_s: float = field(default=60.0, metadata=rule(gt=0, le=3600))
    # Only these nodes are ever switched off; empty: every node.
    nodes: tuple[str, ...] = ()

    def argv(self, which: str, node: str) -> tuple[str, ...]:
        """``off_command`` or ``on_command`` for ``node``, as the argv to run."""
        return tuple(a.replace("{node}", node) for a in command_argv(getattr(self, which)))


def command_argv(command: tuple[str, ...] | str) -> tuple[str, ...]:
    """A command setting as an argv (a string is split as a shell would; ValueError for
    unbalanced quotes)."""
    return tuple(shlex.split(command)) if isinstance(command, str) else tuple(command)


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    """``andreas report`` (``[report]``): the grid's carbon intensity, None: no CO2 figure."""

    grid_co2_g_per_kwh: float | None = field(default=None, metadata=rule(ge=0, le=1e5))


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The resolved settings; ``*_source`` says where a value came from (for messages)."""

    db_url: str
    db_url_source: str
    db_password_file: str | None = None
    raw_retention_days: float = DEFAULT_RAW_RETENTION_DAYS
    job_energy_retention_days: float = DEFAULT_JOB_ENERGY_RETENTION_DAYS
    connect_retries: int = DEFAULT_CONNECT_RETRIES
    config_path: str | None = None
    manager: ManagerSettings = ManagerSettings()
    executor: ExecutorSettings = ExecutorSettings()
    report: ReportSettings = ReportSettings()
    profiler: ProfilerSettings = ProfilerSettings()
    power: PowerSettings = PowerSettings()


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
    store = _section(StoreSettings, data, "store", path)

    if env.get(ENV_DB_URL):
        url, source = env[ENV_DB_URL], ENV_DB_URL
    elif store.url is not None:
        url, source = store.url, f"{path} [store] url"
    else:
        url, source = f"sqlite:///{default_sqlite_path(env)}", "default"
    password_file = env.get(ENV_DB_PASSWORD_FILE) or store.password_file
    executor = _executor(data.get("executor", {}), path)
    return Settings(db_url=url, db_url_source=source, db_password_file=password_file,
                    raw_retention_days=store.raw_retention_days,
                    job_energy_retention_days=store.job_energy_retention_days,
                    connect_retries=store.connect_retries,
                    config_path=str(path) if path.is_file() else None,
                    manager=_manager(data.get("manager", {}), env, path),
                    executor=executor,
                    report=_section(ReportSettings, data, "report", path),
                    profiler=_section(ProfilerSettings, data, "profiler", path),
                    power=_power(data.get("power", {}), path, executor.kind == ExecutorKind.SLURM))


def _section(cls: type, data: Mapping[str, Any], name: str, path: Path,
             origins: Mapping[str, str] | None = None, **table: Any) -> Any:
    """``[name]`` of the file checked against ``cls``; ``table`` / ``origins``: values
    that came from elsewhere (the environment) and where."""
    values = {**data.get(name, {}), **table}
    where = origins or {}
    return build(cls, values, section=f"{path}: [{name}]",
                 where=lambda key: where.get(key, f"{path}: [{name}] {key}"))


def _manager(raw: Mapping[str, Any], env: Mapping[str, str], path: Path) -> ManagerSettings:
    """``[manager]`` plus ``ANDREAS_POLICY`` / ``ANDREAS_PERIOD_S`` (environment wins)."""
    table: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if env.get("ANDREAS_POLICY"):
        table["policy"], origins["policy"] = env["ANDREAS_POLICY"], "ANDREAS_POLICY"
    if env.get("ANDREAS_PERIOD_S"):
        try:
            table["period_s"] = float(env["ANDREAS_PERIOD_S"])
        except ValueError:
            raise InputError(f"ANDREAS_PERIOD_S={env['ANDREAS_PERIOD_S']!r}: not a number") \
                from None
        origins["period_s"] = "ANDREAS_PERIOD_S"
    settings = _section(ManagerSettings, {"manager": raw}, "manager", path, origins, **table)
    return with_tariff_file(settings, path) if settings.tariff is not None else settings


def with_tariff_file(settings: ManagerSettings, config: Path) -> ManagerSettings:
    """``settings`` with its ``tariff`` (relative to the directory of the ``config`` file)
    resolved, read and checked: a bad file is one InputError that names the config key,
    the tariff file, the row, the column and the value."""
    assert settings.tariff is not None
    path = Path(settings.tariff)
    path = path if path.is_absolute() else config.parent / path
    try:
        tariff = load_tariff(path)
    except InputError as e:
        raise InputError(f"{config}: [manager] {e}", field="tariff") from None
    return replace(settings, tariff=str(path), tariff_file=tariff)


def _executor(raw: Mapping[str, Any], path: Path) -> ExecutorSettings:
    table = dict(raw)
    slurm_raw = table.pop("slurm", {})
    if not isinstance(slurm_raw, dict):
        raise InputError(f"{path}: [executor] slurm must be a table ([executor.slurm])",
                         field="executor.slurm")
    settings = _section(ExecutorSettings, {"executor": table}, "executor", path)
    settings = replace(settings, slurm=_slurm(slurm_raw, path, settings.kind == ExecutorKind.SLURM))
    check_executor(settings, f"{path}: [executor]")
    return settings


def check_executor(settings: ExecutorSettings, where: str = "[executor]") -> None:
    """Everything a container gets from ``[executor]``, checked once: at load, and again
    by the executor for settings built in code. InputError naming ``where`` and the key."""
    check_network(settings.network, settings.allow_host_network, f"{where} network")
    check_container_user(settings.user, f"{where} user")
    for spec in settings.extra_volumes:
        parse_extra_volume(spec, settings.checkpoint_mount, label=f"{where} extra_volumes",
                           checkpoint_root=settings.checkpoint_root)
    if settings.mps_pipe_dir is not None:      # the MPS daemon's pipes: /tmp or /run
        host_path(settings.mps_pipe_dir, f"{where} mps_pipe_dir",
                  under_ok=("/run", "/var/run"))
    if settings.fake_gpu_dir is not None:
        host_path(settings.fake_gpu_dir, f"{where} fake_gpu_dir")
    for pattern in settings.image_allowlist:
        check_image_pattern(pattern, label=f"{where} image_allowlist")


def _slurm(raw: Mapping[str, Any], path: Path, needed: bool) -> SlurmSettings:
    """``[executor.slurm]``: partition and output directory needed with kind = "slurm";
    names Slurm accepts; no sbatch option andreas sets itself."""
    settings = build(SlurmSettings, raw, section=f"{path}: [executor.slurm]",
                     where=lambda key: f"{path}: [executor.slurm] {key}")
    where = f"{path}: [executor.slurm]"
    if needed and not settings.partition:
        raise InputError(f"{where} partition: needed with [executor] kind = \"slurm\" (the "
                         "partition andreas submits to)", field="executor.slurm.partition")
    if needed and not settings.output_dir:
        raise InputError(f"{where} output_dir: needed with [executor] kind = \"slurm\" (a "
                         "directory the nodes and the manager share)",
                         field="executor.slurm.output_dir")
    for key in ("partition", "account"):
        value = getattr(settings, key)
        if value and not _SLURM_NAME.fullmatch(value):
            raise InputError(f"{where} {key} {value!r}: 1-64 letters, digits, '_', '.', '+' "
                             "or '-'", field=f"executor.slurm.{key}")
    for arg in settings.sbatch_args:
        name = arg.split("=", 1)[0]
        if not arg.startswith("-") or any(c in arg for c in "\n\r\x00"):
            raise InputError(f"{where} sbatch_args {arg!r}: each item is one sbatch option "
                             "(--name=value)", field="executor.slurm.sbatch_args")
        if name in SLURM_OWN_OPTIONS or (name.startswith("-") and not name.startswith("--")
                                         and name[:2] in SLURM_OWN_OPTIONS):
            raise InputError(f"{where} sbatch_args {arg!r}: andreas sets {name} itself"
                             + (" (and never --deadline: Slurm would cancel the job)"
                                if name == "--deadline" else ""),
                             field="executor.slurm.sbatch_args")
    return settings


def _power(raw: Mapping[str, Any], path: Path, slurm: bool = False) -> PowerSettings:
    """``[power]``; when enabled, both commands must be there and parse (not with the Slurm
    executor, which switches nodes through Slurm's power saving)."""
    settings = _section(PowerSettings, {"power": raw}, "power", path)
    for key in ("off_command", "on_command"):
        where = f"{path}: [power] {key}"
        try:
            argv = command_argv(getattr(settings, key))
        except ValueError as e:
            raise InputError(f"{where}: cannot split the command: {e}",
                             field=f"power.{key}") from None
        if settings.enabled and not argv and not slurm:
            raise InputError(f"{where}: needed when [power] enabled = true (e.g. "
                             '["ipmitool", "-H", "{node}-bmc", "chassis", "power", "on"])',
                             field=f"power.{key}")
    return settings


def normal_path(value: Any, label: str) -> str:
    """An absolute path spelled one way: ``//`` and ``/./`` collapsed, no trailing ``/``;
    ``..``, relative paths, NUL and control characters refused (InputError naming
    ``label``). Every host path a container gets is checked in this form."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise InputError(f"{label} {value!r}: must be an absolute path")
    if any(c < " " or c == "\x7f" for c in value):
        raise InputError(f"{label} {value!r}: must not contain control characters")
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InputError(f"{label} {value!r}: must not contain '..'")
    return "/" + "/".join(parts)


def host_path(value: Any, label: str, *, also: tuple[str, ...] = (),
              under_ok: tuple[str, ...] = ()) -> str:
    """:func:`normal_path` of a host path given to containers, refused when it is, lies
    under or holds a sensitive path (:data:`SENSITIVE_HOST_PATHS` and ``also``); lying
    under one of ``under_ok`` is fine (the CUDA MPS pipes in /run), being it is not."""
    path = normal_path(value, label)
    for sensitive in (*SENSITIVE_HOST_PATHS, *(normal_path(a, label) for a in also)):
        inside = path.startswith(sensitive + "/") and sensitive not in under_ok
        if path == "/" or path == sensitive or inside or sensitive.startswith(path + "/"):
            raise InputError(f"{label} {value!r}: {path} must not be given to jobs (it is, "
                             f"holds or lies in {sensitive}: root on the node or another's "
                             "data)")
    return path


def check_container_user(user: Any, label: str) -> str:
    """``uid[:gid]``, numeric, neither 0 (InputError naming ``label`` otherwise)."""
    m = _USER.fullmatch(user) if isinstance(user, str) else None
    if m is None:
        raise InputError(f"{label} {user!r}: must be a numeric uid[:gid] (a name is looked up "
                         "in the image's /etc/passwd, which the image's author writes)")
    if int(m.group(1)) == 0 or (m.group(2) is not None and int(m.group(2)) == 0):
        raise InputError(f"{label} {user!r}: uid or gid 0 is root; jobs never run as root")
    return user


def check_network(network: Any, allow_host: bool, label: str) -> str:
    """A Docker network mode a job may get: ``bridge``, ``none`` or a network's name;
    ``host`` only when allowed; never ``container:<id>`` (another container's
    namespace)."""
    if not isinstance(network, str) or not _NETWORK.fullmatch(network):
        raise InputError(f"{label} {network!r}: must be bridge, none or a network's name "
                         "(never container:<id>: another container's network namespace)")
    if network == "host" and not allow_host:
        raise InputError(f"{label} 'host' needs allow_host_network = true (containers get "
                         "no host network by default)")
    return network


def parse_extra_volume(spec: str, checkpoint_mount: str,
                       label: str = "[executor] extra_volumes", *,
                       checkpoint_root: str | None = None) -> tuple[str, str, str]:
    """``host:container[:ro|rw]`` as (host, container, mode), both paths normalised,
    checked when the config is loaded: the host path is no sensitive path
    (:func:`host_path`; nor the checkpoint root, every job's checkpoints), the container
    path neither ``/`` nor the checkpoint mount."""
    parts = spec.split(":") if isinstance(spec, str) else []
    if len(parts) == 2:
        parts.append("rw")
    if len(parts) != 3 or parts[2] not in ("ro", "rw"):
        raise InputError(f"{label} {spec!r}: not host:container[:ro|rw]")
    root = (checkpoint_root,) if checkpoint_root else ()
    host = host_path(parts[0], f"{label} {spec!r}: the host path", also=root)
    container = normal_path(parts[1], f"{label} {spec!r}: the container path")
    if container == "/":
        raise InputError(f"{label} {spec!r}: the container path must not be /")
    if container == normal_path(checkpoint_mount, "[executor] checkpoint_mount"):
        raise InputError(f"{label} {spec!r}: {container} is the checkpoint mount")
    return host, container, parts[2]


def check_image_pattern(pattern: str, label: str = "[executor] image_allowlist") -> None:
    """An allow-list pattern names its registry host literally: ``*`` in the host
    (``registry.*/ml/*``, ``reg*/x``) could match a registry someone else runs. (``*``
    never crosses ``/`` when matched, so ``train:*`` cannot match ``train:5000/x``.)"""
    first, slash, _ = pattern.partition("/")
    if slash and any(c in first for c in "*?["):
        raise InputError(f"{label} {pattern!r}: the registry host {first!r} must be written "
                         "out (no '*', '?' or '[' before the first '/')")


def read_toml(path: Path, sections: Collection[str]) -> dict[str, Any]:
    """A config file's tables; an unknown section, or a section that is not a table, is a
    one-line error (the keys are checked by :func:`andreas.infra.fields.build`)."""
    text = read_text_capped(path, what="config file", limit=MAX_CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise InputError(f"{path}: not valid TOML: nested too deeply") from None
    for section, value in data.items():
        if section not in sections:
            raise InputError(f"{path}: unknown section [{section}] "
                             f"(known: {', '.join(sorted(sections))})")
        if not isinstance(value, dict):
            raise InputError(f"{path}: '{section}' must be a table ([{section}])")
    return data


def mask_url(url: Any) -> str:
    """The URL with its password replaced by ``***``; safe to print or log.

    Works on strings that are not valid URLs too: whatever stands between the first ':'
    after the scheme and the last '@' is treated as the password. A password given as a
    query parameter (``?password=``, ``passwd``, ``pwd``, as PyMySQL accepts) is masked
    too.
    """
    if not isinstance(url, str):
        try:
            url = url.render_as_string(hide_password=True)
        except AttributeError:
            url = str(url)
    url = _QUERY_SECRET.sub(r"\1***", url)
    if "@" not in url:
        return url
    userinfo, rest = url.rsplit("@", 1)
    scheme_end = userinfo.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    colon = userinfo.find(":", start)
    if colon < 0:
        return url
    return f"{userinfo[:colon]}:***@{rest}"


_QUERY_SECRET = re.compile(r"([?&;](?:password|passwd|pwd|secret|token)=)[^&;#]*", re.I)
