"""One owner per bound (andreas/limits.py): the same value past a bound is refused by every
entry point that reads it (config, snapshot, tariff, submission), each with one line that
names its field and the bound, and the value at the bound is taken by all of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from andreas import limits
from andreas.config import load_settings
from andreas.errors import InputError
from andreas.formats.snapshot import parse_snapshot
from andreas.formats.tariff import parse_tariff
from andreas.service.submit import parse_submission

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "example-snapshot-n10.json"


def _config(tmp_path: Path, pue: float) -> float:
    path = tmp_path / "andreas.toml"
    path.write_text(f"[manager]\nenergy_pue = {pue!r}\n")
    return load_settings({"ANDREAS_CONFIG": str(path)}).manager.energy_pue


def _snapshot(tmp_path: Path, pue: float) -> float:
    doc = json.loads(EXAMPLE.read_text())
    doc["energy"] = {"pue": pue}
    return parse_snapshot(doc).energy.pue


def _tariff(tmp_path: Path, pue: float) -> float:
    rows = "".join(f"{h},0.1,{pue if h == 3 else 1.2!r}\n" for h in range(24))
    return parse_tariff("hour_of_day,price_per_kwh,pue\n" + rows).pue[3]


PUE_ENTRIES = {"config": (_config, "energy_pue"), "snapshot": (_snapshot, "energy.pue"),
               "tariff": (_tariff, "column pue")}


@pytest.mark.parametrize("entry", sorted(PUE_ENTRIES))
@pytest.mark.parametrize("pue", [limits.MAX_PUE + 0.5, limits.MIN_PUE - 0.5])
def test_one_pue_rule_everywhere(tmp_path: Path, entry: str, pue: float) -> None:
    read, name = PUE_ENTRIES[entry]
    with pytest.raises(InputError) as e:
        read(tmp_path, pue)
    message = str(e.value)
    assert "\n" not in message and name in message, message
    bound = limits.MAX_PUE if pue > limits.MAX_PUE else limits.MIN_PUE
    assert f"{bound:g}" in message and f"{pue:g}" in message, message
    for edge in (limits.MIN_PUE, limits.MAX_PUE):
        assert read(tmp_path, edge) == edge


def test_one_gpus_per_job_bound_for_submissions_and_documents() -> None:
    too_many = limits.MAX_GPUS_PER_JOB + 1

    def submit(gpus: int) -> int | None:
        return parse_submission(image="example/train:1", epochs=5, due="+2h", weight=0.01,
                                max_gpus=gpus, now_s=0.0).max_gpus

    def document(gpus: int) -> int:
        doc = json.loads(EXAMPLE.read_text())
        job = doc["jobs"][0]
        job["demand"] = {"gpus": gpus}
        job["epoch_time_s"] = {t: [100.0] * gpus for t in job["epoch_time_s"]}
        demand = parse_snapshot(doc).jobs[0].demand
        assert demand is not None
        return demand.gpus

    for read, name in ((submit, "--max-gpus"), (document, "demand.gpus")):
        with pytest.raises(InputError, match=f"{name}.* must be <= {limits.MAX_GPUS_PER_JOB}"):
            read(too_many)
        assert read(limits.MAX_GPUS_PER_JOB) == limits.MAX_GPUS_PER_JOB


def test_one_reason_width_for_the_columns_and_the_checks() -> None:
    from andreas.jobspec import MAX_GPUS
    from andreas.service.submit import MAX_REASON
    from andreas.store import procedures, tables

    assert MAX_REASON == limits.REASON_CHARS and MAX_GPUS == limits.MAX_GPUS_PER_JOB
    widths = {t.name: t.c.reason.type.length for t in tables.metadata.tables.values()
              if "reason" in t.c}
    assert widths and set(widths.values()) == {limits.REASON_CHARS}, widths
    assert f"p_reason VARCHAR({limits.REASON_CHARS})" in procedures.CANCEL
    assert limits.reason("x" * 1000) == "x" * limits.REASON_CHARS
