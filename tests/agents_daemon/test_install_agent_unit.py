"""The systemd unit and the install script: hardening as specified, the unit verified by
systemd-analyze, the script's plan (--dry-run) complete and idempotent about an
operator's files, the config template valid for the agent."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

from agents.config import load_config

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "andreas-agent.service"
SCRIPT = ROOT / "scripts" / "install-agent.sh"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str                       # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def test_the_unit_runs_hardened_as_the_agent_user():
    service = unit()["Service"]
    expected = {
        "Restart": "on-failure", "User": "andreas-agent", "Group": "andreas-agent",
        "SupplementaryGroups": "docker", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
        "ProtectHome": "yes", "PrivateTmp": "yes", "ReadWritePaths": "/var/lib/andreas-agent",
        "CapabilityBoundingSet": "", "AmbientCapabilities": "", "KillSignal": "SIGTERM",
        "RestartPreventExitStatus": "2", "EnvironmentFile": "-/etc/andreas/agent.env",
        "ExecStart": "/opt/andreas/venv/bin/andreas-agent --config /etc/andreas/agent.toml",
        "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
        "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes",
    }
    for key, value in expected.items():
        assert service.get(key) == value, key
    # NVML opens /dev/nvidia*; the PID check reads other users' /proc/PID/cgroup
    assert "PrivateDevices" not in service and "ProtectProc" not in service
    assert unit()["Install"]["WantedBy"] == "multi-user.target"
    template = (ROOT / "systemd" / "agent.toml.example").read_text()
    assert 'path = "/var/lib/andreas-agent/spool"' in template   # inside ReadWritePaths


def test_systemd_accepts_the_unit(tmp_path):
    """systemd-analyze verify, on a copy whose ExecStart exists on this machine (the real
    path exists only after the install). Machines without systemd get the content test."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        assert unit()["Service"]["ExecStart"]
        return
    copy = tmp_path / "andreas-agent.service"
    copy.write_text(UNIT.read_text().replace("/opt/andreas/venv/bin/andreas-agent",
                                             sys.executable))
    done = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Unknown key" not in done.stderr and "Unknown section" not in done.stderr


def dry_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--dry-run", *args], capture_output=True,
                          text=True, timeout=60)


def test_install_dry_run_plans_every_step_and_changes_nothing(tmp_path):
    etc, units = tmp_path / "etc", tmp_path / "units"
    done = dry_run("--node-name", "gpu-07", "--etc-dir", str(etc), "--unit-dir", str(units),
                   "--prefix", str(tmp_path / "opt"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    venv = tmp_path / "opt" / "venv"
    for line in (
            "useradd --system --user-group --groups docker", "--shell /usr/sbin/nologin",
            f"-m venv {venv}",
            f"{venv}/bin/python -m pip install --quiet --upgrade {ROOT}\\[agent\\]",
            f"+ write {etc}/agent.toml (from systemd/agent.toml.example, mode 0640, "
            "root:andreas-agent)",
            f"+ write {etc}/agent.env (from systemd/agent.env.example, mode 0600, root:root)",
            "+ install -d -m 0750 -o andreas-agent -g andreas-agent /var/lib/andreas-agent/spool",
            f"+ write {units}/andreas-agent.service (from systemd/andreas-agent.service, "
            "mode 0644, root:root)",
            "+ systemctl daemon-reload", "+ systemctl enable andreas-agent.service",
            "not started yet: no database configured"):
        if "useradd" in line and "usermod --append --groups docker andreas-agent" in out:
            continue                               # the user exists on this machine
        assert line in out, (line, out)
    assert not etc.exists() and not units.exists() and not (tmp_path / "opt").exists()


def test_install_keeps_an_operators_files_and_starts_once_configured(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "agent.toml").write_text('[store]\nurl = "mysql+pymysql://a@db/andreas"\n')
    (etc / "agent.env").write_text("")
    done = dry_run("--etc-dir", str(etc), "--unit-dir", str(tmp_path / "u"))
    assert done.returncode == 0, done.stderr
    assert f"{etc}/agent.toml exists: kept (mode and owner set to 0640 root:andreas-agent)" \
        in done.stdout
    assert f"+ chmod 0600 {etc}/agent.env" in done.stdout
    assert f"+ write {etc}/agent.toml" not in done.stdout
    assert "+ systemctl restart andreas-agent.service" in done.stdout
    assert (etc / "agent.toml").read_text().startswith("[store]")


def test_install_refuses_bad_options():
    assert dry_run("--frobnicate").returncode == 2
    assert dry_run("--prefix", "relative/dir").returncode == 2
    assert dry_run("--node-name", "bad name").returncode == 2


def test_the_config_template_is_a_valid_agent_config(tmp_path):
    text = (ROOT / "systemd" / "agent.toml.example").read_text().replace("@NODE_NAME@", "gpu-7")
    path = tmp_path / "agent.toml"
    path.write_text(text)
    cfg = load_config(path, environ={"ANDREAS_DB_URL": "mysql+pymysql://a@db/andreas"})
    assert (cfg.node_name, cfg.registered_docker_endpoint, cfg.spool_max_bytes) == (
        "gpu-7", "ssh://gpu-7", 1 << 30)
    assert cfg.spool_dir == "/var/lib/andreas-agent/spool"
