"""A sweep in parts: each shard of the grid writes one part file, a merge assembles them.

``andreas simulate --sweep ... --shard I/K`` runs tasks I, I + K, ... of the grid
(``sweep.Grid.tasks``) and writes ``sweep-part-I-of-K.json`` (``andreas-sweep-part/1``):
the grid, the simulation options and the tariff it ran with, the shard, and its rows.
``andreas simulate --merge PART...`` checks that the parts are one sweep (same grid,
options and tariff; shards 1..K each exactly once, so no task is missing or counted
twice) and returns the rows, which the CLI aggregates exactly as a sweep run in one piece
(the rows are the same; only wall-clock figures differ).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from andreas.errors import InputError
from andreas.infra import jsontext
from andreas.infra.fileio import read_text_capped, write_text_atomic
from andreas.simulator.results import SimOptions
from andreas.simulator.sweep import Grid, sort_key

PART_FORMAT = "andreas-sweep-part/1"
PART_LIMIT = 256 << 20     # a part of a very large grid: 256 MiB at most


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/K"`` -> (I, K) with 1 <= I <= K (Slurm: ``--array=1-K`` and
    ``--shard $SLURM_ARRAY_TASK_ID/K``)."""
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"--shard: must be I/K (e.g. 3/8), got {text!r}") from None
    if not 1 <= i <= k <= 100_000:
        raise InputError(f"--shard: must be I/K with 1 <= I <= K <= 100000, got {text!r}")
    return i, k


def part_name(shard: tuple[int, int]) -> str:
    return f"sweep-part-{shard[0]}-of-{shard[1]}.json"


def header(grid: Grid, options: SimOptions, tariff_path: str | None) -> dict[str, Any]:
    """What makes parts one sweep: they must agree on all of it."""
    return {"grid": json.loads(jsontext.dumps(dataclasses.asdict(grid))),
            "options": json.loads(jsontext.dumps(dataclasses.asdict(options))),
            "tariff": tariff_path}


def write_part(folder: Path, grid: Grid, options: SimOptions, shard: tuple[int, int],
               rows: Sequence[dict[str, Any]], tariff_path: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"format": PART_FORMAT, **header(grid, options, tariff_path),
           "shard": list(shard), "tasks": len(grid.tasks(shard)), "runs": list(rows)}
    path = folder / part_name(shard)
    write_text_atomic(path, jsontext.dumps(doc, indent=1))
    return path


def read_parts(paths: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the sweep's header, every row sorted) from the part files of one sweep; any
    problem is one InputError line naming the file."""
    if not paths:
        raise InputError("--merge: name the part files (sweep-part-I-of-K.json) to merge")
    first: dict[str, Any] | None = None
    seen: dict[int, str] = {}
    count = 0
    rows: list[dict[str, Any]] = []
    for path in paths:
        doc = _load(path)
        head = {k: doc.get(k) for k in ("grid", "options", "tariff")}
        index, k = doc["shard"]
        if first is None:
            first, count = head, k
        elif head != first:
            differ = ", ".join(key for key in head if head[key] != first[key])
            raise InputError(f"{path}: not a part of the same sweep as {paths[0]} "
                             f"(its {differ} differ)")
        elif k != count:
            raise InputError(f"{path}: shard {index}/{k}, but {paths[0]} is one of {count}")
        if index in seen:
            raise InputError(f"{path}: shard {index}/{k} again (also in {seen[index]})")
        seen[index] = path
        rows.extend(doc["runs"])
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing[:10])
        raise InputError(f"--merge: shard{'s' if len(missing) > 1 else ''} {shown} missing "
                         f"(a merge needs every part of the sweep)")
    assert first is not None
    rows.sort(key=sort_key)
    return first, rows


def _load(path: str) -> dict[str, Any]:
    text = read_text_capped(path, what="sweep part", limit=PART_LIMIT)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != PART_FORMAT:
        raise InputError(f"{path}: format must be {PART_FORMAT!r} (a file --shard wrote)")
    shard = doc.get("shard")
    if not (isinstance(shard, list) and len(shard) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in shard)
            and 1 <= shard[0] <= shard[1]):
        raise InputError(f"{path}: shard must be [I, K] with 1 <= I <= K, got {shard!r}")
    runs = doc.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise InputError(f"{path}: runs must be a list of objects")
    keys = ("scenario", "arrival", "nodes", "seed", "policy", "total_cost")
    for r in runs:
        if any(k not in r for k in keys):
            raise InputError(f"{path}: a run lacks one of {', '.join(keys)}")
    if doc.get("tasks") != len(runs):
        raise InputError(f"{path}: {len(runs)} runs, but the part says {doc.get('tasks')!r} "
                         "tasks (an incomplete part)")
    return doc
