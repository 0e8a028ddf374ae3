"""The shared infrastructure: atomic files, back-off, durations, measurement sources."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from andreas.infra.backoff import Backoff
from andreas.errors import InputError
from andreas.infra.fileio import replace_atomic, write_text_atomic
from andreas.infra.timefmt import duration, parse_duration


def test_replace_atomic_writes_new_files_with_the_umask_mode_and_keeps_a_replaced_ones(
        tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    target.chmod(0o600)                 # a private report stays private when rewritten
    old_mask = os.umask(0o027)
    try:
        assert replace_atomic(target, "né\n") == target
        replace_atomic(tmp_path / "raw.bin", b"\x00\x01", durable=False)
    finally:
        os.umask(old_mask)
    assert target.read_text(encoding="utf-8") == "né\n"
    assert (tmp_path / "raw.bin").read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "raw.bin").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "raw.bin"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")

    def no_rename(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="No space"):
        replace_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_write_text_atomic_names_the_label_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^--output x: cannot write: No such file"):
        write_text_atomic(tmp_path / "missing" / "x", "text", label="--output x")


def test_backoff_doubles_from_initial_and_caps_even_after_days() -> None:
    b = Backoff(initial_s=1.0, max_s=30.0)
    assert [b.delay_s(n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert b.delay_s(100_000) == 30.0                       # 2.0 ** 100000 overflows
    assert Backoff(initial_s=0.5, max_s=10.0, factor=3.0).delay_s(2) == 4.5
    assert Backoff(initial_s=5.0, max_s=1.0).delay_s(0) == 1.0   # the cap always holds


@pytest.mark.parametrize("kwargs, field", [
    ({"initial_s": -1.0, "max_s": 1.0}, "initial_s"),
    ({"initial_s": 1.0, "max_s": -1.0}, "max_s"),
    ({"initial_s": 1.0, "max_s": 2.0, "factor": 0.5}, "factor"),
])
def test_backoff_names_a_bad_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Backoff(**kwargs)


def test_backoff_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="failures"):
        Backoff(initial_s=1.0, max_s=2.0).delay_s(-1)


@pytest.mark.parametrize("text, seconds", [
    ("90s", 90.0), ("12m", 720.0), ("1h30m", 5400.0), ("2d", 172800.0), ("1w", 604800.0),
    ("1.5h", 5400.0),
])
def test_parse_duration_reads_what_duration_writes(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(duration(seconds)) == pytest.approx(seconds, abs=60)


@pytest.mark.parametrize("text", ["", "7", "d", "-7d", "7 d", "7x", "1h 30m"])
def test_parse_duration_says_none_for_other_text(text: str) -> None:
    assert parse_duration(text) is None


def test_parse_duration_limits_the_units() -> None:
    assert parse_duration("2w", units="smhd") is None
    assert parse_duration("2d", units="smhd") == 172800.0


def test_the_agent_reads_the_sources_without_sqlalchemy() -> None:
    code = ("import sys, andreas.sources, agents.records; "
            "print(any(m.startswith('sqlalchemy') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout
    assert out.strip() == "False"


def test_store_and_agent_share_one_enum() -> None:
    from agents.records import GpuSample
    from andreas.sources import EnergySource
    from andreas.store import models

    assert models.EnergySource is EnergySource
    assert "EnergySource" in str(GpuSample.__annotations__["energy_source"])


def test_a_missing_optional_library_names_its_extra() -> None:
    from andreas.entry import missing_extra

    line = missing_extra(ModuleNotFoundError("no", name="matplotlib.pyplot"))
    assert line == ("this command needs the Python package 'matplotlib', which the extra "
                    "andreas[plots] installs: pip install 'andreas[plots]'")
    assert "andreas[agent]" in missing_extra(ModuleNotFoundError("no", name="alembic"),
                                             role="agent")
    assert missing_extra(ModuleNotFoundError("no", name="andreas.nope")) is None


def test_the_cli_without_an_extra_ends_in_one_line() -> None:
    code = ("import sys; sys.modules['numpy'] = None; sys.argv = ['andreas', '--help']; "
            "from andreas.entry import andreas; andreas()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert (done.returncode, done.stderr.count("\n")) == (1, 1)
    assert done.stderr.startswith("andreas: error: this command needs the Python package "
                                  "'numpy', which the extra andreas[manager] installs")
