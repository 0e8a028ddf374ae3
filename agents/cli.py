"""``andreas-agent``: the node agent's command (a systemd service in production).

    andreas-agent [--config /etc/andreas/agent.toml] [--env-file FILE] [--fake-gpus 2xV100]
                  [--interval-s 1] [--metrics-port 9464] [--check | --once | --register]

Exit codes: 0 done (a daemon stopped by SIGTERM/SIGINT after flushing everything; a
``--check`` that found the agent usable), 1 the agent cannot work here (no NVML, the
spool locked by another agent, a ``--check`` with problems), 2 bad configuration. Every
error is one line; passwords never appear (URLs are masked).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import ModuleType
from typing import Any, cast

import click

from agents.config import (LOG_LEVELS, MAX_SAMPLE_PERIOD_S, MIN_PERIOD_S, load_config,
                           read_env_file)
from andreas.infra.numbers import Finite, Whole
from andreas.errors import AndreasError, InputError, one_line, options

EXIT_FAILED = 1
EXIT_CONFIG = 2
log = logging.getLogger("agents")


class Stopped(BaseException):
    """SIGTERM / SIGINT where waiting for the current call is not wanted (``--once``, or a
    second signal): raised from the handler, so even a blocking call is left (a handler
    that only sets a flag lets Python retry the call, PEP 475). Exit 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _error(message: str, code: int) -> None:
    click.echo(f"andreas-agent: error: {one_line(message)}", err=True)
    sys.exit(code)


def _setup_logging(level: str) -> None:
    """To stderr, with timestamps (journald adds its own, but a terminal, a file or
    `docker logs` do not), as the manager's lines."""
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Agent config file (default /etc/andreas/agent.toml when present).")
@click.option("--env-file", type=click.Path(dir_okay=False),
              help="Read KEY=VALUE lines (the service's EnvironmentFile) before the config, "
                   "e.g. for --check as the operator.")
@click.option("--fake-gpus", metavar="SPEC",
              help="Simulated GPUs instead of NVML, e.g. 2xV100 or 8xT4,2xV100 (machines "
                   "without GPUs: CI, laptops). Never chosen automatically.")
@click.option("--interval-s", type=Finite(min=MIN_PERIOD_S, max=MAX_SAMPLE_PERIOD_S),
              help="Sampling interval in seconds (default 1).")
@click.option("--metrics-port", type=Whole(max=2**31 - 1), metavar="PORT",
              help="Serve Prometheus metrics at http://127.0.0.1:PORT/metrics (address: "
                   "[agent] metrics_address); default: [agent] metrics_port, else none.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), help="Default: the config's, info.")
@click.option("--check", "check", is_flag=True,
              help="Print what the agent can see (GPUs, energy counters, RAPL or model, "
                   "Docker, database and schema, spool), then exit 0 if usable, else 1.")
@click.option("--once", is_flag=True,
              help="Take one interval of samples, deliver them, and exit.")
@click.option("--register", is_flag=True,
              help="Register this node and its GPUs in the store (run with the manager's "
                   "database account) and exit.")
def main(config_path: str | None, env_file: str | None, fake_gpus: str | None,
         interval_s: float | None, metrics_port: int | None, log_level: str | None,
         check: bool, once: bool, register: bool) -> None:
    """The andreas node agent: samples GPUs (NVML) and the host, follows the node's
    andreas containers, attributes energy to jobs, and writes it all to the store,
    spooling locally while the database is unreachable."""
    if sum((check, once, register)) > 1:
        _error("--check, --once and --register exclude each other", EXIT_CONFIG)
    try:
        environ: dict[str, str] | None = None
        if env_file:
            environ = {**os.environ, **read_env_file(env_file)}
        with options(fake_gpus="--fake-gpus", interval_s="--interval-s",
                     log_level="--log-level", metrics_port="--metrics-port"):
            cfg = load_config(config_path, environ=environ,
                              overrides={"fake_gpus": fake_gpus, "interval_s": interval_s,
                                         "log_level": log_level,
                                         "metrics_port": metrics_port})
    except AndreasError as e:
        _error(str(e), EXIT_CONFIG)
    _setup_logging(cfg.log_level if not check else "error")
    try:
        if check:
            from agents.diagnose import run_check

            report = run_check(cfg)
            click.echo(report.text(), nl=False)
            sys.exit(0 if report.usable else EXIT_FAILED)
        if register:
            sys.exit(_register(cfg))
        sys.exit(_run(cfg, once=once))
    except Stopped as e:
        click.echo(f"andreas-agent: stopped by {signal.Signals(e.signum).name}", err=True)
        sys.exit(128 + e.signum)
    except InputError as e:
        _error(str(e), EXIT_CONFIG)
    except AndreasError as e:
        _error(str(e), EXIT_FAILED)


def _register(cfg: Any) -> int:
    from agents.daemon import Agent
    from agents.store_writer import StoreWriter
    from andreas.store.registry import agent_engine

    agent = Agent(cfg)
    sampler = agent._make_gpu_sampler()
    sampler.start()
    agent.gpus = sampler
    agent._refresh_spec()
    writer = StoreWriter(agent_engine(cfg.db_url, cfg.db_password_file), spec=agent.node_spec,
                         self_register=True)
    try:
        reg = writer.ensure_registered()
    except Exception as e:  # noqa: BLE001 - one line for the operator
        _error(f"registration in {cfg.db_url_masked} failed: {e}{_register_hint(e)}",
               EXIT_FAILED)
    finally:
        writer.close()
        sampler.close()
    what = "; ".join(reg.changed) if reg.changed else "already registered, nothing changed"
    click.echo(f"node {cfg.node_name} (id {reg.node_id}) with {len(reg.gpu_ids)} GPU(s) in "
               f"{cfg.db_url_masked}: {what}")
    return 0


def _register_hint(e: BaseException) -> str:
    """What to do when the account may not write the inventory (the agent's own)."""
    from andreas.store.engine import error_code

    if error_code(e.__cause__ or e) not in (1142, 1143, 1044, 1227, 1370):
        return ""
    return ("; this account may not write the node inventory (the agent's account never "
            "may): run --register once with the manager's account, e.g. ANDREAS_DB_URL="
            "'mysql+pymysql://andreas_manager@DBHOST/andreas' ANDREAS_DB_PASSWORD_FILE="
            "/etc/andreas/manager-db-password andreas-agent --config ... --register")


def _modules() -> dict[str, ModuleType | None]:
    """``sys.modules``, where a None entry is the import system's own mark of a module
    absent (``import`` then raises ImportError); typeshed types it without None."""
    return cast("dict[str, ModuleType | None]", sys.modules)


def without_ssh_transport(docker_url: str) -> None:
    """The agent follows its own engine (unix:// or tcp://); the Docker SDK would import
    paramiko and cryptography for ssh:// support it never uses: about 19 MB of resident
    memory on every GPU node. Marking paramiko absent makes the SDK skip that transport."""
    if not docker_url.startswith("ssh://") and "paramiko" not in sys.modules:
        _modules()["paramiko"] = None


def without_charset_detection() -> None:
    """requests (under the Docker SDK) imports a character-set detector (charset_normalizer
    or chardet) to guess the encoding of a text response that declares none: about 2 MB of
    resident memory for something the agent never asks. The Docker API answers
    JSON (requests decodes it without a detector) and its streams are read as bytes; an
    undeclared text body decodes as UTF-8 (requests' own fallback without a detector).
    Marking both absent skips them; requests' warning that none is installed is silenced."""
    import warnings

    for name in ("charset_normalizer", "chardet"):
        if name not in sys.modules:
            _modules()[name] = None
    warnings.filterwarnings("ignore", message="Unable to find acceptable character detection")


def lean_docker_sdk(docker_url: str) -> None:
    """Before the Docker SDK (and PyMySQL) is imported: leave out what it would load and
    the agent never uses (see the functions above and below)."""
    without_ssh_transport(docker_url)
    without_charset_detection()
    lazy_pymysql_crypto()


def lazy_pymysql_crypto() -> None:
    """PyMySQL without cryptography until an RSA password exchange needs it (about 9 MB
    of resident memory on a node that also has andreas[manager]): the store's one place
    that imports the driver so, :func:`andreas.store.quick.import_pymysql`."""
    from andreas.store.quick import import_pymysql

    import_pymysql()


def _run(cfg: Any, *, once: bool) -> int:
    lean_docker_sdk(cfg.docker_url)
    from agents.daemon import Agent
    from agents.gpu import NvmlUnavailable

    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if once or stop.is_set():     # --once, or a second signal: now, even mid-call
            raise Stopped(signum)
        log.info("%s received: stopping (flushing what is queued)",
                 signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent = Agent(cfg)
    metrics = None
    try:
        agent.start()
        if cfg.metrics_port is not None:
            from agents.exporter import agent_collector
            from andreas.metrics import serve

            metrics = serve([agent_collector(agent)], address=cfg.metrics_address,
                            port=cfg.metrics_port)
    except NvmlUnavailable as e:
        agent.close()
        _error(f"{e}; on a machine without NVIDIA GPUs run with --fake-gpus SPEC",
               EXIT_FAILED)
    except BaseException:
        agent.close()
        raise
    log.info("andreas-agent running on node %s (interval %g s)", cfg.node_name,
             cfg.interval_s)
    try:
        if once:
            agent.run(stop, ticks=1)                  # baselines
            stop.wait(max(cfg.interval_s, cfg.min_energy_interval_s) + 0.05)
            agent.run(stop, ticks=1)                  # one interval of samples
        else:
            agent.run(stop)
    finally:
        if metrics is not None:
            metrics.close()
        agent.close()
    log.info("andreas-agent stopped")
    return 0


if __name__ == "__main__":   # pragma: no cover
    main()
