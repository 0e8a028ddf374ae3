"""``andreas-agent --check``: what the agent can see on this node, and whether it can run.

Why it exists: on a freshly installed node the operator's question is "will the agent
work here?". The answer must come from the same code the daemon runs (the GPU and host
samplers through :mod:`agents.check`, the store writer's registration check, the spool's
own state), so it cannot disagree with what the daemon will do. Each finding is a line;
a problem that stops the agent from doing its job is marked ``FAIL`` and makes the
command exit 1 (0 when usable).

It changes nothing: it takes GPU and host baselines, connects to Docker and the database
read-only, and reads the spool without locking it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.config import AgentConfig
from agents.spool import inspect_spool
from andreas.errors import one_line
from andreas.store.faults import describe


@dataclass
class CheckReport:
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)

    def fail(self, line: str) -> None:
        self.lines.append(f"FAIL {line}")
        self.failures.append(line)

    @property
    def usable(self) -> bool:
        return not self.failures

    def text(self) -> str:
        verdict = ("andreas-agent --check: usable" if self.usable else
                   f"andreas-agent --check: NOT usable ({len(self.failures)} problem(s))")
        return "\n".join(self.lines + [verdict]) + "\n"


def run_check(cfg: AgentConfig, *, gpu_sampler: Any = None, host_sampler: Any = None,
              docker_factory: Callable[[str], Any] | None = None) -> CheckReport:
    report = CheckReport()
    report.add(f"Config: {cfg.config_path or 'no file (defaults and environment)'}; "
               f"node {cfg.node_name}; sampling every {cfg.interval_s:g} s")
    inventory = _gpus(cfg, report, gpu_sampler)
    _host(cfg, report, host_sampler, inventory)
    _docker(cfg, report, docker_factory)
    _database(cfg, report, inventory, gpu_sampler)
    _spool(cfg, report)
    return report


def _gpus(cfg: AgentConfig, report: CheckReport, sampler: Any) -> list[Any]:
    from agents.check import gpu_report
    from agents.daemon import Agent

    if sampler is None:
        sampler = Agent(cfg)._make_gpu_sampler()
    for line in gpu_report(sampler):
        report.add(line)
    inventory = list(sampler.inventory)
    sampled = [g for g in inventory if not g.mig_enabled]
    if not sampled:
        report.fail("no GPU can be sampled"
                    + ("" if cfg.fake_gpus else " (a machine without GPUs: --fake-gpus SPEC)"))
    return inventory


def _host(cfg: AgentConfig, report: CheckReport, sampler: Any, inventory: list[Any]) -> None:
    from agents.check import host_report
    from agents.daemon import Agent

    if sampler is None:
        sampler = Agent(cfg)._make_host_sampler(inventory)
    for line in host_report(sampler):
        report.add(line)


def _docker(cfg: AgentConfig, report: CheckReport,
            factory: Callable[[str], Any] | None) -> None:
    if not cfg.docker_url:
        report.add("Docker: not followed ([agent] docker_url is empty): no epochs, no job "
                   "energy")
        return
    from andreas.job import LABEL_JOB

    try:
        if factory is None:
            from agents.daemon import _docker_client as factory
        assert factory is not None
        client = factory(cfg.docker_url)
        version = client.version().get("Version", "?")
        running = client.containers.list(filters={"label": LABEL_JOB, "status": "running"})
        report.add(f"Docker: reachable at {cfg.docker_url} (Engine {version}); "
                   f"{len(running)} andreas container(s) running")
        client.close()
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        report.fail(f"Docker: not reachable at {cfg.docker_url}: {one_line(describe(e))} (is the "
                    "agent user in the docker group?)")


def _database(cfg: AgentConfig, report: CheckReport, inventory: list[Any],
              gpu_sampler: Any) -> None:
    from agents.daemon import node_gpu_type
    from andreas.store.registry import NodeSpec, RegistrationRefused, agent_engine, register
    from andreas.store.engine import connect, is_sqlite, parse_url
    from andreas.store.migrate import SchemaState, status

    shown = cfg.db_url_masked
    try:
        engine = agent_engine(cfg.db_url, cfg.db_password_file)
    except Exception as e:  # noqa: BLE001
        report.fail(f"Database: {one_line(describe(e))}")
        return
    try:
        connect(engine)
        st = status(engine)
        if st.state is not SchemaState.HEAD:
            report.fail(f"Database: {st.describe()}")
            return
        report.add(f"Database: {shown} reachable; schema at revision {st.revision} (head)")
        self_register = cfg.self_register
        if self_register is None:
            self_register = is_sqlite(parse_url(cfg.db_url))
        spec = NodeSpec(name=cfg.node_name, docker_endpoint=cfg.registered_docker_endpoint,
                        gpu_type=node_gpu_type([g.model for g in inventory]),
                        gpus=tuple(inventory))
        with engine.connect() as conn:
            try:
                reg = register(conn, spec, write=False)
                report.add(f"  node {cfg.node_name} registered (node id {reg.node_id}, "
                           f"{len(reg.gpu_ids)} GPU(s) by UUID)")
            except RegistrationRefused as e:
                if self_register:
                    report.add(f"  node {cfg.node_name}: not registered yet or changed; the "
                               "agent registers it at start")
                else:
                    report.fail(f"Database: {e}")
            conn.rollback()
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        text = one_line(describe(e))
        where = "" if shown.split("?")[0] in text else f"{shown}: "
        report.fail(f"Database: {where}{text} (records are spooled while it cannot be used)")
    finally:
        engine.dispose()


def _not_writable(directory: Path) -> str | None:
    """Why the agent could not write its spool there, found by writing: os.access says
    yes to root on a read-only file system, and to a path that is not a directory."""
    if not directory.is_dir():
        return "not a directory"
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".andreas-check-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def _spool(cfg: AgentConfig, report: CheckReport) -> None:
    path = Path(cfg.spool_dir)
    state = inspect_spool(path, cfg.spool_max_bytes)
    line = "Spool: " + state.describe()
    probe = path if path.exists() else next((p for p in path.parents if p.exists()), path)
    problem = _not_writable(probe)
    if problem:
        report.fail(f"{line}; NOT writable by this user ({probe}: {problem})")
    elif state.full:
        report.fail(line)
    else:
        report.add(line)
