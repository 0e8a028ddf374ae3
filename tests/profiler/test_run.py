"""Profiling runs end to end with a scripted fake engine, on SQLite and MariaDB: the node is
marked while the containers run and restored afterwards (also on errors and Ctrl-C),
app_profiles / app_models rows are written, containers removed; bad input is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from andreas.cli import main
from andreas.errors import InputError
from andreas.executor.errors import ImageNotFound
from andreas.job import valid_job_id
from andreas.profiler.run import ProfileRequest, durations, profile_application
from andreas.store import AppModel, AppProfile, JobAttempt, Node
from tests.manager.helpers import add_job, add_node
from tests.profiler.fakes import ScriptedExecutor

NOW = 1_800_000_000.0
T1, S = 100.0, 0.2


def amdahl(g: int, epoch: int) -> float:
    """The law, with a warm-up first epoch 50 % slower."""
    base = T1 * (S + (1 - S) / g)
    return base * 1.5 if epoch == 1 else base


def flag(store, name: str) -> bool:
    with store.session() as s:
        return bool(s.scalar(select(Node.profiling).where(Node.name == name)))


def rows(store, app: str = "newapp") -> dict[int, tuple[float, str, int]]:
    with store.session() as s:
        return {g: (t, src, n) for g, t, src, n in s.execute(
            select(AppProfile.gpus, AppProfile.epoch_time_s, AppProfile.source,
                   AppProfile.samples).where(AppProfile.application == app))}


def run(store, executor, **kw):
    request = ProfileRequest(image="registry.example/new:1", app="newapp",
                             **{"epochs": 3, **kw})
    return profile_application(store, executor, request, clock=lambda: NOW,
                               rng=np.random.default_rng(1))


def test_named_node_is_profiled_marked_and_restored(pstore):
    add_node(pstore, "p", gpus=4)
    add_node(pstore, "other", gpus=2)
    seen = []
    fake = ScriptedExecutor(amdahl, on_start=lambda node, req: seen.append(
        (node.name, flag(pstore, "p"), flag(pstore, "other"))))
    [result] = run(pstore, fake, nodes=("p",))
    assert seen == [("p", True, False)] * 4                 # marked while it ran
    assert not flag(pstore, "p")                            # and restored
    assert [r.g for r in result.runs] == [1, 2, 3, 4] and result.max_gpus == 4
    assert all(r.status == "ok" and r.error == "" and r.exit_code == 0 for r in result.runs)
    for r in result.runs:                                   # warm-up dropped, median kept
        assert r.epoch_s == pytest.approx([amdahl(r.g, e) for e in (1, 2, 3)])
        assert r.kept_s == pytest.approx([amdahl(r.g, 2)] * 2)
    got = rows(pstore)
    assert set(got) == {1, 2, 3, 4}
    for g, (t, src, n) in got.items():
        assert (src, n) == ("profiler", 2) and t == pytest.approx(amdahl(g, 2))
    with pstore.session() as s:
        m = s.get(AppModel, ("newapp", "V100"))
    assert (m.model, m.source, list(m.gpu_counts), m.samples) == ("amdahl", "profiler",
                                                                  [1, 2, 3, 4], 8)
    assert m.t1_s == pytest.approx(T1) and m.serial_fraction == pytest.approx(S)
    assert m.mape == pytest.approx(0, abs=1e-6) and m.updated_s == NOW
    assert fake.running() == [] and fake.nodes["p"] == {}    # containers removed
    for req, g in zip(fake.requests, (1, 2, 3, 4)):
        assert valid_job_id(req.job_id) and req.job_id.startswith(f"profile-newapp-p-g{g}-")
        assert req.gpu_uuids == tuple(f"GPU-fake-p-{i}" for i in range(g))
        assert req.fake_gpus and req.epochs == 3 and req.attempt == 1
    assert len({r.job_id for r in fake.requests}) == 4


def test_marked_nodes_one_per_type_and_flags_kept(pstore):
    add_node(pstore, "a", gpus=1, profiling=True)
    add_node(pstore, "b", gpus=2, profiling=True)           # V100 with more GPUs: chosen
    add_node(pstore, "t", gpus=1, gpu_type="T4", profiling=True, fake=False)
    add_node(pstore, "prod", gpus=4)
    fake = ScriptedExecutor(amdahl)
    results = run(pstore, fake, gpus=(1,))
    assert [(r.node, r.gpu_type) for r in results] == [("b", "V100"), ("t", "T4")]
    assert flag(pstore, "a") and flag(pstore, "b") and flag(pstore, "t")   # left as found
    assert not flag(pstore, "prod")
    assert [q.fake_gpus for q in fake.requests] == [True, False]
    fit = results[0].fit                                    # one g: s is a prior, low confidence
    assert fit.prior and fit.mape is None and fit.gpu_counts == (1,)


def test_gpus_held_by_a_pinned_job_are_not_used(pstore):
    node_id = add_node(pstore, "p", gpus=3)
    add_job(pstore, "pinned")
    with pstore.session() as s:
        s.add(JobAttempt(job_id="pinned", attempt=1, node_id=node_id, gpu_ids=[0],
                         start_s=NOW - 60))
    fake = ScriptedExecutor(amdahl)
    [result] = run(pstore, fake, nodes=("p",))
    assert [q.gpu_uuids for q in fake.requests] == [("GPU-fake-p-1",),
                                                     ("GPU-fake-p-1", "GPU-fake-p-2")]
    assert result.runs[2].status == "skipped" and "free GPUs" in result.runs[2].error
    assert set(rows(pstore)) == {1, 2}


def test_failures_timeouts_and_silence_are_reported_not_stored(pstore):
    add_node(pstore, "p", gpus=4)
    fake = ScriptedExecutor(amdahl, behaviour={2: "fail", 3: "hang", 4: "silent"})
    [result] = run(pstore, fake, nodes=("p",), timeout_s=0.3)
    by_g = {r.g: r for r in result.runs}
    assert by_g[1].status == "ok"
    assert by_g[2].status == "failed" and by_g[2].error.startswith("exit 1")
    assert by_g[3].status == "timeout" and by_g[3].exit_code == 137
    assert by_g[3].kept_s == pytest.approx([amdahl(3, 1)])  # the epoch it finished counts
    assert by_g[4].status == "failed" and "no ANDREAS-PROGRESS" in by_g[4].error
    assert set(rows(pstore)) == {1, 3}
    assert fake.nodes["p"] == {} and not flag(pstore, "p")
    assert result.fit.gpu_counts == (1, 3)


def test_interrupt_removes_containers_and_restores_the_flag(pstore):
    add_node(pstore, "p", gpus=2)
    fake = ScriptedExecutor(amdahl, behaviour={1: "hang"})

    def ctrl_c(event):
        if event.kind == "epoch":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        profile_application(pstore, fake, ProfileRequest(image="i", app="newapp",
                                                         nodes=("p",)),
                            on_event=ctrl_c, rng=np.random.default_rng(0))
    assert fake.nodes["p"] == {} and fake.calls_of("kill")
    assert not flag(pstore, "p") and rows(pstore) == {}


def test_image_errors_abort_and_restore(pstore):
    add_node(pstore, "p", gpus=2)
    fake = ScriptedExecutor(amdahl)
    fake.missing_images.add("registry.example/new:1")
    with pytest.raises(ImageNotFound):
        run(pstore, fake, nodes=("p",))
    assert not flag(pstore, "p") and rows(pstore) == {}


@pytest.mark.parametrize("kw, message", [
    (dict(), "node: no profiling node"),
    (dict(nodes=("nope",)), "node 'nope': no such node"),
    (dict(nodes=("down",)), "node 'down': node is down"),
    (dict(nodes=("p",), gpus=(1, 3)), "gpus 3: node p has 2 usable GPUs"),
    (dict(nodes=("p",), epochs=0), "epochs 0"),
])
def test_bad_input_is_one_error_and_changes_nothing(pstore, kw, message):
    from andreas.store import NodeState

    add_node(pstore, "p", gpus=2)
    add_node(pstore, "down", gpus=2, state=NodeState.DOWN)
    fake = ScriptedExecutor(amdahl)
    with pytest.raises(InputError, match="^" + message.replace("(", r"\(")):
        run(pstore, fake, **kw)
    assert fake.requests == [] and not flag(pstore, "p")


def test_durations_without_start_lines_use_the_previous_end():
    from andreas.job import ProgressEvent

    ev = [ProgressEvent(job_id="j", epoch=e, of=4, event="end", t=10.0 * e + e * e)
          for e in (1, 2, 3, 4)]
    assert durations(ev) == ((13.0, 15.0, 17.0), (15.0, 17.0))


# ------------------------------------------------------------------------------ CLI


def cli(db_url: str, *args: str, executor=None):
    obj = {"clock": lambda: NOW}
    if executor is not None:
        obj["executor_factory"] = lambda settings: executor
    env = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": ""}
    return CliRunner().invoke(main, list(args), obj=obj, env=env, catch_exceptions=False)


def test_cli_profiles_and_prints_the_table(pstore, db_url):
    add_node(pstore, "p", gpus=4)
    fake = ScriptedExecutor(amdahl)
    result = cli(db_url, "profile", "registry.example/new:1", "--app", "newapp", "--node", "p",
                 "--gpus", "1,2,4", "--", "python", "-u", "train.py", executor=fake)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "newapp on p (V100)" in out and "model V100: epoch(g) = 100.00 s" in out
    assert "not run" in out                                  # g = 3: predicted only
    assert [q.command for q in fake.requests] == [("python", "-u", "train.py")] * 3
    assert set(rows(pstore)) == {1, 2, 4} and not flag(pstore, "p")
    js = cli(db_url, "profile", "registry.example/new:1", "--app", "newapp", "--node", "p",
             "--gpus", "1,2", "--json", executor=ScriptedExecutor(amdahl))
    [doc] = json.loads(js.output)
    assert doc["node"] == "p" and [r["status"] for r in doc["gpus"]] == ["ok", "ok", "not run",
                                                                         "not run"]
    assert doc["gpus"][3]["confidence"] < doc["gpus"][1]["confidence"]


@pytest.mark.parametrize("args, message", [
    (["--app", "b@d"], "--app 'b@d'"),
    (["--app", "x", "--gpus", "1,,2"], "--gpus '1,,2'"),
    (["--app", "x", "--gpus", "0"], "--gpus '0'"),
    (["--app", "x", "--epochs", "0"], "--epochs 0"),
    (["--app", "x", "--node", "p", "--image-is-bad"], "IMAGE 'bad image'"),
    (["--app", "x"], "--node: no profiling node"),
    (["--app", "x", "--node", "p", "--gpus", "8"], "--gpus 8: node p has 2 usable GPUs"),
])
def test_cli_bad_input_exit_2(pstore, db_url, args, message):
    add_node(pstore, "p", gpus=2)
    fake = ScriptedExecutor(amdahl)
    image = "img:1"
    if "--image-is-bad" in args:          # issue 16: a bad reference exited 0
        image, args = "bad image", [a for a in args if a != "--image-is-bad"]
    result = cli(db_url, "profile", image, *args, executor=fake)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"andreas: error: {message}")
    assert fake.requests == [] and not flag(pstore, "p")


def test_cli_refresh(pstore, db_url):
    from andreas.store import insert_epoch_events

    n = add_node(pstore, "n", gpus=2)
    add_job(pstore, "j", application="newapp")
    with pstore.session() as s:
        insert_epoch_events(s, [dict(job_id="j", attempt=1, epoch=e, start_s=NOW - 100 * e,
                                     end_s=NOW - 100 * e + 50, node_id=n, gpu_type="V100",
                                     gpus=2) for e in (1, 2, 3)])
    result = cli(db_url, "profile-refresh", "--json")
    assert result.exit_code == 0, result.output
    [doc] = json.loads(result.output)
    assert doc["application"] == "newapp" and doc["measured_gpus"] == [2]
    assert rows(pstore)[2] == (50.0, "measured", 3)
    with pstore.session() as s:
        s.execute(update(Node).values(profiling=False))
