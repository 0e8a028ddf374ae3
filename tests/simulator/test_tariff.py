"""Time-of-use tariffs: the file reader, the integral, the cost model, the simulator's bill
and the CLI (issue 15, part 2)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.cli import main
from andreas.costs import (charged_s, energy_cost, energy_time_s, evaluate, interval_cost,
                           tariff_blind, with_tariff)
from andreas.deferral import deferrals
from andreas.errors import InputError
from andreas.formats.tariff import MAX_BYTES, TariffFile, load_tariff, parse_tariff
from andreas.model import Energy, Job, Node, Params, Plan, Snapshot, Tariff, Trace
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions

ROOT = Path(__file__).resolve().parents[2]
DAY_NIGHT = ROOT / "profiles" / "tariffs" / "day-night.csv"
EXAMPLE = ROOT / "examples" / "example-exp-n10.json"
HOUR = 3600.0


def csv_text(prices, pues=None) -> str:
    head = "hour_of_day,price_per_kwh" + (",pue" if pues is not None else "")
    rows = [f"{h},{p}" + (f",{pues[h]}" if pues is not None else "")
            for h, p in enumerate(prices)]
    return "\n".join([head, *rows]) + "\n"


def two_rate(cheap=0.1, dear=0.3, pue=1.0) -> Tariff:
    """Cheap from 22:00 to 07:00, dear by day."""
    return Tariff(price_per_kwh=tuple(cheap if (h < 7 or h >= 22) else dear for h in range(24)),
                  pue=(pue,) * 24)


# --- the reader -----------------------------------------------------------------------

def test_example_tariff_reads_with_its_pue_column() -> None:
    tf = load_tariff(DAY_NIGHT)
    assert tf.pue is not None and len(tf.price_per_kwh) == 24
    tariff = tf.tariff(1.33)
    assert tariff.price_at(3 * HOUR) < tariff.price_at(12 * HOUR)    # night is cheaper
    assert tariff.pue_at(3 * HOUR) < tariff.pue_at(15 * HOUR)        # and cooler
    assert min(tariff.pue) >= 1.0


def test_rows_in_any_order_and_without_pue_take_the_sites_pue() -> None:
    prices = [0.1 + h / 100 for h in range(24)]
    lines = csv_text(prices).splitlines()
    shuffled = "\n".join([lines[0], *reversed(lines[1:])])
    tf = parse_tariff(shuffled)
    assert tf.price_per_kwh == tuple(prices) and tf.pue is None
    assert tf.tariff(1.4).pue == (1.4,) * 24


@pytest.mark.parametrize("text, expected", [
    (csv_text([0.1] * 23), "column hour_of_day: hour 23 is missing"),
    (csv_text([0.1] * 24) + "5,0.2\n", "row 26 column hour_of_day: hour 5 repeats row 7"),
    (csv_text([0.1] * 23 + [-0.1]), "row 25 column price_per_kwh: must be a finite number"),
    (csv_text([0.1] * 23 + ["nan"]), "row 25 column price_per_kwh: must be a finite number"),
    (csv_text([0.1] * 23 + ["inf"]), "row 25 column price_per_kwh: must be a finite number"),
    (csv_text([0.1] * 23 + ["cheap"]), "row 25 column price_per_kwh: must be a number, "
                                       "got 'cheap'"),
    (csv_text([0.1] * 24, [1.2] * 23 + [0.9]), "row 25 column pue: must be a finite number "
                                               "in [1, 5], got '0.9'"),
    (csv_text([0.1] * 24, [1.2] * 23 + [40]), "row 25 column pue: must be a finite number"),
    (csv_text([0.1] * 23 + [5000]), "row 25 column price_per_kwh: must be a finite number"),
    (csv_text([0.0] * 24), "column price_per_kwh: every hour is 0"),
    ("hour,price\n0,0.1\n", "header: must be hour_of_day,price_per_kwh[,pue]"),
    ("hour_of_day,price_per_kwh,co2\n", "header: must be"),
    ("", "header: must be"),
    (csv_text([0.1] * 24).replace("\n3,0.1\n", "\n3,0.1,7\n"), "row 5: has 3 columns"),
    (csv_text([0.1] * 24).replace("\n3,0.1\n", "\n24,0.1\n"),
     "row 5 column hour_of_day: must be 0..23, got '24'"),
    (csv_text([0.1] * 24).replace("\n3,0.1\n", "\n3.5,0.1\n"),
     "row 5 column hour_of_day: must be an integer 0..23, got '3.5'"),
])
def test_bad_tariffs_are_one_line_naming_row_column_and_value(text: str, expected: str) -> None:
    with pytest.raises(InputError) as e:
        parse_tariff(text)
    assert str(e.value).startswith(expected), str(e.value)
    assert "\n" not in str(e.value)


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_text(csv_text([0.1] * 24) + "\n" * (MAX_BYTES + 1))
    latin = tmp_path / "latin.csv"
    latin.write_bytes(csv_text([0.1] * 24).encode() + "# d\xe9j\xe0\n".encode("latin-1"))
    for path, expected in ((big, "64 KiB, larger than 64 KiB"), (latin, "not UTF-8 text"),
                           (tmp_path / "absent.csv", "cannot read")):
        with pytest.raises(InputError) as e:
            load_tariff(path)
        assert str(e.value).startswith(f"tariff {path}: {expected}"), str(e.value)
        assert e.value.field == "tariff"


# --- the integral ---------------------------------------------------------------------

def test_integral_across_a_price_change_by_hand() -> None:
    t = two_rate(cheap=0.1, dear=0.3, pue=1.5)
    # 21:30 -> 22:30: half an hour dear, half an hour cheap
    assert t.integral(21.5 * HOUR, 22.5 * HOUR) == pytest.approx(1800 * 0.3 * 1.5
                                                                  + 1800 * 0.1 * 1.5)
    # a whole day, starting mid-hour, on a large UTC time
    day0 = 19_000 * 86400.0
    assert t.integral(day0 + 1234.5, day0 + 1234.5 + 86400) == pytest.approx(
        3600 * 1.5 * (9 * 0.1 + 15 * 0.3), rel=1e-12)
    assert t.mean_price == pytest.approx((9 * 0.1 + 15 * 0.3) / 24)


def test_integral_is_vectorised() -> None:
    t = two_rate()
    a = np.array([0.0, 6.5 * HOUR, 86400.0 * 3])
    b = a + np.array([HOUR, HOUR, 2 * 86400.0])
    got = t.integral(a, b)
    assert got.shape == (3,)
    for k in range(3):
        assert got[k] == pytest.approx(t.integral(float(a[k]), float(b[k])), rel=1e-12)


rates = st.lists(st.floats(0.0, 2.0), min_size=24, max_size=24).filter(lambda v: max(v) > 0)
times = st.floats(0.0, 4e9)


@settings(max_examples=200, deadline=None)
@given(prices=rates, a=times, d1=st.floats(0.0, 3e5), d2=st.floats(0.0, 3e5))
def test_integral_adds_up_over_adjacent_intervals(prices, a, d1, d2) -> None:
    t = Tariff(price_per_kwh=tuple(prices), pue=(1.25,) * 24)
    b, c = a + d1, a + d1 + d2
    whole = t.integral(a, c)
    assert t.integral(a, b) + t.integral(b, c) == pytest.approx(whole, rel=1e-9, abs=1e-3)
    assert whole >= -1e-6 and whole <= max(t.rate) * (c - a) + 1e-3


@settings(max_examples=100, deadline=None)
@given(price=st.floats(0.01, 2.0), pue=st.floats(1.0, 3.0), a=times, d=st.floats(0.0, 1e6))
def test_flat_tariff_integrates_to_the_constant_price(price, pue, a, d) -> None:
    t = Tariff(price_per_kwh=(price,) * 24, pue=(pue,) * 24)
    assert t.flat
    assert t.integral(a, a + d) == pytest.approx(price * pue * d, rel=1e-9, abs=1e-3)


# --- the cost model -------------------------------------------------------------------

def node(name="n1", gpus=1, idle_w=100.0, busy_w=1100.0) -> Node:
    return Node(name=name, gpu_type="V100", gpus=gpus,
                power_w=(idle_w,) + tuple(busy_w for _ in range(gpus)))


def job(job_id="j1", *, submit_s=0.0, due_s=1e6, hours=2.0, weight=0.01) -> Job:
    return Job(id=job_id, submit_s=submit_s, due_s=due_s, weight=weight, epochs=1,
               epoch_time_s={"V100": (hours * HOUR,)})


def test_energy_cost_of_a_planned_run_integrates_the_tariff_by_hand() -> None:
    # 1 kW node running 2 h from 21:00: an hour at 0.3, an hour at 0.1, PUE 1.5
    energy = with_tariff(Energy(pue=1.5), TariffFile(price_per_kwh=two_rate().price_per_kwh,
                                                     pue=None))
    snap = Snapshot(now_s=21 * HOUR, nodes=(node(idle_w=0.0, busy_w=1000.0),),
                    jobs=(job(submit_s=0.0),), energy=energy, params=Params())
    plan = Plan(policy="t", assignments=(), postponed=(), objective=0.0, objective_name="f")
    from andreas.model import Assignment
    plan = replace(plan, assignments=(Assignment(job="j1", node="n1", gpus=1),))
    ev = evaluate(snap, plan)
    assert ev.node_cost == pytest.approx(1.0 * 1.5 * (0.3 + 0.1))
    # the same run planned blind: 2 h at the mean rate
    blind = evaluate(replace(snap, energy=tariff_blind(energy)), plan)
    assert blind.node_cost == pytest.approx(2.0 * 1.5 * energy.price_per_kwh)
    assert energy_time_s(energy, 21 * HOUR, 2 * HOUR) == pytest.approx(
        2 * HOUR * 0.2 / energy.price_per_kwh)


def test_without_a_tariff_charged_time_is_the_run_time_itself() -> None:
    snap = Snapshot(now_s=5.0, nodes=(node(),), jobs=(job(),), energy=Energy(), params=Params())
    t = np.array([1.0, 7200.0])
    assert charged_s(snap, t) is t
    assert interval_cost(3.6e6, 0.0, 10.0, Energy()) == energy_cost(3.6e6, Energy())


def test_deferral_holds_a_job_with_slack_in_a_dear_hour_only() -> None:
    energy = with_tariff(Energy(), TariffFile(price_per_kwh=two_rate().price_per_kwh,
                                              pue=None))
    base = Snapshot(now_s=20 * HOUR, nodes=(node(),), energy=energy, params=Params(),
                    jobs=(job("slack", due_s=40 * HOUR), job("tight", due_s=24 * HOUR)))
    held = deferrals(base)
    assert [d.job for d in held] == ["slack"]
    assert held[0].start_s == 22 * HOUR and held[0].saving == pytest.approx(2 / 3)
    assert deferrals(replace(base, now_s=23 * HOUR)) == ()          # already cheap
    assert deferrals(replace(base, energy=tariff_blind(energy))) == ()
    flat = with_tariff(Energy(), TariffFile(price_per_kwh=(0.2,) * 24, pue=None))
    assert deferrals(replace(base, energy=flat)) == ()


# --- the simulator --------------------------------------------------------------------

def test_a_flat_tariff_bills_the_same_as_constant_prices() -> None:
    from andreas.formats.trace import load_trace
    trace = load_trace(EXAMPLE)
    e = trace.energy
    flat = replace(trace, energy=with_tariff(e, TariffFile(price_per_kwh=(e.price_per_kwh,) * 24,
                                                           pue=None)))
    opts = SimOptions(iterations=5)
    plain, priced = simulate(trace, "rg", opts), simulate(flat, "rg", opts)
    assert priced.energy_kwh == plain.energy_kwh
    assert priced.energy_cost == pytest.approx(plain.energy_cost, rel=1e-9)
    assert priced.total_cost == pytest.approx(plain.total_cost, rel=1e-9)
    for a, b in zip(plain.jobs, priced.jobs):
        assert (a.id, a.first_start_s, a.completion_s) == (b.id, b.first_start_s, b.completion_s)
        assert b.energy_cost == pytest.approx(a.energy_cost, rel=1e-9)


def waiting_pays() -> Trace:
    """One 1-GPU node; a 2-hour job submitted at 20:00 (dear) due two days later."""
    tariff = TariffFile(price_per_kwh=two_rate().price_per_kwh, pue=None)
    return Trace(name="waiting-pays", nodes=(node(idle_w=100.0, busy_w=1100.0),),
                 jobs=(job("j1", submit_s=20 * HOUR, due_s=68 * HOUR, hours=2.0),),
                 energy=with_tariff(Energy(pue=1.2), tariff), params=Params(period_s=HOUR))


@pytest.mark.parametrize("policy", ["rg", "fifo"])
def test_tariff_aware_plans_wait_for_the_cheap_hour_and_pay_less(policy: str) -> None:
    trace = waiting_pays()
    aware = simulate(trace, policy, SimOptions(iterations=3))
    blind = simulate(trace, policy, SimOptions(iterations=3, tariff_blind=True))
    assert blind.jobs[0].first_start_s == 20 * HOUR
    assert aware.jobs[0].first_start_s == 22 * HOUR
    assert aware.tardiness_cost == blind.tardiness_cost == 0.0
    # the job's own bill: 1.1 kW x 2 h x PUE 1.2 at 0.1 (aware) against 0.3 (blind)
    assert aware.jobs[0].energy_cost == pytest.approx(1.1 * 2 * 1.2 * 0.1)
    assert blind.jobs[0].energy_cost == pytest.approx(1.1 * 2 * 1.2 * 0.3)
    assert aware.energy_cost < blind.energy_cost
    # both bills integrate the tariff: the idle node's two dear hours are in the aware bill
    idle_dear = 0.1 * 2 * 1.2 * 0.3
    assert aware.energy_cost == pytest.approx(aware.jobs[0].energy_cost + idle_dear)


def test_period_zero_with_a_tariff_is_refused() -> None:
    from andreas.simulator.engine import SimulationError
    with pytest.raises(SimulationError, match="period_s: 0 with a tariff"):
        simulate(waiting_pays(), "rg", SimOptions(period_s=0.0))


# --- the CLI --------------------------------------------------------------------------

def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_simulate_with_a_tariff_aware_and_blind(tmp_path: Path) -> None:
    from andreas.formats.trace import dump_trace
    trace_path = tmp_path / "t.json"
    dump_trace(replace(waiting_pays(), energy=Energy(pue=1.2)), trace_path)
    tariff = tmp_path / "tariff.csv"
    tariff.write_text(csv_text(two_rate().price_per_kwh))
    costs = {}
    for flag in ((), ("--tariff-blind",)):
        result = run("simulate", "--trace", str(trace_path), "--policies", "rg", "--tariff",
                     str(tariff), *flag, "--json", "--workers", "1", "--no-plots",
                     "--out", str(tmp_path / "out"))
        assert result.exit_code == 0, result.output
        row = json.loads(result.stdout)[0]
        assert row["options"]["tariff_blind"] is bool(flag)
        assert row["options"]["tariff"] == str(tariff.resolve())     # recorded
        costs[bool(flag)] = row["energy_cost"]
    assert costs[False] < costs[True]
    # aware: idle 20:00-22:00 at 0.3, then the job 22:00-24:00 at 0.1 (kW x h x PUE x price)
    assert costs[False] == pytest.approx(0.1 * 2 * 1.2 * 0.3 + 1.1 * 2 * 1.2 * 0.1)
    assert costs[True] == pytest.approx(1.1 * 2 * 1.2 * 0.3)


def test_simulate_sweep_with_a_tariff_prices_every_trace_and_records_it(
        tmp_path: Path) -> None:
    """--sweep --tariff: each generated trace is priced by the tariff in its worker; the
    same run at a flat tariff of the same mean bills differently, and sweep.json names
    the file."""
    day_night = Path(__file__).resolve().parents[2] / "profiles" / "tariffs" / "day-night.csv"
    flat = tmp_path / "flat.csv"
    flat.write_text(csv_text([0.2] * 24))
    bills = {}
    for name, path in (("day-night", day_night), ("flat", flat)):
        out = tmp_path / name
        result = run("simulate", "--sweep", "--nodes", "2", "--seeds", "1", "--policies",
                     "greedy", "--tariff", str(path), "--json", "--workers", "1", "--quiet",
                     "--out", str(out))
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["tariff"] == str(path.resolve()) and doc["tariff_blind"] is False
        (row,) = json.loads((out / "sweep.json").read_text())["runs"]
        bills[name] = row["energy_cost"]
    plain = run("simulate", "--sweep", "--nodes", "2", "--seeds", "1", "--policies",
                "greedy", "--json", "--workers", "1", "--quiet", "--out", str(tmp_path / "p"))
    assert plain.exit_code == 0 and "tariff" not in json.loads(plain.stdout)
    assert bills["day-night"] != pytest.approx(bills["flat"], rel=1e-3)


@pytest.mark.parametrize("args, expected", [
    (("--tariff", "{bad}"), "--tariff {bad}: row 25 column price_per_kwh: must be a finite"),
    (("--tariff", "{bad}", "--sweep"), "--tariff {bad}: row 25 column price_per_kwh"),
    (("--tariff-blind",), "--tariff-blind: needs --tariff FILE"),
])
def test_simulate_bad_tariff_is_one_line_exit_2_and_writes_nothing(
        tmp_path: Path, args, expected: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(csv_text([0.1] * 23 + [-1]))
    out = tmp_path / "out"
    result = run("simulate", "--nodes", "2", "--policies", "rg", "--json", "--out", str(out),
                 *[a.replace("{bad}", str(bad)) for a in args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("andreas: error: " + expected.replace("{bad}", str(bad)))
    assert not out.exists()


def test_optimize_with_a_tariff_holds_a_job_in_a_dear_hour(tmp_path: Path) -> None:
    from andreas.formats.snapshot import snapshot_to_dict
    snap = Snapshot(now_s=20 * HOUR, nodes=(node(),), jobs=(job(due_s=60 * HOUR),),
                    energy=Energy(), params=Params())
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snapshot_to_dict(snap)))
    tariff = tmp_path / "tariff.csv"
    tariff.write_text(csv_text(two_rate().price_per_kwh))
    plain = run("optimize", str(path), "--json")
    priced = run("optimize", str(path), "--json", "--tariff", str(tariff))
    assert plain.exit_code == 0 and priced.exit_code == 0, priced.output
    assert json.loads(plain.stdout)["postponed"] == []
    assert json.loads(priced.stdout)["postponed"] == ["j1"]
    assert json.loads(priced.stdout)["stats"]["deferred"] == 1
    bad = run("optimize", str(path), "--tariff", str(tmp_path / "none.csv"))
    assert bad.exit_code == 2 and bad.output.startswith("andreas: error: --tariff ")
    assert math.isfinite(json.loads(priced.stdout)["objective"])
