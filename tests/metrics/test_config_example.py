"""``systemd/andreas.toml.example`` through the real loader, as written and with every
commented ``# key = value`` enabled, and naming every key the manager's settings know:
a new setting without its line in the template fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from andreas.config import (PowerSettings, ProfilerSettings,
    _SECTIONS,
    ExecutorSettings,
    ManagerSettings,
    ProfilerSettings,
    ReportSettings,
    SlurmSettings,
    StoreSettings,
    load_settings,
)
from andreas.infra.fields import known_keys

EXAMPLE = Path(__file__).resolve().parents[2] / "systemd" / "andreas.toml.example"
SCHEMA = {"store": StoreSettings, "manager": ManagerSettings, "executor": ExecutorSettings,
          "report": ReportSettings, "profiler": ProfilerSettings, "power": PowerSettings}
COMMENTED_KEY = re.compile(r"^# (\w+ = .*)$")


def enabled(text: str) -> str:
    """The template with every commented-out key line turned into a setting."""
    return "\n".join(COMMENTED_KEY.sub(r"\1", line) for line in text.splitlines()) + "\n"


ROOT = Path(__file__).resolve().parents[2]


def load(tmp_path: Path, text: str):
    path = tmp_path / "andreas.toml"
    path.write_text(text)
    # the template's tariff example is relative to the config file: put one beside it
    (tmp_path / "tariff.csv").write_bytes(
        (ROOT / "profiles" / "tariffs" / "day-night.csv").read_bytes())
    return load_settings({"ANDREAS_CONFIG": str(path), "HOME": str(tmp_path)})


def test_every_section_and_key_is_in_the_template(tmp_path):
    assert set(SCHEMA) == set(_SECTIONS)
    full = tomllib.loads(enabled(EXAMPLE.read_text()))
    assert set(full) == set(_SECTIONS)
    for section, cls in SCHEMA.items():
        assert set(full[section]) - {"slurm"} == set(known_keys(cls)), section
    assert set(full["executor"]["slurm"]) == set(known_keys(SlurmSettings))


def test_the_template_loads_as_written(tmp_path):
    settings = load(tmp_path, EXAMPLE.read_text())
    assert settings.config_path == str(tmp_path / "andreas.toml")
    assert settings.manager == ManagerSettings()          # the values shown are the defaults
    assert settings.executor == ExecutorSettings()
    assert settings.power == PowerSettings()
    assert settings.db_url.startswith("sqlite:///") and settings.db_url_source == "default"


def test_the_template_loads_with_every_example_enabled(tmp_path):
    settings = load(tmp_path, enabled(EXAMPLE.read_text()))
    assert settings.db_url == "mysql+pymysql://andreas_manager@db.example.org/andreas"
    assert settings.manager.metrics_port == 9465 and settings.manager.seed == 1
    assert settings.executor.tls_ca_cert == "/etc/andreas/docker-ca.pem"
    assert settings.report.grid_co2_g_per_kwh == 250
    assert settings.profiler.nodes == ("gpu07",) and settings.profiler.epochs == 3
    assert settings.manager.tariff == str(tmp_path / "tariff.csv")
    assert settings.manager.tariff_file is not None
    assert settings.manager.tariff_file.price_per_kwh[0] == 0.11     # day-night.csv, 00 UTC
    assert settings.power.argv("off_command", "gpu01")[:5] == (
        "ipmitool", "-I", "lanplus", "-H", "gpu01-bmc")
    assert settings.power.nodes == ("gpu01", "gpu02") and settings.power.enabled is False
