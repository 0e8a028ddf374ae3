"""``--metrics-port`` and ``[agent]`` / ``[manager]`` ``metrics_port``: checked by the
settings' one set of rules; a bad port is one line naming the option or key and the value,
exit 2; a port already taken is one line too."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.ports import free_port
from agents.cli import main as agent_main
from agents.config import load_config
from andreas.cli import main as cli
from andreas.config import load_settings
from andreas.errors import InputError
from andreas.metrics import MetricsUnavailable, serve


def agent_toml(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(f'[agent]\nnode_name = "n1"\ndocker_url = ""\n{extra}\n'
                    f'[store]\nurl = "sqlite:///{tmp_path / "a.db"}"\n'
                    f'[spool]\npath = "{tmp_path / "spool"}"\n')
    return path


@pytest.mark.parametrize("port", ["0", "70000", "-1"])
def test_agent_option_out_of_range_is_one_line_exit_2(tmp_path, port):
    result = CliRunner().invoke(agent_main, ["--config", str(agent_toml(tmp_path)),
                                             "--fake-gpus", "1xV100", "--metrics-port", port])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--metrics-port" in lines[0] and port in lines[0], lines


def test_agent_file_key(tmp_path):
    cfg = load_config(agent_toml(tmp_path, "metrics_port = 9464\nmetrics_address = \"::1\""),
                      environ={})
    assert (cfg.metrics_port, cfg.metrics_address) == (9464, "::1")
    assert load_config(agent_toml(tmp_path), environ={}).metrics_port is None
    with pytest.raises(InputError, match=r"\[agent\] metrics_port must be <= 65535, got 65536"):
        load_config(agent_toml(tmp_path, "metrics_port = 65536"), environ={})
    with pytest.raises(InputError, match=r"\[agent\] metrics_port has the wrong type: '9464'"):
        load_config(agent_toml(tmp_path, 'metrics_port = "9464"'), environ={})


def test_manager_file_key(tmp_path):
    path = tmp_path / "andreas.toml"
    path.write_text("[manager]\nmetrics_port = 9465\n")
    assert load_settings({"ANDREAS_CONFIG": str(path)}).manager.metrics_port == 9465
    path.write_text("[manager]\nmetrics_port = 0\n")
    with pytest.raises(InputError, match=r"\[manager\] metrics_port must be >= 1, got 0"):
        load_settings({"ANDREAS_CONFIG": str(path)})


def test_manager_option_out_of_range_is_one_line_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("ANDREAS_DB_URL", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.delenv("ANDREAS_CONFIG", raising=False)
    result = CliRunner().invoke(cli, ["manager", "run", "--dry-run", "--metrics-port", "99999"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == ["andreas: error: --metrics-port must be <= 65535, got 99999"]


def test_a_taken_port_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(MetricsUnavailable, match=rf"^metrics_port {port}: cannot listen "
                           rf"on 127.0.0.1:{port} \(.+\)$"):
            serve([], address="127.0.0.1", port=port)


def test_serve_binds_where_asked_and_closes():
    server = serve([], address="127.0.0.1", port=free_port())
    try:
        with urllib.request.urlopen(server.url, timeout=5) as r:
            body = r.read().decode()
        assert "process_cpu_seconds_total" in body        # the private registry's process metrics
        assert "python_gc_objects_collected_total" not in body   # never the global registry
    finally:
        server.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)




def test_without_a_port_prometheus_client_is_not_imported():
    """The daemons' modules (sampling loop, manager, CLI) import it only with a port."""
    code = ("import sys, agents.cli, agents.daemon, andreas.manager.daemon, "
            "andreas.manager.manager, andreas.cli; "
            "print('prometheus_client' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
