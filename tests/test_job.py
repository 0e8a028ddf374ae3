"""The job contract (the andreas/job/ package): progress lines, environment, labels,
checkpoints, the epoch reporter, SIGTERM, the framework callbacks (duck-typed and real
bases), and that the package stays stdlib-only and can be copied into an image."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from andreas import job
from andreas.job import (EXIT_PREEMPTED, Checkpoint, EpochReporter, GracefulStop, JobEnv,
                         KerasProgressCallback, LightningProgressCallback, ProgressEvent,
                         atomic_write, completed_epochs, container_labels, format_progress,
                         job_environment, job_labels, keras_callback, latest_checkpoint,
                         lightning_callback, parse_progress, read_manifest, resume_epoch,
                         save_checkpoint, write_manifest)

ROOT = Path(__file__).resolve().parents[1]
LINE = "ANDREAS-PROGRESS v1 job=j00042 epoch=3 of=10 event=end t=1716212345.123456 loss=0.4121"


# --- progress lines ------------------------------------------------------------------

def test_format_is_the_documented_line() -> None:
    line = format_progress("j00042", 3, 10, "end", t=1716212345.123456,
                           metrics={"loss": 0.4121})
    assert line == LINE
    assert format_progress("j1", 1, 2, "start", t=5) == \
        "ANDREAS-PROGRESS v1 job=j1 epoch=1 of=2 event=start t=5.000000"


def test_parse_the_documented_line() -> None:
    ev = parse_progress(LINE)
    assert ev == ProgressEvent(job_id="j00042", epoch=3, of=10, event="end",
                               t=1716212345.123456, metrics={"loss": 0.4121})
    assert ev.is_end and not ev.is_start and ev.version == 1
    assert ev.line() == LINE


@pytest.mark.parametrize("prefix", [
    "", "2026-11-22T13:50:17.372208480Z ", "[2024-05-20 10:00:00,123] INFO train: ",
    "epoch 3 100%|#####| 50/50\r", "stderr: ", "\t", "xx ANDREAS-PROGRESS v1 job=a broken\r",
])
def test_parse_tolerates_text_before_the_marker(prefix: str) -> None:
    assert parse_progress(prefix + LINE) == parse_progress(LINE)
    assert parse_progress((prefix + LINE + "\r\n").encode()) == parse_progress(LINE)


def test_parse_accepts_any_field_order_and_metric_forms() -> None:
    ev = parse_progress("ANDREAS-PROGRESS v1 t=2.5 event=start of=3 epoch=1 job=a.b-c_d:e@f+g "
                        "acc=1e-05 val.loss=nan x=-inf y=+.5")
    assert ev is not None and ev.job_id == "a.b-c_d:e@f+g" and ev.t == 2.5
    assert ev.metrics["acc"] == 1e-05 and math.isnan(ev.metrics["val.loss"])
    assert ev.metrics["x"] == -math.inf and ev.metrics["y"] == 0.5


@pytest.mark.parametrize("line", [
    None, 42, b"\xff\xfe", "", "hello world", "ANDREAS-PROGRESS", "ANDREAS-PROGRESS v1",
    LINE.replace("v1", "v2"),                          # a later format: not ours to read
    LINE.replace("v1", "V1"),
    LINE.replace("ANDREAS-PROGRESS", "XANDREAS-PROGRESS"),
    LINE.replace("ANDREAS-PROGRESS", "ANDREAS-PROGRESS-ish"),
    LINE.replace("epoch=3", "epoch=three"),
    LINE.replace("epoch=3", "epoch=0"),
    LINE.replace("epoch=3", "epoch=-3"),
    LINE.replace("epoch=3", "epoch=3.0"),
    LINE.replace("of=10", "of=0"),
    LINE.replace("of=10 ", ""),                        # a required field missing
    LINE.replace("event=end", "event=stop"),
    LINE.replace("t=1716212345.123456", "t=1716212345,1"),
    LINE.replace("t=1716212345.123456", "t=1.7e9"),
    LINE.replace("t=1716212345.123456", "t=-5.0"),
    LINE.replace("t=1716212345.123456", "t=nan"),
    LINE.replace("t=1716212345.123456", "t="),
    LINE.replace("job=j00042", "job="),
    LINE.replace("job=j00042", "job=a/b"),
    LINE.replace("job=j00042", "job=" + "x" * 65),
    LINE + " job=j2",                                  # a field twice
    LINE + " loss=1",                                  # a metric twice
    LINE + " trailing words",
    LINE + " loss2=abc",
    LINE + " 2x=1",
    LINE[:LINE.index(" t=") + 2],                      # cut in the middle of a token
    LINE.replace(" ", "  ").replace("v1", "v1 ="),
    "ANDREAS-PROGRESS v1 job=j epoch=1 of=1 event=start t=1" + "\x00",
])
def test_parse_rejects_everything_else_without_raising(line: object) -> None:
    assert parse_progress(line) is None


def test_parse_reads_the_last_marker() -> None:
    first = LINE.replace("epoch=3", "epoch=2")
    assert parse_progress(first + " " + LINE).epoch == 3
    assert parse_progress(LINE + " " + first).epoch == 2
    assert parse_progress("ANDREAS-PROGRESS v1 job=x\r" + LINE).epoch == 3


@pytest.mark.parametrize("kwargs, field", [
    (dict(job_id="", epoch=1, of=1, event="start"), "job"),
    (dict(job_id="a b", epoch=1, of=1, event="start"), "job"),
    (dict(job_id="j", epoch=0, of=1, event="start"), "epoch"),
    (dict(job_id="j", epoch=True, of=1, event="start"), "epoch"),
    (dict(job_id="j", epoch=1.0, of=1, event="start"), "epoch"),
    (dict(job_id="j", epoch=1, of=0, event="start"), "of"),
    (dict(job_id="j", epoch=1, of=1, event="begin"), "event"),
    (dict(job_id="j", epoch=1, of=1, event="end", t=math.nan), "t"),
    (dict(job_id="j", epoch=1, of=1, event="end", t=-1.0), "t"),
    (dict(job_id="j", epoch=1, of=1, event="end", metrics={"t": 1.0}), "metric"),
    (dict(job_id="j", epoch=1, of=1, event="end", metrics={"bad name": 1.0}), "metric"),
    (dict(job_id="j", epoch=1, of=1, event="end", metrics={"loss": "high"}), "loss"),
    (dict(job_id="j", epoch=1, of=1, event="end", metrics={"ok": True}), "ok"),
])
def test_format_refuses_what_the_reader_would_drop(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        format_progress(**kwargs)


def test_format_defaults_t_to_now() -> None:
    import time
    before = time.time()
    ev = parse_progress(format_progress("j", 1, 1, "start"))
    assert before - 1e-6 <= ev.t <= time.time() + 1e-6


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,10}", fullmatch=True).filter(
    lambda n: n not in ("job", "epoch", "of", "event", "t"))


@given(job_id=st.from_regex(r"[A-Za-z0-9._\-:@+]{1,64}", fullmatch=True),
       epoch=st.integers(1, 10**9), of=st.integers(1, 10**9),
       event=st.sampled_from(["start", "end"]),
       t=st.floats(0, 4e9, allow_nan=False),
       metrics=st.dictionaries(_names, st.floats(allow_nan=False), max_size=4),
       prefix=st.text(max_size=30).filter(lambda s: "\n" not in s and "\r" not in s))
def test_round_trip(job_id, epoch, of, event, t, metrics, prefix) -> None:
    line = format_progress(job_id, epoch, of, event, t=t, metrics=metrics)
    ev = parse_progress(prefix + " " + line)
    assert ev is not None
    assert (ev.job_id, ev.epoch, ev.of, ev.event) == (job_id, epoch, of, event)
    assert ev.t == float(f"{t:.6f}") and ev.metrics == metrics


@given(st.text(max_size=200))
def test_parse_never_raises_on_text(text: str) -> None:
    parse_progress(text)
    parse_progress("ANDREAS-PROGRESS v1 " + text)


@given(st.binary(max_size=200))
def test_parse_never_raises_on_bytes(data: bytes) -> None:
    parse_progress(data)
    parse_progress(b"ANDREAS-PROGRESS v1 " + data)


# --- environment and labels ----------------------------------------------------------

def test_environment_round_trip(tmp_path: Path) -> None:
    env = job_environment("j7", tmp_path, 12, 2)
    assert env == {"ANDREAS_JOB_ID": "j7", "ANDREAS_CHECKPOINT_DIR": str(tmp_path),
                   "ANDREAS_EPOCHS": "12", "ANDREAS_RESTART_COUNT": "2"}
    assert JobEnv.from_environ(env) == JobEnv(job_id="j7", checkpoint_dir=tmp_path, epochs=12,
                                              restart_count=2)
    assert JobEnv.from_environ({}) == JobEnv(job_id=None, checkpoint_dir=None, epochs=None,
                                             restart_count=0)


@pytest.mark.parametrize("name, value", [("ANDREAS_EPOCHS", "ten"), ("ANDREAS_EPOCHS", "0"),
                                         ("ANDREAS_RESTART_COUNT", "-1"),
                                         ("ANDREAS_JOB_ID", "a b")])
def test_environment_errors_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{name}.*{value!r}"):
        JobEnv.from_environ({name: value})


def test_job_environment_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="job id"):
        job_environment("", "/c", 1)
    with pytest.raises(ValueError, match="epochs"):
        job_environment("j", "/c", 0)
    with pytest.raises(ValueError, match="restart_count"):
        job_environment("j", "/c", 1, -1)


def test_labels_round_trip() -> None:
    labels = container_labels("j7", 3, ["GPU-aaa", "GPU-bbb"])
    assert labels == {"andreas.job": "j7", "andreas.attempt": "3",
                      "andreas.gpus": "GPU-aaa,GPU-bbb"}
    assert job_labels(labels) == job.JobLabels(job_id="j7", attempt=3,
                                               gpu_uuids=("GPU-aaa", "GPU-bbb"))
    assert job_labels(container_labels("j7", 0)).gpu_uuids == ()
    assert job_labels({"other": "x"}) is None and job_labels(None) is None
    assert job_labels({"andreas.job": "j", "andreas.attempt": " 1 ",
                       "andreas.gpus": " GPU-a , ,GPU-b"}).gpu_uuids == ("GPU-a", "GPU-b")


@pytest.mark.parametrize("labels, label", [
    ({"andreas.job": "a b", "andreas.attempt": "0"}, "andreas.job"),
    ({"andreas.job": "j"}, "andreas.attempt"),
    ({"andreas.job": "j", "andreas.attempt": "x"}, "andreas.attempt"),
    ({"andreas.job": "j", "andreas.attempt": "-1"}, "andreas.attempt"),
])
def test_bad_labels_name_the_label(labels: dict, label: str) -> None:
    with pytest.raises(ValueError, match=label):
        job_labels(labels)


def test_container_labels_refuse_bad_values() -> None:
    with pytest.raises(ValueError):
        container_labels("j", -1)
    with pytest.raises(ValueError):
        container_labels("j", 0, ["GPU-a,GPU-b"])
    with pytest.raises(ValueError):
        container_labels("", 0)


# --- checkpoints ---------------------------------------------------------------------

def test_no_checkpoint_means_epoch_one(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None and latest_checkpoint(None) is None
    assert resume_epoch(tmp_path) == 1 and resume_epoch(None) == 1
    assert completed_epochs(tmp_path / "missing") == 0


def test_save_checkpoint_writes_file_and_manifest(tmp_path: Path) -> None:
    c = save_checkpoint(tmp_path, 1, b"one", t=100.0)
    assert c == Checkpoint(epoch=1, time=100.0, path=tmp_path / "epoch-000001.ckpt")
    assert c.path.read_bytes() == b"one"
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert doc == {"format": "andreas-checkpoint/1", "epoch": 1, "time": 100.0,
                   "path": "epoch-000001.ckpt"}       # relative: the dir moves between nodes
    save_checkpoint(tmp_path, 2, "two", t=200.0)
    save_checkpoint(tmp_path, 3, lambda p: p.write_text("three"), t=300.0)
    assert latest_checkpoint(tmp_path) == Checkpoint(epoch=3, time=300.0,
                                                     path=tmp_path / "epoch-000003.ckpt")
    assert resume_epoch(tmp_path) == 4 and completed_epochs(tmp_path) == 3
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["epoch-000002.ckpt", "epoch-000003.ckpt", "latest.json"]   # keep=2


def test_manifest_survives_a_move_of_the_directory(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "a", 4, b"x", t=1.0)
    (tmp_path / "a").rename(tmp_path / "b")
    assert read_manifest(tmp_path / "b").path == tmp_path / "b" / "epoch-000004.ckpt"


def test_directory_checkpoints_and_suffix(tmp_path: Path) -> None:
    def writer(p: Path) -> None:
        assert p.name.endswith(".keras") and p.name.startswith(".")   # Keras wants the suffix
        p.mkdir()
        (p / "weights").write_bytes(b"w")

    save_checkpoint(tmp_path, 1, writer, suffix=".keras", keep=None)
    save_checkpoint(tmp_path, 1, writer, suffix=".keras", keep=None)   # same epoch again
    save_checkpoint(tmp_path, 2, writer, suffix=".keras", keep=None)
    assert (tmp_path / "epoch-000001.keras" / "weights").read_bytes() == b"w"
    assert latest_checkpoint(tmp_path).path == tmp_path / "epoch-000002.keras"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_failing_writer_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, b"good", t=1.0)

    def broken(p: Path) -> None:
        p.write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        save_checkpoint(tmp_path, 2, broken)
    assert latest_checkpoint(tmp_path).epoch == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-000001.ckpt", "latest.json"]
    with pytest.raises(ValueError, match="created nothing"):
        save_checkpoint(tmp_path, 2, lambda p: None)


def test_crash_between_rename_and_manifest(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, b"one", t=1.0)
    atomic_write(tmp_path / "epoch-000002.ckpt", b"two")        # manifest not updated
    (tmp_path / ".epoch-000003.tmp-dead.ckpt").write_bytes(b"partial")   # a crash mid-write
    latest = latest_checkpoint(tmp_path)
    assert latest.epoch == 2 and latest.path.read_bytes() == b"two"
    save_checkpoint(tmp_path, 3, b"three")
    assert not (tmp_path / ".epoch-000003.tmp-dead.ckpt").exists()       # stale temp removed


@pytest.mark.parametrize("content", [
    "", "{", "[]", '{"epoch": 1}', '{"epoch": "1", "time": 1, "path": "epoch-000001.ckpt"}',
    '{"epoch": 0, "time": 1, "path": "epoch-000001.ckpt"}',
    '{"format": "other/1", "epoch": 1, "time": 1, "path": "epoch-000001.ckpt"}',
    '{"epoch": 1, "time": 1, "path": "gone.ckpt"}',
])
def test_a_bad_manifest_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / "epoch-000001.ckpt").write_bytes(b"x")
    (tmp_path / "latest.json").write_text(content)
    assert read_manifest(tmp_path) is None
    assert latest_checkpoint(tmp_path).epoch == 1            # found by its name


def test_write_manifest_for_a_framework_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "lightning-epoch=4.ckpt").write_bytes(b"x")
    c = write_manifest(tmp_path, 5, "lightning-epoch=4.ckpt", t=9.0)
    assert c.path == tmp_path / "lightning-epoch=4.ckpt"
    assert json.loads((tmp_path / "latest.json").read_text())["path"] == "lightning-epoch=4.ckpt"
    assert resume_epoch(tmp_path) == 6
    with pytest.raises(ValueError):
        save_checkpoint(tmp_path, 6, b"x", keep=0)


def test_atomic_write_never_shows_a_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "f.bin"
    atomic_write(target, b"a" * 100)
    atomic_write(target, b"b" * 100)
    assert target.read_bytes() == b"b" * 100
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


# --- reporter ------------------------------------------------------------------------

class FlushCounter(io.StringIO):
    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_reporter_prints_start_and_end_and_flushes() -> None:
    out = FlushCounter()
    clock = iter([10.0, 12.5, 13.0, 14.0])
    r = EpochReporter("j1", 2, stream=out, clock=lambda: next(clock))
    with r.epoch(1) as ep:
        assert out.getvalue().count("\n") == 1 and out.flushes == 1   # start is out already
        ep.metrics["loss"] = 0.5
    assert (ep.start_s, ep.end_s) == (10.0, 12.5)
    with pytest.raises(KeyError):
        with r.epoch(2):
            raise KeyError("boom")           # an epoch that did not finish: no end line
    events = [parse_progress(line) for line in out.getvalue().splitlines()]
    assert [(e.epoch, e.event, e.t) for e in events] == [(1, "start", 10.0), (1, "end", 12.5),
                                                          (2, "start", 13.0)]
    assert events[1].metrics == {"loss": 0.5} and out.flushes == 3


def test_reporter_defaults_from_the_environment(capsys: pytest.CaptureFixture) -> None:
    r = EpochReporter(environ={"ANDREAS_JOB_ID": "envjob", "ANDREAS_EPOCHS": "7"})
    r.start(1)
    ev = parse_progress(capsys.readouterr().out)
    assert (ev.job_id, ev.of) == ("envjob", 7)
    local = EpochReporter(environ={})
    assert local.job_id == "local"
    with pytest.raises(ValueError, match="ANDREAS_EPOCHS"):
        local.start(1)


# --- SIGTERM -------------------------------------------------------------------------

def test_graceful_stop_sets_a_flag_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with GracefulStop(announce=False) as stop:
        assert not stop.requested
        stop.exit_if_requested()                              # nothing yet
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5) and stop.requested and stop.signum == signal.SIGTERM
        with pytest.raises(SystemExit) as e:
            stop.exit_if_requested()
        assert e.value.code == EXIT_PREEMPTED == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_sigterm_checkpoints_and_exits_143(tmp_path: Path) -> None:
    """A real training process: SIGTERM mid-epoch, it finishes the epoch, checkpoints and
    exits 143; started again, it resumes after that epoch and completes with 0."""
    script = textwrap.dedent("""
        import os, sys, time
        from andreas import job
        env = job.JobEnv.from_environ()
        reporter = job.EpochReporter()
        stop = job.GracefulStop().install()
        for epoch in range(job.resume_epoch(env.checkpoint_dir), env.epochs + 1):
            with reporter.epoch(epoch) as ep:
                if epoch == 2 and env.restart_count == 0:
                    print("READY", flush=True)
                    stop.wait(30)
                ep.metrics["loss"] = 1.0 / epoch
                job.save_checkpoint(env.checkpoint_dir, epoch, str(epoch).encode())
            stop.exit_if_requested()
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               **job_environment("jsig", tmp_path, 4, 0))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("READY"):
            proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 143, proc.stderr.read()
    assert "signal 15" in proc.stderr.read()
    events = [parse_progress(x) for x in lines if parse_progress(x)]
    assert [(e.epoch, e.event) for e in events] == [(1, "start"), (1, "end"), (2, "start"),
                                                    (2, "end")]
    assert completed_epochs(tmp_path) == 2
    env.update(job_environment("jsig", tmp_path, 4, 1))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    events = [parse_progress(x) for x in done.stdout.splitlines()]
    assert [(e.epoch, e.event) for e in events] == [(3, "start"), (3, "end"), (4, "start"),
                                                    (4, "end")]
    assert latest_checkpoint(tmp_path).path.read_bytes() == b"4"


# --- framework callbacks -------------------------------------------------------------

def test_module_imports_no_framework() -> None:
    code = ("import sys, andreas.job; bad = [m for m in ('torch', 'tensorflow', 'keras', "
            "'lightning', 'pytorch_lightning', 'numpy') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    assert out.stdout.strip() == "[]"


def test_package_imports_nothing_from_andreas_outside_itself() -> None:
    code = ("import sys, andreas.job; print(' '.join(sorted(m for m in sys.modules "
            "if m.startswith('andreas'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    assert out.stdout.split() == ["andreas", "andreas.job", "andreas.job.callbacks",
                                  "andreas.job.checkpoint", "andreas.job.names",
                                  "andreas.job.progress", "andreas.job.signals"]


@pytest.mark.parametrize(("layout", "statement"), [("andreas/job", "from andreas import job"),
                                                   ("job", "import job")])
def test_a_copy_of_the_package_works_with_the_standard_library_alone(
        tmp_path: Path, layout: str, statement: str) -> None:
    """What an image does: copy the directory (as andreas/job/ or under any name) and
    import it with no site-packages at all (-S) and no environment (-I)."""
    shutil.copytree(ROOT / "andreas" / "job", tmp_path / layout,
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); {statement}; "
            "e = job.parse_progress(job.format_progress('j1', 2, 3, 'end', t=5)); "
            "print(e.epoch, e.t, job.__file__)")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, check=True)
    epoch, t, where = out.stdout.split()
    assert (epoch, t) == ("2", "5.0")
    assert where == str(tmp_path / layout / "__init__.py")


class FakeKerasModel:
    def __init__(self) -> None:
        self.stop_training = False
        self.saved: list[str] = []

    def save(self, path: str) -> None:
        assert path.endswith(".keras")
        Path(path).write_bytes(b"model")
        self.saved.append(path)


def drive_keras(cb: object, model: FakeKerasModel, epochs: int, initial: int = 0) -> None:
    """What keras.Model.fit does with a callback, for the hooks that matter."""
    cb.set_model(model)
    cb.set_params({"epochs": epochs, "steps": 2, "verbose": 0})
    cb.on_train_begin({})
    for epoch in range(initial, epochs):
        cb.on_epoch_begin(epoch, {})
        for step in range(2):
            cb.on_train_batch_begin(step, {})
            cb.on_train_batch_end(step, {"loss": 0.1})
        cb.on_test_begin({})
        cb.on_test_end({})
        cb.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1), "accuracy": 0.5,
                                "note": "text", "flag": True})
        if model.stop_training:
            break
    cb.on_train_end({})


def test_keras_callback_duck_typed(tmp_path: Path) -> None:
    out = io.StringIO()
    stop = GracefulStop(announce=False)
    cb = KerasProgressCallback(EpochReporter("jk", stream=out), checkpoint_dir=tmp_path,
                               save=True, stop=stop)
    model = FakeKerasModel()
    original_end = cb.on_epoch_end

    def end_and_preempt(epoch: int, logs: dict | None = None) -> None:
        if epoch == 1:
            stop.request()               # SIGTERM during the second epoch
        original_end(epoch, logs)

    cb.on_epoch_end = end_and_preempt
    drive_keras(cb, model, epochs=5)
    events = [parse_progress(x) for x in out.getvalue().splitlines()]
    assert [(e.epoch, e.event, e.of) for e in events] == [(1, "start", 5), (1, "end", 5),
                                                          (2, "start", 5), (2, "end", 5)]
    assert events[1].metrics == {"loss": 1.0, "accuracy": 0.5}
    assert model.stop_training and completed_epochs(tmp_path) == 2
    assert latest_checkpoint(tmp_path).path.name == "epoch-000002.keras"
    with pytest.raises(AttributeError):
        cb.not_a_hook  # noqa: B018


def test_keras_callback_resumes_with_initial_epoch(tmp_path: Path) -> None:
    out = io.StringIO()
    cb = KerasProgressCallback(EpochReporter("jk", 4, stream=out))
    drive_keras(cb, FakeKerasModel(), epochs=4, initial=completed_epochs(tmp_path) or 2)
    assert [parse_progress(x).epoch for x in out.getvalue().splitlines()] == [3, 3, 4, 4]


def test_keras_factory_subclasses_keras_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Callback:            # Keras 3: ``model`` is a read-only property over ``_model``
        def __init__(self) -> None:
            self.params = None
            self._model = None

        def set_params(self, params: dict) -> None:
            self.params = params

        def set_model(self, model: object) -> None:
            self._model = model

        @property
        def model(self) -> object:
            return self._model

        def on_train_begin(self, logs: dict | None = None) -> None: ...
        def on_train_end(self, logs: dict | None = None) -> None: ...
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None: ...
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None: ...
        def on_test_begin(self, logs: dict | None = None) -> None: ...
        def on_test_end(self, logs: dict | None = None) -> None: ...

    keras = types.ModuleType("keras")
    keras.callbacks = types.ModuleType("keras.callbacks")
    keras.callbacks.Callback = Callback
    monkeypatch.setitem(sys.modules, "keras", keras)
    monkeypatch.setitem(sys.modules, "keras.callbacks", keras.callbacks)
    out = io.StringIO()
    cb = keras_callback(EpochReporter("jk", stream=out))
    assert isinstance(cb, Callback)
    drive_keras(cb, FakeKerasModel(), epochs=2)
    assert len(out.getvalue().splitlines()) == 4


def test_keras_factory_falls_back_to_the_duck(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("keras", "keras.callbacks", "tensorflow", "tensorflow.keras",
                 "tensorflow.keras.callbacks"):
        monkeypatch.setitem(sys.modules, name, None)      # "not installed"
    assert type(keras_callback(EpochReporter("j", 1))) is KerasProgressCallback


class FakeTrainer:
    def __init__(self, max_epochs: int, rank_zero: bool = True) -> None:
        self.max_epochs = max_epochs
        self.current_epoch = 0
        self.should_stop = False
        self.is_global_zero = rank_zero
        self.callback_metrics: dict = {}

    def save_checkpoint(self, path: str) -> None:
        Path(path).write_bytes(b"lightning")


class Tensor:
    def __init__(self, v: float) -> None:
        self.v = v

    def item(self) -> float:
        return self.v


def drive_lightning(cb: object, trainer: FakeTrainer, module: object = None) -> None:
    cb.setup(trainer, module, stage="fit")
    cb.on_fit_start(trainer, module)
    cb.on_train_start(trainer, module)
    while trainer.current_epoch < trainer.max_epochs and not trainer.should_stop:
        cb.on_train_epoch_start(trainer, module)
        cb.on_train_batch_start(trainer, module, None, 0)
        cb.on_train_batch_end(trainer, module, None, None, 0)
        cb.on_validation_epoch_end(trainer, module)
        trainer.callback_metrics = {"train_loss": Tensor(0.25), "val_acc": 0.75,
                                    "bad": object()}
        cb.on_train_epoch_end(trainer, module)
        trainer.current_epoch += 1
    cb.on_train_end(trainer, module)
    cb.teardown(trainer, module, stage="fit")


def test_lightning_callback_duck_typed(tmp_path: Path) -> None:
    out = io.StringIO()
    stop = GracefulStop(announce=False)
    cb = LightningProgressCallback(EpochReporter("jl", stream=out), checkpoint_dir=tmp_path,
                                   save=True, stop=stop)
    trainer = FakeTrainer(max_epochs=4)
    original = cb.on_train_epoch_start

    def start_and_preempt(trainer: FakeTrainer, module: object) -> None:
        original(trainer, module)
        if trainer.current_epoch == 2:
            stop.request()

    cb.on_train_epoch_start = start_and_preempt
    drive_lightning(cb, trainer)
    events = [parse_progress(x) for x in out.getvalue().splitlines()]
    assert [(e.epoch, e.event, e.of) for e in events] == [
        (1, "start", 4), (1, "end", 4), (2, "start", 4), (2, "end", 4), (3, "start", 4),
        (3, "end", 4)]
    assert events[-1].metrics == {"train_loss": 0.25, "val_acc": 0.75}
    assert trainer.should_stop and trainer.current_epoch == 3
    assert latest_checkpoint(tmp_path).path.name == "epoch-000003.ckpt"
    assert cb.state_dict() == {} and cb.state_key == "LightningProgressCallback"


def test_callbacks_without_a_number_of_epochs_warn_and_go_on(
        capfd: pytest.CaptureFixture) -> None:
    out = io.StringIO()
    cb = LightningProgressCallback(EpochReporter("jl", stream=out, environ={}))
    drive_lightning(cb, FakeTrainer(max_epochs=2))        # the trainer's max_epochs is used
    assert [parse_progress(x).of for x in out.getvalue().splitlines()] == [2, 2, 2, 2]
    out = io.StringIO()
    cb = LightningProgressCallback(EpochReporter("jl", stream=out, environ={}))
    trainer = FakeTrainer(max_epochs=2)
    trainer.max_epochs = -1                               # Lightning: no limit
    for _ in range(2):
        cb.on_train_epoch_start(trainer, None)
        cb.on_train_epoch_end(trainer, None)
    keras = KerasProgressCallback(EpochReporter("jk", stream=out, environ={}))
    keras.set_params({"epochs": None})
    keras.on_epoch_begin(0)
    keras.on_epoch_end(0, {"loss": 1.0})
    assert out.getvalue() == ""
    assert capfd.readouterr().err.count("no progress lines") == 2          # once per callback


def test_lightning_callback_prints_on_rank_zero_only(tmp_path: Path) -> None:
    out = io.StringIO()
    cb = LightningProgressCallback(EpochReporter("jl", stream=out), checkpoint_dir=tmp_path,
                                   save=True)
    drive_lightning(cb, FakeTrainer(max_epochs=2, rank_zero=False))
    assert out.getvalue() == "" and latest_checkpoint(tmp_path) is None


def test_lightning_factory_subclasses_lightning_when_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Callback:
        @property
        def state_key(self) -> str:
            return "x"

        def setup(self, trainer, pl_module, stage) -> None: ...
        def teardown(self, trainer, pl_module, stage) -> None: ...
        def on_fit_start(self, trainer, pl_module) -> None: ...
        def on_train_start(self, trainer, pl_module) -> None: ...
        def on_train_end(self, trainer, pl_module) -> None: ...
        def on_train_batch_start(self, trainer, pl_module, batch, idx) -> None: ...
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx) -> None: ...
        def on_validation_epoch_end(self, trainer, pl_module) -> None: ...

    lightning = types.ModuleType("lightning")
    lightning.pytorch = types.ModuleType("lightning.pytorch")
    lightning.pytorch.Callback = Callback
    monkeypatch.setitem(sys.modules, "lightning", lightning)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", lightning.pytorch)
    out = io.StringIO()
    cb = lightning_callback(EpochReporter("jl", stream=out))
    assert isinstance(cb, Callback)
    drive_lightning(cb, FakeTrainer(max_epochs=2))
    assert len(out.getvalue().splitlines()) == 4
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    assert type(lightning_callback(EpochReporter("j", 1))) is LightningProgressCallback


def test_grace_label_round_trips_and_a_bad_one_is_named():
    """andreas.grace_s: the job's grace period, read by the agent's fence."""
    from andreas.job import container_labels, job_labels

    labels = container_labels("j", 2, ("GPU-a",), grace_s=12.5)
    assert labels["andreas.grace_s"] == "12.5"
    assert job_labels(labels).grace_s == 12.5
    assert job_labels(container_labels("j", 2)).grace_s is None
    for bad in ("nan", "-1", "inf", "x"):
        with pytest.raises(ValueError, match=f"label andreas.grace_s: .*{bad!r}"):
            job_labels({**labels, "andreas.grace_s": bad})
    with pytest.raises(ValueError, match="grace_s must be a finite number >= 0"):
        container_labels("j", 2, grace_s=float("nan"))
