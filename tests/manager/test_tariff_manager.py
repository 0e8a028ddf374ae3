"""``[manager] tariff``: read and checked at load, carried by the snapshot's Energy, so the
manager's decisions hold jobs with slack for cheap hours and predict costs that integrate
price x PUE over each run; a bad file is one line and ``andreas manager run`` exits 2."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from andreas.cli import main
from andreas.config import load_settings
from andreas.errors import InputError
from andreas.formats.tariff import TariffFile
from andreas.manager.plandoc import read_energy
from tests.manager.helpers import Clock, add_job, add_node, make
from tests.manager.test_decision import decisions

ROOT = Path(__file__).resolve().parents[2]
DAY_NIGHT = ROOT / "profiles" / "tariffs" / "day-night.csv"
DAY_S = 86400.0
NOW = 11 * DAY_S + 13 * 3600.0          # 13:00 UTC: a dear hour
DEAR, CHEAP, PUE = 0.30, 0.10, 1.5      # 0.30 from 08:00 to 20:00 UTC, 0.10 otherwise
PRICES = tuple(DEAR if 8 <= h < 20 else CHEAP for h in range(24))


def tariff_settings(**extra):
    return dict(tariff="/etc/andreas/tariff.csv", energy_pue=PUE,
                tariff_file=TariffFile(price_per_kwh=PRICES, pue=None), **extra)


def write_config(tmp_path: Path, tariff_text: str, key: str = "tariff.csv") -> Path:
    (tmp_path / "tariff.csv").write_text(tariff_text)
    config = tmp_path / "andreas.toml"
    config.write_text(f'[manager]\ntariff = "{key}"\n')
    return config


def test_a_relative_tariff_is_read_beside_the_config_file(tmp_path):
    config = write_config(tmp_path, DAY_NIGHT.read_text())
    m = load_settings({"ANDREAS_CONFIG": str(config), "HOME": str(tmp_path)}).manager
    assert m.tariff == str(tmp_path / "tariff.csv")
    assert m.tariff_file is not None
    assert m.tariff_file.price_per_kwh[17] == 0.30 and m.tariff_file.pue[0] == 1.22


@pytest.mark.parametrize("text, expected", [
    ("hour_of_day,price_per_kwh\n" + "".join(f"{h},{-1 if h == 5 else 0.1}\n"
                                             for h in range(24)),
     "row 7 column price_per_kwh: must be a finite number in [0, 1000], got '-1'"),
    ("hour_of_day,price_per_kwh\n" + "".join(f"{h},0.1\n" for h in range(23)),
     "column hour_of_day: hour 23 is missing (1 of 0..23 missing)"),
    ("hour_of_day,price_per_kwh\n" + "".join(f"{h},0.1\n" for h in [*range(24), 4]),
     "row 26 column hour_of_day: hour 4 repeats row 6"),
])
def test_a_bad_tariff_is_one_line_naming_config_file_row_column_and_value(
        tmp_path, text, expected):
    config = write_config(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_settings({"ANDREAS_CONFIG": str(config), "HOME": str(tmp_path)})
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{config}: [manager] tariff {tmp_path / 'tariff.csv'}: ")
    assert msg.endswith(expected)


def test_a_missing_tariff_file_is_named(tmp_path):
    config = write_config(tmp_path, DAY_NIGHT.read_text(), key="/nonexistent/tariff.csv")
    with pytest.raises(InputError, match=r"\[manager\] tariff /nonexistent/tariff.csv: "
                                         "cannot read"):
        load_settings({"ANDREAS_CONFIG": str(config), "HOME": str(tmp_path)})


def test_tariff_file_is_no_key_of_the_config(tmp_path):
    config = tmp_path / "andreas.toml"
    config.write_text('[manager]\ntariff_file = "x"\n')
    with pytest.raises(InputError, match="unknown key 'tariff_file'"):
        load_settings({"ANDREAS_CONFIG": str(config), "HOME": str(tmp_path)})


def test_manager_run_with_a_bad_tariff_exits_2_with_one_line(tmp_path):
    config = write_config(tmp_path, "hour_of_day,price_per_kwh\n0,abc\n")
    r = CliRunner().invoke(main, ["manager", "run", "--dry-run"],
                           env={"ANDREAS_CONFIG": str(config),
                                "ANDREAS_DB_URL": f"sqlite:///{tmp_path / 'db'}"})
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1
    assert "tariff.csv: row 2 column price_per_kwh: must be a number, got 'abc'" in lines[0]


def test_a_dear_hour_defers_a_job_with_slack_and_says_why(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "slack", due_s=NOW + 10 * DAY_S, epochs=2)
    m, _, _ = make(mstore, policy="rg", clock=Clock(NOW), **tariff_settings())
    m.reschedule("submit")
    plan = decisions(mstore)[-1].plan
    assert plan["assignments"] == [] and plan["postponed"] == ["slack"]
    assert plan["stats"]["deferred"] == 1.0
    (action,) = plan["actions"]
    # a run wholly in the cheap hours (20:00 .. 08:00 UTC) costs 1/3 of one started now
    match = re.fullmatch(r"wait: tariff, a start at (\d\d):(\d\d) UTC costs 67% less",
                         action["reason"])
    assert match is not None, action["reason"]
    assert int(match[1]) >= 20 or int(match[1]) < 8
    energy = plan["energy"]
    assert energy["tariff"] == {"file": "/etc/andreas/tariff.csv",
                                "price_per_kwh": list(PRICES), "pue": [PUE] * 24}
    assert energy["pue"] == PUE and energy["price_per_kwh"] == pytest.approx(
        (12 * DEAR + 12 * CHEAP) / 24)
    assert read_energy(plan).tariff.price_per_kwh == PRICES
    json.dumps(plan, allow_nan=False)


def test_without_a_tariff_the_same_job_starts_now(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "slack", due_s=NOW + 10 * DAY_S, epochs=2)
    m, _, _ = make(mstore, policy="rg", clock=Clock(NOW))
    m.reschedule("submit")
    plan = decisions(mstore)[-1].plan
    assert [a["job"] for a in plan["assignments"]] == ["slack"]
    assert "tariff" not in plan["energy"] and "deferred" not in plan["stats"]


def test_predicted_cost_integrates_the_tariff_over_the_run_by_hand(mstore):
    """A late job (no slack: never held) starts at 13:00 UTC; its run crosses 20:00, where
    the price falls from 0.30 to 0.10: energy = P/1000 kW x PUE x (0.30 x dear seconds +
    0.10 x cheap seconds) / 3600, plus weight x seconds late."""
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "late", due_s=NOW - 100.0, epochs=100, weight=0.001)
    m, _, _ = make(mstore, policy="rg", clock=Clock(NOW), **tariff_settings())
    m.reschedule("submit")
    plan = decisions(mstore)[-1].plan
    (a,) = plan["assignments"]
    t = a["expected_end_s"] - NOW
    dear_s = 7 * 3600.0                 # 13:00 .. 20:00
    assert dear_s < t < dear_s + 12 * 3600.0, t   # the run crosses exactly one change
    watts = plan["nodes"]["a"]["power_w"][a["gpus"]]
    energy = watts / 1000.0 * PUE * (DEAR * dear_s + CHEAP * (t - dear_s)) / 3600.0
    late = 0.001 * (t + 100.0)
    assert a["predicted_cost"] == pytest.approx(energy + late, rel=1e-9)
    # and not what the mean price would have predicted
    flat = watts / 1000.0 * PUE * plan["energy"]["price_per_kwh"] * t / 3600.0
    assert abs(a["predicted_cost"] - late - flat) > 0.01 * flat


def test_the_template_path_loads_and_plans(tmp_path):
    """The day/night tariff shipped in profiles/ loads as a manager setting (absolute)."""
    shutil.copy(DAY_NIGHT, tmp_path / "t.csv")
    config = tmp_path / "andreas.toml"
    config.write_text(f'[manager]\ntariff = "{tmp_path / "t.csv"}"\nenergy_pue = 1.4\n')
    m = load_settings({"ANDREAS_CONFIG": str(config), "HOME": str(tmp_path)}).manager
    from andreas.manager.snapshot import settings_energy

    e = settings_energy(m)
    assert e.tariff is not None and e.tariff.pue[0] == 1.22   # the file's PUE column wins
    assert e.price_per_kwh == pytest.approx(sum(m.tariff_file.price_per_kwh) / 24)


def test_costs_shows_this_hours_rate_with_a_tariff(mstore, db_url, tmp_path):
    add_node(mstore, "a", gpus=2)
    config = write_config(tmp_path, DAY_NIGHT.read_text())
    r = CliRunner().invoke(main, ["costs", "--json"],
                           env={"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": str(config)})
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    tariff = load_settings({"ANDREAS_CONFIG": str(config)}).manager.tariff_file
    rates = {p * q for p, q in zip(tariff.price_per_kwh, tariff.pue)}
    for row in rows:
        # c_ng at the tariff's mean rate, and an hour at one of its hourly rates
        assert row["cost_per_hour"] == pytest.approx(
            row["power_w"] / 1000 * (sum(tariff.pue) / 24) * (sum(tariff.price_per_kwh) / 24))
        assert any(row["cost_per_hour_now"] == pytest.approx(row["power_w"] / 1000 * r)
                   for r in rates)
