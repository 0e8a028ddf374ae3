"""``andreas-agent`` end to end on SQLite with fake GPUs: the daemon samples, delivers,
and on SIGTERM flushes everything and exits 0; ``--check``, ``--once``, ``--register``;
one-line errors (exit 2 for bad configuration) that never show a password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from click.testing import CliRunner

import pytest

from agents.cli import main
from andreas.profiles import load_profiles
from andreas.store.engine import make_engine
from andreas.store.migrate import head_revision

from .helpers_agent import sqlite_store

ROOT = Path(__file__).resolve().parents[2]
AGENT = [sys.executable, "-c", "from agents.cli import main; main()"]
SECRET = "Hush-Hush-77"


def config(tmp_path: Path, url: str, name: str = "agent.toml", **agent: object) -> Path:
    values = {"node_name": "e2e-node", "docker_url": "", "interval_s": 0.2,
              "min_energy_interval_s": 0.2, "heartbeat_s": 0.5, "job_energy_window_s": 1.0}
    values.update(agent)
    lines = ["[agent]"] + [f"{k} = {v!r}".replace("'", '"') for k, v in values.items()]
    lines += ["[store]", f'url = "{url}"', "[spool]", f'path = "{tmp_path / "spool"}"',
              'max_size = "8MiB"', "[delivery]", "batch_s = 0.2"]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("ANDREAS_")}
    out["PYTHONPATH"] = str(ROOT)
    return out


def query(url: str, sql: str):
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).all()
    finally:
        engine.dispose()


@pytest.mark.slow
def test_daemon_samples_fake_gpus_and_flushes_everything_on_sigterm(tmp_path):
    url = sqlite_store(tmp_path)
    cfg = config(tmp_path, url)
    proc = subprocess.Popen(AGENT + ["--config", str(cfg), "--fake-gpus", "2xV100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        counts = query(url, "SELECT COUNT(*) FROM power_samples GROUP BY gpu_id") \
            if query(url, "SELECT COUNT(*) FROM gpus") != [(0,)] else []
        if len(counts) == 2 and min(n for (n,) in counts) >= 8:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "FAKE GPUs (2xV100)" in err and "SIGTERM received" in err
    written = int(err.split("delivery: ")[1].split(" written")[0])
    power = query(url, "SELECT gpu_id, COUNT(*), SUM(energy_mj), MIN(energy_source), "
                       "MIN(power_source) FROM power_samples GROUP BY gpu_id")
    hosts = query(url, "SELECT COUNT(*), MIN(power_source), MAX(agent_rss_mib) FROM host_samples")
    assert len(power) == 2 and all(n >= 8 for _, n, *_ in power)
    assert {(p[3], p[4]) for p in power} == {("counter", "instant")}
    idle_w = load_profiles().gpus["V100"].idle_w
    for _, n, energy, *_ in power:                 # idle: about idle_w for 0.2 s each
        assert 0.5 < energy / n / 1000 / 0.2 / idle_w < 2.0
    assert hosts[0][0] >= 8 and hosts[0][1] in ("rapl", "model") and hosts[0][2] > 10
    assert written == sum(p[1] for p in power) + hosts[0][0]     # nothing left behind
    assert not list((tmp_path / "spool").glob("seg-*"))
    ((state, beat),) = query(url, "SELECT state, last_heartbeat_s FROM nodes")
    assert state == "down" and beat is not None
    assert query(url, "SELECT uuid, healthy, mig_enabled FROM gpus ORDER BY gpu_index") == [
        ("GPU-fake-e2e-node-0", 1, 0), ("GPU-fake-e2e-node-1", 1, 0)]


@pytest.mark.slow
def test_once_takes_one_interval_and_exits(tmp_path):
    url = sqlite_store(tmp_path)
    done = subprocess.run(AGENT + ["--config", str(config(tmp_path, url)), "--fake-gpus",
                                   "1xT4", "--once"], capture_output=True, text=True,
                          env=env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert query(url, "SELECT COUNT(*) FROM power_samples") == [(1,)]
    assert query(url, "SELECT COUNT(*) FROM host_samples") == [(1,)]


def test_check_prints_what_the_agent_sees(tmp_path):
    url = sqlite_store(tmp_path)
    result = CliRunner().invoke(main, ["--config", str(config(tmp_path, url)), "--fake-gpus",
                                       "2xV100,1xK80", "--check"], env={"ANDREAS_DB_URL": None})
    assert result.exit_code == 0, result.output
    text = result.output
    for expected in ("FAKE NVML", "GPUs: 3 found, 3 sampled",
                     "energy counter: yes (nvmlDeviceGetTotalEnergyConsumption)",
                     "energy counter: no (energy integrated from power)", "Host power:",
                     "Docker: not followed", f"schema at revision {head_revision()} (head)",
                     "node e2e-node: not registered yet or changed; the agent registers it",
                     "Spool: spool ", "0 record(s) waiting", "andreas-agent --check: usable"):
        assert expected in text, (expected, text)


def test_check_fails_on_an_unmigrated_database_and_a_full_spool(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    (tmp_path / "empty.db").touch()
    cfg = config(tmp_path, url)
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "state.json").write_text('{"refused": 12, "last_refused_t": 1.0, '
                                      '"refusing": true}')
    result = CliRunner().invoke(main, ["--config", str(cfg), "--fake-gpus", "1xV100",
                                       "--check"], env={"ANDREAS_DB_URL": None})
    assert result.exit_code == 1
    assert "FAIL Database: database sqlite:" in result.output
    assert "run `andreas db upgrade`" in result.output
    assert "FAIL Spool: " in result.output and "FULL: new records are REFUSED" in \
        result.output and "12 record(s) were refused" in result.output
    assert "NOT usable (2 problem(s))" in result.output


def test_check_masks_the_password_of_an_unreachable_database(tmp_path):
    url = f"mysql+pymysql://agent:{SECRET}@127.0.0.1:9/andreas"
    env_file = tmp_path / "agent.env"
    env_file.write_text(f"# secrets\nANDREAS_DB_URL='{url}'\n")
    cfg = config(tmp_path, "sqlite:////nonexistent/never.db")
    result = CliRunner().invoke(main, ["--config", str(cfg), "--env-file", str(env_file),
                                       "--fake-gpus", "1xV100", "--check"],
                                env={"ANDREAS_DB_URL": None})
    assert result.exit_code == 1
    assert "FAIL Database: cannot use database mysql+pymysql://agent:***@127.0.0.1:9" in \
        result.output
    assert SECRET not in result.output


def test_register_writes_the_inventory_once(tmp_path):
    url = sqlite_store(tmp_path)
    args = ["--config", str(config(tmp_path, url)), "--fake-gpus", "2xT4", "--register"]
    first = CliRunner().invoke(main, args, env={"ANDREAS_DB_URL": None})
    assert first.exit_code == 0, first.output
    assert "node e2e-node (id 1) with 2 GPU(s)" in first.output
    # what was done, not what was missing (it printed "not registered" on success)
    assert ": node registered; GPU " in first.output and "not registered" not in first.output
    again = CliRunner().invoke(main, args, env={"ANDREAS_DB_URL": None})
    assert again.exit_code == 0 and "already registered, nothing changed" in again.output
    assert query(url, "SELECT name, gpu_type, gpu_count, docker_endpoint FROM nodes") == [
        ("e2e-node", "T4", 2, "ssh://e2e-node")]


def test_bad_configuration_is_one_line_and_exit_2(tmp_path):
    url = sqlite_store(tmp_path)
    cases = [
        (["--config", str(tmp_path / "missing.toml")], "config file"),
        (["--config", str(config(tmp_path, url, "zero.toml", interval_s=0))],
         "zero.toml: [agent] interval_s must be >= 0.05"),
        (["--config", str(config(tmp_path, url)), "--fake-gpus", "3xQuantum"],
         "unknown GPU type 'Quantum'"),
        (["--config", str(config(tmp_path, url)), "--check", "--once"], "exclude each other"),
    ]
    bad = tmp_path / "bad.toml"
    bad.write_text('[agent]\ncolour = "red"\n')
    cases.append((["--config", str(bad)], "[agent] unknown key 'colour'"))
    nodb = tmp_path / "nodb.toml"
    nodb.write_text("[agent]\nnode_name = \"x\"\n")
    cases.append((["--config", str(nodb)], "no database"))
    for args, message in cases:
        result = CliRunner().invoke(main, args, env={"ANDREAS_DB_URL": None})
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith("andreas-agent: error: ") and message in result.output
        assert result.output.count("\n") == 1


def test_without_nvml_and_without_fake_it_says_so(tmp_path, monkeypatch):
    from agents import daemon
    from agents.gpu import GpuSampler
    from agents.nvml_fake import make_fake_nvml

    fake = make_fake_nvml("1xV100")
    fake.fail_init()
    monkeypatch.setattr(daemon.Agent, "_make_gpu_sampler", lambda self: GpuSampler(fake))
    url = sqlite_store(tmp_path)
    result = CliRunner().invoke(main, ["--config", str(config(tmp_path, url))],
                                env={"ANDREAS_DB_URL": None})
    assert result.exit_code == 1
    assert "NVML cannot be initialised" in result.output and "--fake-gpus" in result.output


def test_the_agent_does_without_the_ssh_transport_unless_it_needs_it():
    code = ("import sys; from agents.cli import without_ssh_transport; "
            "without_ssh_transport(sys.argv[1]); import docker; "
            "c = docker.DockerClient(base_url='unix:///nonexistent.sock', version='1.41'); "
            "print('paramiko' in sys.modules and sys.modules['paramiko'] is not None)")
    local = subprocess.run([sys.executable, "-c", code, "unix:///var/run/docker.sock"],
                           capture_output=True, text=True, check=True)
    remote = subprocess.run([sys.executable, "-c", code, "ssh://gpu07"],
                            capture_output=True, text=True, check=True)
    assert local.stdout.strip() == "False" and remote.stdout.strip() == "True"


def test_the_agent_imports_pymysql_without_cryptography_until_rsa_is_asked(tmp_path):
    """Issue 34: from an environment that also has andreas[manager] (demo.sh's .venv, whose
    paramiko pulls cryptography in), an agent on MariaDB held 66 MB (bench_agent
    --mariadb): PyMySQL imports cryptography for MySQL 8's RSA password exchange only. The
    agent imports it on the first such exchange instead, and that exchange still works."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "key.pem").write_bytes(pem)
    code = ("import sys; from agents.cli import lean_docker_sdk; lean_docker_sdk('unix://'); "
            "import pymysql; print('cryptography' in sys.modules); "
            "from pymysql import _auth; "
            "out = _auth.sha2_rsa_encrypt(b'pw', b'0123456789abcdefghij', "
            "open(sys.argv[1], 'rb').read()); print('cryptography' in sys.modules); "
            "sys.stdout.write(out.hex())")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "key.pem")],
                          capture_output=True, text=True, check=True)
    before, after, cipher = done.stdout.split("\n")
    assert (before, after) == ("False", "True")
    oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(),
                        label=None)
    plain = key.decrypt(bytes.fromhex(cipher), oaep)
    salt = b"0123456789abcdefghij"
    assert plain == bytes(c ^ salt[i % len(salt)] for i, c in enumerate(b"pw\0"))


def test_the_agent_never_loads_the_orm_nor_a_charset_detector(tmp_path):
    """Issue 17 (resident memory < 60 MB): a whole ``--once`` run (registration, two
    ticks, delivery of every kind, the fence, a clean stop) writes through the store's
    Core tables, so neither ``sqlalchemy.orm`` (the ORM models, ~10 MB) nor requests'
    character-set detector (~2 MB) is ever imported (here without Docker: the SDK is
    imported at exit, as the tracker would after the agent's start)."""
    url = sqlite_store(tmp_path)
    code = ("import atexit, sys\n"
            "def loaded():\n"
            "    import docker\n"
            "    print('LOADED', sorted(m for m in ('sqlalchemy.orm', 'andreas.store.models', "
            "'charset_normalizer', 'chardet', 'paramiko', 'docker', 'sqlalchemy') "
            "if sys.modules.get(m) is not None))\n"
            "atexit.register(loaded)\n"
            "from agents.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code, "--config", str(config(tmp_path, url)),
                           "--fake-gpus", "1xT4", "--once"], capture_output=True, text=True,
                          env=env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert query(url, "SELECT COUNT(*) FROM power_samples") == [(1,)]
    assert done.stdout.strip().splitlines()[-1] == "LOADED ['docker', 'sqlalchemy']"


def test_the_store_modules_of_the_agent_import_no_orm():
    """The store's modules the agent uses import the Core tables only (``andreas.store``
    itself imports its ORM names on first use)."""
    code = ("import sys, agents.cli, agents.daemon, agents.store_writer, agents.fence, "
            "andreas.store, andreas.store.fence, andreas.store.schema, andreas.store.registry, "
            "andreas.store.samples, andreas.store.nodes, andreas.store.tables; "
            "print('sqlalchemy.orm' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
