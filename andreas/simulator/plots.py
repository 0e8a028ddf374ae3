"""PNG plots of a comparison: cost per policy, cumulative cost over time, GPU occupancy."""

from __future__ import annotations

import io
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from andreas.infra.fileio import replace_atomic
from andreas.simulator.results import Attempt, SimResult

HOUR = 3600.0
PLAIN_TEXT: dict[Any, Any] = {"text.parse_math": False, "text.usetex": False}


def write_plots(results: Sequence[SimResult], out_dir: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    # Names are data: a node or trace called "$x^$" is printed, not parsed as mathtext.
    with matplotlib.rc_context(PLAIN_TEXT):
        paths = [_cost_bars(results, out_dir / "cost.png"),
                 _cumulative(results, out_dir / "cumulative-cost.png")]
        for r in results:
            paths.append(_gantt(r, out_dir / f"occupancy-{r.policy}.png"))
    return paths


def _cost_bars(results: Sequence[SimResult], path: Path) -> Path:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [r.policy for r in results]
    energy = [r.energy_cost for r in results]
    tardy = [r.tardiness_cost for r in results]
    ax.bar(names, energy, label="energy (PUE-inflated)", color="#4c72b0")
    ax.bar(names, tardy, bottom=energy, label="tardiness penalties", color="#dd8452")
    for i, r in enumerate(results):
        ax.annotate(f"{r.total_cost:.0f}", (i, r.total_cost), ha="center", va="bottom",
                    fontsize=8)
    ax.set_ylabel("total cost")
    ax.set_title(f"{results[0].trace}: total cost per policy")
    ax.legend()
    return _save(fig, path)


def _cumulative(results: Sequence[SimResult], path: Path) -> Path:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    t0 = min(r.cost_curve[0][0] for r in results if r.cost_curve)
    for r in results:
        if not r.cost_curve:
            continue
        ts = [(t - t0) / HOUR for t, _, _ in r.cost_curve]
        ax.step(ts, [e + d for _, e, d in r.cost_curve], where="post", label=r.policy)
    ax.set_xlabel("simulated time [h]")
    ax.set_ylabel("cumulative cost (energy + tardiness)")
    ax.set_title(f"{results[0].trace}: cost over time")
    ax.legend()
    return _save(fig, path)


MAX_GANTT_ROWS = 96


def _gantt(result: SimResult, path: Path) -> Path:
    import matplotlib.pyplot as plt
    rows = _gpu_rows(result.attempts)
    labels = sorted(rows)
    shown = labels[:MAX_GANTT_ROWS]
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.18 * len(shown) + 1.5)))
    t0 = min((a.start_s for a in result.attempts), default=0.0)
    cmap = plt.get_cmap("tab20")
    for y, label in enumerate(shown):
        for a, low, high in _lanes(rows[label]):
            ax.broken_barh([((a.start_s - t0) / HOUR, (a.end_s - a.start_s) / HOUR)],
                           (y - 0.4 + 0.8 * low, 0.8 * (high - low)),
                           facecolors=[cmap(zlib.crc32(a.job.encode()) % 20)],
                           edgecolor="white" if high - low < 1 else None,
                           linewidth=0.3 if high - low < 1 else 0)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"{n} gpu{g}" for n, g in shown], fontsize=6)
    ax.set_xlabel("simulated time [h]")
    more = f", first {len(shown)} of {len(labels)} GPUs" if len(shown) < len(labels) else ""
    shared = any(a.gpu_milli < 1000 for a in result.attempts)
    ax.set_title(f"{result.trace}: GPU occupancy under {result.policy} (one colour per job"
                 f"{'; thin bars are slices of a shared GPU' if shared else ''}{more})",
                 fontsize=9)
    return _save(fig, path)


def _lanes(attempts: Sequence[Attempt]) -> list[tuple[Attempt, float, float]]:
    """Stack the slices of one GPU: each attempt gets the lowest band [low, high) of height
    gpu_milli / 1000 that no overlapping attempt holds."""
    placed: list[tuple[Attempt, float, float]] = []
    for a in sorted(attempts, key=lambda x: (x.start_s, x.job)):
        height = min(1.0, a.gpu_milli / 1000)
        busy = sorted((lo, hi) for b, lo, hi in placed
                      if b.start_s < a.end_s - 1e-9 and a.start_s < b.end_s - 1e-9)
        low = 0.0
        for lo, hi in busy:
            if low + height <= lo + 1e-9:
                break
            low = max(low, hi)
        placed.append((a, low, min(1.0, low + height)))
    return placed


def _gpu_rows(attempts: Sequence[Attempt]) -> dict[tuple[str, int], list[Attempt]]:
    """Each attempt on its GPUs: the ones it ran on when known, else free slots of its node
    (policies that only count GPUs), so bars never overlap."""
    free_at: dict[str, dict[int, float]] = defaultdict(dict)
    rows: dict[tuple[str, int], list[Attempt]] = defaultdict(list)
    for a in sorted(attempts, key=lambda x: (x.start_s, x.node, x.job)):
        if a.gpu_ids:
            for s in a.gpu_ids:
                rows[(a.node, s)].append(a)
            continue
        slots = free_at[a.node]
        chosen = [s for s in sorted(slots) if slots[s] <= a.start_s + 1e-6][: a.gpus]
        nxt = max(slots, default=-1) + 1
        while len(chosen) < a.gpus:
            chosen.append(nxt)
            nxt += 1
        for s in chosen:
            slots[s] = a.end_s
            rows[(a.node, s)].append(a)
    return rows


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt
    png = io.BytesIO()
    fig.tight_layout()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    return replace_atomic(path, png.getvalue())
