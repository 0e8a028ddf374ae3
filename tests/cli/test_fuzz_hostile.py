"""The second round of hostile input (issue 32, points 9-13), beside ``test_fuzz_cli.py``:
every count and duration bounded, special files refused wherever a file is read, large
inputs refused with the limit named, names from documents never paths, values only in
their one spelling, the agent's spool and the store's JSON read defensively.

Each class of problem is held at its one owner, and the tests walk the class where they
can (every numeric option of both commands; every reader of a user's file) rather than
only the cases the issue lists, which are all here as well.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agents.cli import main as agent_main
from andreas.cli import main
from andreas.infra.numbers import Finite, Whole

from .test_fuzz_cli import NOW, TRACE, db, dump, flat, invoke, refused, write  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 60                                        # a hang detector, not a timing assertion
TARIFF = "hour_of_day,price_per_kwh\n" + "".join(f"{h},0.1\n" for h in range(24))


def numeric_options() -> list[tuple[tuple[str, ...], click.Parameter]]:
    """(command path, parameter) of every int or float option of both commands."""
    out = []

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):        # commands load on first use (cli/root.py)
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, path + (name,)
                walk(sub, (*path, name))
            return
        for p in cmd.params:
            if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType)):
                out.append((path, p))
    walk(main, ("andreas",))
    walk(agent_main, ("andreas-agent",))
    return out


NUMERIC = numeric_options()


def test_every_numeric_option_is_a_plain_bounded_number():
    """`--workers 1000000` forked 1 400 processes; `--ga-generations 1e9`, `--seeds 1e6`,
    `--wake-s 1e308` and `--interval-s 1e9` hung; click's int() and float() read `1_0`
    and Unicode digits. Every numeric option is now a Finite or a Whole with a bound."""
    loose = [(" ".join(path), p.opts[0], type(p.type).__name__, getattr(p.type, "max", None))
             for path, p in NUMERIC
             if not isinstance(p.type, (Finite, Whole)) or p.type.max is None
             or not math.isfinite(p.type.max)]
    assert loose == [] and len(NUMERIC) > 30


@pytest.mark.parametrize("path, param", NUMERIC,
                         ids=[f"{' '.join(p[1:])}{o.opts[0]}" for p, o in NUMERIC])
@pytest.mark.parametrize("value", ["1_0", "\u0661\u0662", "1e999", "nan", "9" * 400])
def test_no_numeric_option_takes_an_odd_spelling_or_a_huge_value(path, param, value):
    with pytest.raises(click.BadParameter):
        param.type.convert(value, param, None)


@pytest.mark.parametrize("args, option", [
    (["simulate", "--workers", "1000000"], "--workers"),
    (["simulate", "--ga-generations", "1000000000"], "--ga-generations"),
    (["simulate", "--ga-generations", "1e9"], "--ga-generations"),
    (["simulate", "--ga-population", "1000000000"], "--ga-population"),
    (["simulate", "--sweep", "--seeds", "1000000"], "--seeds"),
    (["simulate", "--power-off-idle", "--wake-s", "1e308"], "--wake-s"),
    (["simulate", "--power-off-idle", "--power-idle-s", "1e308"], "--power-idle-s"),
    (["simulate", "--period-s", "1e308"], "--period-s"),
    (["simulate", "--restart-overhead-s", "1e300"], "--restart-overhead-s"),
    (["db", "retention", "--keep-days", "1e308"], "--keep-days"),
    (["db", "retention", "--keep-days", "1e5"], "--keep-days"),
    (["manager", "run", "--dry-run", "--once", "--period-s", "1e300"], "--period-s"),
    (["manager", "run", "--dry-run", "--once", "--metrics-port", "1_0"], "--metrics-port"),
    (["costs", "--window-h", "1e300"], "--window-h"),
    (["logs", "x", "--tail", "99999999999"], "--tail"),
    (["optimize", "x.json", "--time-limit-s", "1e300"], "--time-limit-s"),
    (["trace", "generate", "--nodes", "2", "--out", "t.json", "--seed", "1_0"], "--seed"),
])
def test_the_issues_counts_and_durations_are_refused_before_any_work(db, args, option):
    before = dump(db)
    r = invoke(db, *args)
    refused(r, option)
    assert dump(db) == before


# ------------------------------------------------------------------ special and big files
def _fifo(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    os.mkfifo(path)
    return str(path)


def _cli(*args: str, env: dict[str, str], cwd: Path | None = None,
         exe: str = "andreas") -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **{k: v for k, v in env.items() if not k.startswith("_")},
               "PYTHONPATH": str(ROOT)}
    module = "andreas" if exe == "andreas" else "agents.cli"
    return subprocess.run([sys.executable, "-m", module, *args], env=environ, cwd=cwd,
                          capture_output=True, text=True, timeout=HANG_S)


def _guarded(fn, fifo: str | None):
    """``fn()`` in a thread; a hang (the open of a FIFO blocks until a writer comes) is
    released by opening the FIFO's other end, and fails the test."""
    import threading

    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn()), daemon=True)
    t.start()
    t.join(HANG_S)
    if t.is_alive():
        if fifo is not None:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        t.join(10)
        pytest.fail("hung on a special file")
    return out["r"]


READERS = ["pods", "nodes", "tariff", "config tariff", "snapshot", "password file",
           "job file", "trace", "env file"]


def _reader_args(reader: str, path: str, tmp_path: Path, env: dict[str, str]) -> list[str]:
    data = ROOT / "tests" / "data" / "alibaba"
    pods, nodes = str(data / "openb_pod_list_excerpt.csv"), str(data / "openb_node_list_excerpt.csv")
    out = str(tmp_path / "out.json")
    if reader == "pods":
        return ["trace", "import-alibaba", "--pods", path, "--nodes", nodes, "--out", out]
    if reader == "nodes":
        return ["trace", "import-alibaba", "--pods", pods, "--nodes", path, "--out", out]
    if reader == "tariff":
        return ["simulate", "--trace", write(tmp_path, "t.json", TRACE), "--tariff", path,
                "--policies", "fifo", "--quiet", "--no-plots", "--out", str(tmp_path / "o")]
    if reader == "config tariff":
        env["ANDREAS_CONFIG"] = write(tmp_path, "andreas.toml",
                                      f"[manager]\ntariff = '{path}'\n")
        return ["queue"]
    if reader == "password file":
        env.update(ANDREAS_DB_URL="mysql+pymysql://andreas@127.0.0.1:9/andreas",
                   ANDREAS_DB_PASSWORD_FILE=path)
        return ["queue"]
    return {"snapshot": ["optimize", path], "job file": ["submit", path],
            "trace": ["trace", "show", path]}[reader]


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_is_refused_wherever_a_file_is_read(db, tmp_path, reader):
    """A FIFO given as pods, tariff, config tariff, password file or env file hung for
    ever (the open blocks until a writer comes). Every reader goes through
    infra/fileio.open_capped: a regular file, or one line."""
    fifo = _fifo(tmp_path, "special")
    if reader == "env file":
        config = agent_config(tmp_path, db["ANDREAS_DB_URL"])
        r = _guarded(lambda: CliRunner().invoke(agent_main, ["--config", config, "--check",
                                                             "--env-file", fifo]), fifo)
        assert r.exit_code == 2 and "not a regular file" in r.output, r.output
        return
    env = dict(db)
    args = _reader_args(reader, fifo, tmp_path, env)
    before = dump(db)
    r = _guarded(lambda: invoke(env, *args), fifo)
    last = refused(r)
    if reader == "job file":        # a path that is no regular file is an image's name
        assert "--epochs is required" in last, last
    else:
        assert "not a regular file" in last, last
    assert dump(db) == before


DEV_ZERO_READERS = """
import json, sys
from andreas.errors import InputError
from andreas.simulator.alibaba import import_alibaba
from andreas.formats.snapshot import load_snapshot
from andreas.formats.tariff import load_tariff
from andreas.formats.trace import load_trace
from andreas.store.engine import read_password_file
from agents.config import read_env_file
pods, nodes, z = sys.argv[1], sys.argv[2], "/dev/zero"
readers = {"pods": lambda: import_alibaba(z, nodes), "nodes": lambda: import_alibaba(pods, z),
           "tariff": lambda: load_tariff(z), "snapshot": lambda: load_snapshot(z),
           "trace": lambda: load_trace(z), "password file": lambda: read_password_file(z),
           "env file": lambda: read_env_file(z)}
out = {}
for name, read in readers.items():
    try:
        read()
        out[name] = "read"
    except InputError as e:
        out[name] = str(e)
print(json.dumps(out))
"""


def test_dev_zero_is_refused_by_every_reader(tmp_path):
    """/dev/zero as a pod list ended in a MemoryError traceback. Run apart, under a memory
    limit, so a reader that streams it for ever fails here instead of taking the machine's
    memory."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    data = ROOT / "tests" / "data" / "alibaba"
    p = subprocess.run([sys.executable, "-c", DEV_ZERO_READERS,
                        str(data / "openb_pod_list_excerpt.csv"),
                        str(data / "openb_node_list_excerpt.csv")],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=HANG_S, preexec_fn=limit)
    assert p.returncode == 0, p.stderr[-2000:]
    verdicts = json.loads(p.stdout)
    assert {k: "not a regular file" in v for k, v in verdicts.items()} == dict.fromkeys(
        verdicts, True), verdicts


def test_a_pod_list_too_large_is_refused_with_the_limit(tmp_path):
    """A 50 MB pod list hung past a minute: the limit is named, nothing is read."""
    big = tmp_path / "pods.csv"
    with big.open("wb") as f:
        f.truncate(50 << 20)                     # sparse: 50 MB that cost nothing
    nodes = ROOT / "tests" / "data" / "alibaba" / "openb_node_list_excerpt.csv"
    r = CliRunner().invoke(main, ["trace", "import-alibaba", "--pods", str(big), "--nodes",
                                  str(nodes), "--out", str(tmp_path / "o.json")])
    assert r.exit_code == 2, r.output
    assert "50 MiB, larger than 8 MiB" in r.output and not (tmp_path / "o.json").exists()


# ------------------------------------------------------------------ values
@pytest.mark.parametrize("price", ["1_0", "\u0661\u0662", "nan", "inf", "0x1", "1e999",
                                   "\uff11", " ", "+-1"])
def test_tariff_prices_are_plain_decimals(tmp_path, price):
    from andreas.errors import InputError
    from andreas.formats.tariff import load_tariff

    text = TARIFF.replace("\n5,0.1\n", f"\n5,{price}\n")
    path = tmp_path / "tariff.csv"
    path.write_text(text)
    with pytest.raises(InputError, match="row 7 column price_per_kwh"):
        load_tariff(path)


@pytest.mark.parametrize("hour", ["1_0", "\u0661", "٣", "+ 3", "3.0"])
def test_tariff_hours_are_plain_digits(tmp_path, hour):
    from andreas.errors import InputError
    from andreas.formats.tariff import parse_tariff

    with pytest.raises(InputError, match="column hour_of_day"):
        parse_tariff(TARIFF.replace("\n3,0.1\n", f"\n{hour},0.1\n"))


def test_reading_a_tariff_through_a_symlink_never_echoes_the_file(tmp_path):
    """A tariff symlinked to /etc/shadow printed the file's first line in the error."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$y$j9T$secrethash:19000:0:99999:7:::\ndaemon:*:19000::::::\n")
    link = tmp_path / "tariff.csv"
    link.symlink_to(secret)
    config = write(tmp_path, "andreas.toml", f"[manager]\ntariff = '{link}'\n")
    for r in (CliRunner().invoke(main, ["queue"], env={"ANDREAS_CONFIG": config}),
              CliRunner().invoke(main, ["simulate", "--trace", write(tmp_path, "t.json", TRACE),
                                        "--tariff", str(link), "--quiet", "--no-plots"])):
        assert r.exit_code == 2, r.output
        assert "secrethash" not in r.output and "root:" not in r.output
        assert "not a tariff file" in r.output


@pytest.mark.parametrize("target", ["/proc", "/proc/andreas-report.csv", "DIR",
                                    "/sys/kernel/x.csv", "MISSING/r.csv"])
def test_report_output_that_cannot_be_a_file_exits_2(db, tmp_path, target):
    """`report -o /proc` or a directory exited 0 (on an empty window nothing was written
    and nothing said)."""
    target = (target.replace("DIR", str(tmp_path)).replace("MISSING", str(tmp_path / "no")))
    r = invoke(db, "report", "--format", "csv", "-o", target)
    refused(r, "--output")


def test_db_retention_keep_days_huge_is_one_line(db):
    r = invoke(db, "db", "retention", "--keep-days", "1e308")
    refused(r, "--keep-days")


# ------------------------------------------------------------------ names are not paths
@pytest.mark.parametrize("name", ["../escaped", "../../escaped", "ABSOLUTE",
                                  "..", ".", "a/../../b", "-rf", "x\ny", ""])
def test_a_traces_name_never_makes_simulate_write_outside_out(db, tmp_path, monkeypatch,
                                                              name):
    """A trace named `../x` or with an absolute path made `simulate --out` (by default
    out/simulate/NAME) write outside out/."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    name = name.replace("ABSOLUTE", str(tmp_path / "abs-escape"))
    trace = {**TRACE, "name": name}
    tfile = write(tmp_path, "trace.json", trace)
    r = invoke(db, "simulate", "--trace", tfile, "--policies", "fifo", "--quiet",
               "--no-plots")
    assert r.exit_code in (0, 2), r.output
    if r.exit_code == 2:                     # an empty name may be refused by the format
        refused(r, "name")
        return
    written = {p.relative_to(work) for p in work.rglob("*") if p.is_file()}
    assert written and all(str(p).startswith("out/simulate/") for p in written), written
    assert all(len(p.parts) == 4 for p in written), written      # out/simulate/NAME/file
    assert not (tmp_path / "abs-escape").exists()
    assert not (tmp_path / "escaped").exists()


# ------------------------------------------------------------------ the agent
AGENT_GOOD = {"node_name": "hostile-node", "docker_url": "", "interval_s": 0.2}


def agent_config(tmp_path: Path, url: str, **agent: object) -> str:
    values = {**AGENT_GOOD, **agent}
    store = values.pop("store", {})
    spool = values.pop("spool", {"path": str(tmp_path / "spool")})
    delivery = values.pop("delivery", {})

    def table(name, d):
        return f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in d.items())
    return write(tmp_path, "agent.toml",
                 table("agent", values) + table("store", {"url": url, **store})
                 + table("spool", spool) + table("delivery", delivery))


@pytest.mark.parametrize("key, value, message", [
    ("interval_s", 1e-300, "interval_s must be >= 0.05"),
    ("interval_s", 1e300, "interval_s must be <= 60"),
    ("interval_s", 1e9, "interval_s must be <= 60"),
    ("heartbeat_s", 1e-300, "heartbeat_s must be >= 0.05"),
    ("heartbeat_s", 1e300, "heartbeat_s must be <= 3600"),
    ("job_energy_window_s", 1e300, "job_energy_window_s must be <= 3600"),
    ("fence_after_s", 1e300, "fence_after_s must be <= 86400"),
    ("docker_url", "tcp://10.0.0.1:2375", "unix:// socket"),
    ("docker_url", "http://10.0.0.1:2375", "unix:// socket"),
    ("spool", {"path": "relative/spool"}, "must be an absolute path"),
    ("spool", {"path": "/proc/andreas-spool"}, "not a place for a spool"),
    ("spool", {"path": "/sys/fs/x"}, "not a place for a spool"),
    ("spool", {"path": "/"}, "not a place for a spool"),
    ("spool", {"path": "/var/lib/../spool"}, "must not contain '..'"),
    ("delivery", {"batch_rows": 10**12}, "batch_rows must be <= 100000"),
    ("delivery", {"batch_s": 1e300}, "batch_s must be <= 3600"),
    ("delivery", {"shutdown_s": 1e300}, "shutdown_s must be <= 3600"),
])
def test_agent_settings_out_of_bounds_are_one_line_exit_2(db, tmp_path, key, value, message):
    config = agent_config(tmp_path, db["ANDREAS_DB_URL"], **{key: value})
    r = CliRunner().invoke(agent_main, ["--config", config, "--once", "--fake-gpus", "1xV100"],
                           env={"ANDREAS_DB_URL": None})
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and message in r.output, r.output


@pytest.mark.parametrize("option, value", [("--interval-s", "1e9"), ("--interval-s", "1e-300"),
                                           ("--interval-s", "1_0"), ("--interval-s", "nan"),
                                           ("--metrics-port", "99999999")])
def test_agent_options_out_of_bounds_exit_2(db, tmp_path, option, value):
    """`andreas-agent --once --interval-s 1e9` waited 1e9 s."""
    config = agent_config(tmp_path, db["ANDREAS_DB_URL"])
    r = CliRunner().invoke(agent_main, ["--config", config, "--once", "--fake-gpus", "1xV100",
                                        option, value])
    assert r.exit_code == 2 and option in r.output, r.output


@pytest.mark.slow
def test_agent_once_with_a_fifo_segment_returns_and_honours_sigterm(db, tmp_path):
    """A FIFO named like a spool segment hung `--once`, which then ignored SIGTERM. Now
    the FIFO is set aside, and SIGTERM stops `--once` at once."""
    spool = tmp_path / "spool"
    spool.mkdir()
    os.mkfifo(spool / "seg-00000000000000000001.jsonl")
    config = agent_config(tmp_path, db["ANDREAS_DB_URL"], interval_s=0.2)
    p = _cli("--config", config, "--once", "--fake-gpus", "1xV100", env=db,
             exe="andreas-agent")
    assert p.returncode == 0, p.stderr
    assert "not a regular file" in p.stderr and "Traceback" not in p.stderr
    slow = agent_config(tmp_path, db["ANDREAS_DB_URL"], interval_s=30.0,
                        min_energy_interval_s=30.0)
    environ = {**os.environ, **{k: v for k, v in db.items() if not k.startswith("_")},
               "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "agents.cli", "--config", slow, "--once",
                             "--fake-gpus", "1xV100"], env=environ, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + HANG_S
        line = ""
        while "running on node" not in line:
            line = proc.stderr.readline()
            assert line and time.monotonic() < deadline, "the agent did not start"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=20)
    finally:
        proc.kill()
    assert rc in (0, 128 + signal.SIGTERM)


def test_a_wall_clock_jump_is_said_loudly(caplog):
    """A wall-clock jump stamped samples a day in the future without a warning."""
    from agents.config import AgentConfig
    from agents.daemon import Agent

    clock = {"mono": 100.0, "wall": 1.7e9}
    agent = Agent(AgentConfig(node_name="n", db_url="sqlite://"),
                  mono=lambda: clock["mono"], wall=lambda: clock["wall"])
    with caplog.at_level(logging.WARNING, logger="agents"):
        agent._check_clock(clock["mono"], clock["wall"])
        clock["mono"] += 1.0
        clock["wall"] += 1.0
        agent._check_clock(clock["mono"], clock["wall"])
        assert agent.stats.clock_jumps == 0 and "jumped" not in caplog.text
        clock["mono"] += 1.0
        clock["wall"] += 86401.0
        agent._check_clock(clock["mono"], clock["wall"])
    assert agent.stats.clock_jumps == 1 and "jumped by +86400 s" in caplog.text


# ------------------------------------------------------------------ the store's JSON
@pytest.mark.parametrize("table, column, value", [
    ("jobs", "command", "not json"), ("jobs", "command", '{"a": 1}'),
    ("jobs", "command", "[" * 100_000), ("jobs", "env", "[1, 2]"), ("jobs", "env", "{"),
    ("job_attempts", "gpu_ids", "not json"), ("job_attempts", "gpu_ids", '["x"]'),
    ("decisions", "plan", "not json"), ("decisions", "plan", "[]"),
])
def test_a_non_json_row_crashes_neither_queue_show_nor_the_manager(tmp_path, table, column,
                                                                   value):
    """A non-JSON row in SQLite's jobs.command, job_attempts.gpu_ids or decisions.plan
    crashed the manager, `queue` and `show`; plans are meant to be read tolerantly."""
    path = tmp_path / "a.db"
    env = {"ANDREAS_DB_URL": f"sqlite:///{path}", "ANDREAS_CONFIG": "", "_PATH": str(path)}
    assert invoke(env, "db", "upgrade").exit_code == 0
    assert invoke(env, "submit", "reg.example/t:1", *flat({"--epochs": "3", "--due": "+2h",
                                                           "--weight": "1"}),
                  "--name", "j1").exit_code == 0
    assert invoke(env, "manager", "run", "--dry-run", "--once").exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO nodes (name, docker_endpoint, gpu_type, gpu_count, state) "
                     "VALUES ('n1', 'ssh://n1', 'V100', 1, 'down')")
        conn.execute("INSERT INTO job_attempts (job_id, attempt, node_id, gpu_ids, start_s, "
                     "end_s, profiling) VALUES ('j1', 1, 1, '[0]', 1, 2, 0)")
        conn.execute(f"UPDATE {table} SET {column} = ?", (value,))
    for args in (["queue"], ["queue", "--all", "--json"], ["show", "j1"],
                 ["manager", "run", "--dry-run", "--once"]):
        r = invoke(env, *args)
        assert r.exit_code == 0 and r.exception is None, (args, r.output)
        assert "Traceback" not in r.output
