"""Reports say where an agent was not sampling (``agent_gaps``): one line per gap in the
report, and --validate does not compare a slot whose energy was not measured (a charged
gap is compared, with a note). Hand-made rows, no database; the rows' way into the store
is tests/agents_daemon/test_agent_gap.py."""

from __future__ import annotations

from dataclasses import replace

from andreas.accounting import Prices
from andreas.report import formats
from andreas.report.compute import build_report
from andreas.report.render import render
from andreas.report.validate import validate
from andreas.store.decisions import DecisionInfo
from andreas.store.window import AgentGapInfo
from tests.report.test_validate_edges import PLAN, T, data

PRICES = Prices(pue=1.0, price_per_kwh=1.0)


def decisions():
    return (DecisionInfo(id=1, t_s=T, trigger="start", policy="rg", plan=PLAN),
            DecisionInfo(id=2, t_s=T + 60, trigger="submit", policy="rg", plan=PLAN))


def test_an_unmeasured_gap_takes_its_slot_out_of_the_comparison_and_is_named():
    hole = AgentGapInfo(node_id=1, start_s=T + 70, end_s=T + 102, charged=False,
                        reason="agent not running for 32 s; GPU GPU-0: no energy counter")
    d = replace(data(*decisions()), gaps=(hole,))
    v = validate(d)
    assert v.slots[0].deviation_pct is not None and v.slots[0].note == ""
    assert v.slots[1].deviation_pct is None
    assert v.slots[1].note == "agent of a not running 32 s: not measured"
    assert v.compared == 1
    report = build_report(d, PRICES)
    (line,) = formats.gap_lines(report)
    assert line.startswith("agent of a not running ")
    assert "NOT measured" in line and "no energy counter" in line
    out = render(d, PRICES)
    assert any("agent of a not running" in x for x in out.lines)
    assert '"agent_gaps"' in render(d, PRICES, fmt="json").text


def test_a_charged_gap_is_compared_with_a_note():
    charged = AgentGapInfo(node_id=1, start_s=T + 70, end_s=T + 102, charged=True,
                           reason="agent not running for 32 s; GPU energy of 2 GPU(s) from "
                                  "their energy counters")
    v = validate(replace(data(*decisions()), gaps=(charged,)))
    assert v.slots[1].deviation_pct is not None
    assert v.slots[1].note == "agent of a not running 32 s: energy from the GPU counters"
    (line,) = formats.gap_lines(build_report(replace(data(*decisions()), gaps=(charged,)),
                                             PRICES))
    assert "charged from the energy counters" in line
