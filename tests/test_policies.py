"""The policy registry (andreas/policies.py): every spec against its function, and the
one line every entry point gives for an option a policy does not take."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
from click.testing import CliRunner

from andreas import optimizer, policies
from andreas.cli.root import main
from andreas.errors import InputError
from andreas.policies import OPTIONS, POLICIES, TaskKind
from andreas.synthetic import random_snapshot

EXAMPLE = "examples/example-snapshot-n10.json"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_spec_matches_its_function_s_signature(name: str) -> None:
    spec = POLICIES[name]
    params = list(inspect.signature(spec.load()).parameters.values())
    assert [p.name for p in params[:2]] == ["snapshot", "rng"]
    rest = params[2:]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest), \
        f"{name}: options must be keyword-only, no **options"
    assert {p.name for p in rest} == set(spec.options) | set(spec.context)
    for p in rest:
        if p.name in spec.options:
            assert p.default == spec.options[p.name], (name, p.name)
            assert type(p.default) is type(spec.options[p.name]), (name, p.name)
        else:
            assert p.default is None, (name, p.name)     # state, sharing: the caller's


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_default_is_a_value_its_option_takes(name: str) -> None:
    for option, default in POLICIES[name].options.items():
        OPTIONS[option].check(default, none_ok=True)


def test_option_choices_are_the_modules_own() -> None:
    from andreas.optimizer.genetic import DECODERS, FITNESSES
    from andreas.optimizer.problem import ORDERS
    from andreas.optimizer.relinking import WINDOW_WHEN

    assert set(OPTIONS["order"].choices) == set(ORDERS)
    assert set(OPTIONS["decoder"].choices) == set(DECODERS)
    assert set(OPTIONS["fitness"].choices) == set(FITNESSES)
    assert set(OPTIONS["window_when"].choices) == set(WINDOW_WHEN)


def test_traits_are_what_the_modules_do() -> None:
    rigid = {n for n, s in POLICIES.items() if s.kind is TaskKind.RIGID}
    assert rigid == {"first-fit", "round-robin", "tetris", "best-fit", "ga", "ojpp-greedy",
                     "ojpp-heuristic", "ojpap", "i-greedy", "b-greedy", "c-greedy"}
    assert {n for n, s in POLICIES.items() if s.plans_demands} == rigid | {"greedy", "rg", "horizon"}
    assert {n for n, s in POLICIES.items() if not s.cloud} == rigid | {"ga-energy"}
    assert {n for n, s in POLICIES.items() if s.stateful} == {"round-robin", "ojpap"}
    assert {n for n, s in POLICIES.items() if s.period_s == 900.0} == {
        "dp-wct", "dp-fastwct", "dp-fastb", "dp-adjwct"}
    for spec in POLICIES.values():
        assert importlib.util.find_spec(spec.module) is not None


def test_the_manager_s_policies_come_from_the_registry() -> None:
    from andreas.config import load_settings

    offered = policies.manager_policies()
    assert {"rg", "pr", "greedy", "fifo", "ojpap"} <= set(offered)
    assert "milp" not in offered and "dp-wct" not in offered
    with pytest.raises(InputError, match="^ANDREAS_POLICY must be one of " + ", ".join(offered)):
        load_settings({"ANDREAS_POLICY": "milp", "ANDREAS_CONFIG": ""})


@pytest.mark.parametrize(("policy", "options", "match"), [
    ("fifo", {"iterations": 5}, "iterations: not an option of policy fifo"),
    ("milp", {"order": "pressure"}, "order: not an option of policy milp"),
    ("rg", {"population": 5}, "population: not an option of policy rg"),
    ("first-fit", {"state": {}}, "state: not an option of policy first-fit"),
    ("greedy", {"order": "random"}, "order: must be one of wspt-late, pressure"),
    ("rg", {"iterations": 0}, r"iterations: must be an integer in \[1, 100000\]"),
    ("milp", {"mip_gap": 1.0}, r"mip_gap: must be a number in \[0, 1\)"),
    ("ga", {"backfill": 1}, "backfill: must be true or false"),
])
def test_decide_refuses_what_a_policy_does_not_take(policy, options, match) -> None:
    snap = random_snapshot(np.random.default_rng(0), 2, 3)
    with pytest.raises(InputError, match=match):
        optimizer.decide(snap, np.random.default_rng(0), policy, **options)


@pytest.mark.parametrize(("args", "line"), [
    (["optimize", EXAMPLE, "--policy", "fifo", "--iterations", "5"],
     "andreas: error: --iterations: not an option of policy fifo (taken by: rg, pr, horizon, ga-energy)"),
    (["optimize", EXAMPLE, "--policy", "edf", "--floor"],
     "andreas: error: --floor: not an option of policy edf"),
    (["optimize", EXAMPLE, "--policy", "greedy", "--time-limit-s", "5"],
     "andreas: error: --time-limit-s: not an option of policy greedy"),
    (["compare", EXAMPLE, "--policies", "fifo,edf", "--iterations", "5"],
     "andreas: error: --iterations: not an option of policies fifo, edf"),
    (["simulate", "--policies", "fifo", "--ga-population", "5"],
     "andreas: error: --ga-population: not an option of policy fifo (taken by: ga, ga-energy)"),
])
def test_an_option_no_policy_takes_is_one_line_and_exit_2(args, line) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_an_option_one_of_several_policies_takes_goes_to_that_one() -> None:
    result = CliRunner().invoke(main, ["compare", EXAMPLE, "--policies", "fifo,rg",
                                       "--iterations", "5", "--json"])
    assert result.exit_code == 0, result.output


def test_policies_command_shows_a_policy_s_options() -> None:
    result = CliRunner().invoke(main, ["policies", "ga"])
    assert result.exit_code == 0, result.output
    for word in ("rigid tasks", "population = 100", "fitness = consolidated", "decide_ga"):
        assert word in result.output
