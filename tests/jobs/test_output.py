"""What the job commands show (issue 34): epochs as the agents measure them, the reasons
of past decisions, costs that never read 0.00, and output to a pipe that is whole,
plain and ends quietly when the reader goes away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import insert

from andreas.console import money
from andreas.store.models import Decision, JobState
from andreas.store.samples import JobEnergyRow, insert_epoch_events, insert_job_energy
from andreas.store.tables import jobs as jobs_table
from tests.jobs.conftest import NOW, run_cli
from tests.store.helpers import add_job, add_node, unique

ROOT = Path(__file__).resolve().parents[2]


def test_money_keeps_three_significant_digits_below_one():
    assert [money(x) for x in (0.0, 0.00123456, 0.0456, 0.5, 0.996, 1.5, 1234.567, None)] == [
        "0.00", "0.00123", "0.0456", "0.500", "1.00", "1.50", "1234.57", "-"]
    assert money(1234567.891, grouping=True) == "1,234,567.89"
    assert money(1.23e-9) == "0.00000000123"


def test_queue_shows_measured_epochs_and_small_costs(store, db_url):
    """EPOCHS came from jobs.epochs_done, written only at a rescheduling (up to an hour
    later); SO FAR printed 0.00 for a job that had used a few Wh."""
    name, node_id, _ = add_node(store, 2)
    job = add_job(store, id=unique("live"), state=JobState.RUNNING, epochs=10, due_s=NOW + 9e3,
                  submit_s=NOW - 600)
    with store.session() as s:
        insert_epoch_events(s, [dict(job_id=job, attempt=1, epoch=e, start_s=NOW - 500 + 60 * e,
                                     end_s=NOW - 450 + 60 * e, node_id=node_id,
                                     gpu_type="V100", gpus=1) for e in (1, 2, 3, 4)])
        insert_job_energy(s, [JobEnergyRow(job, 1, NOW - 120, node_id, 60.0, 1,
                                           18_000_000, None)])          # 5 Wh
    r = run_cli(db_url, "queue")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(job))
    assert " 4/10 " in line
    assert "0.00114" in line and " 0.00 " not in line        # 0.005 kWh x 1.33 x 0.172
    shown = run_cli(db_url, "show", job)
    assert "4/10" in shown.stdout


def test_show_lists_what_past_decisions_did_and_why(store, db_url):
    job = add_job(store, id=unique("hist"), state=JobState.QUEUED, submit_s=NOW - 900,
                  due_s=NOW + 3600)
    other = unique("other")
    with store.session() as s:
        for i, (kind, reason) in enumerate([("wait", "wait: no free GPUs")] * 3
                                           + [("start", "start: cheapest config meeting due")]):
            s.add(Decision(t=NOW - 800 + 100 * i, trigger="submit" if i == 0 else "period",
                           policy="rg", objective=1.0, objective_name="f_obj", seconds=0.1,
                           plan={"actions": [
                               {"job": other, "kind": "start", "node": "x", "gpus": 1,
                                "reason": "not this one"},
                               {"job": job, "kind": kind, "node": "gpu1" if i == 3 else None,
                                "gpus": 2 if i == 3 else None, "reason": reason}]}))
    r = run_cli(db_url, "show", job)
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "start: cheapest config meeting due" in text and "gpu1" in text
    wait = next(ln for ln in text.splitlines() if "wait: no free GPUs" in ln)
    assert "(x3)" in wait                          # three equal decisions, one row
    assert "not this one" not in text
    assert text.index("cheapest config") < text.index("no free GPUs")     # newest first


def test_piped_tables_are_whole_and_plain(store, db_url):
    long_id = "a" * 60 + unique("-w")[-4:]
    add_job(store, id=long_id, state=JobState.QUEUED, due_s=NOW + 3600, submit_s=NOW)
    r = run_cli(db_url, "queue")                     # CliRunner's output is no terminal
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(long_id))
    assert len(line) > 120                           # not cut at 120 columns, not folded
    assert not any(ch in r.stdout for ch in "│┃━─┏┡└")   # no box drawing for programs
    narrow = run_cli(db_url, "queue", env={"COLUMNS": "70"})
    table = [ln for ln in narrow.stdout.splitlines() if not ln.startswith("costs:")]
    assert max(len(ln) for ln in table) <= 70


def test_a_closed_pipe_ends_the_command_quietly(store, db_url):
    with store.begin() as conn:
        conn.execute(insert(jobs_table), [
            dict(id=f"pipe-{i:05d}-{'x' * 40}", image="r/x:1", command=[], env={}, epochs=1,
                 epochs_done=0, submit_s=NOW, due_s=NOW + 3600 + i, weight=0.1,
                 application="x", grace_s=60.0, state="queued", failures=0)
            for i in range(1500)])             # far more than a pipe's 64 KiB buffer
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANDREAS_")},
           "ANDREAS_DB_URL": db_url, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(f"{sys.executable} -m andreas queue | head -n 2", shell=True,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.stderr == ""                          # it said "andreas: error: Broken pipe"
    assert len(out.stdout.splitlines()) == 2
