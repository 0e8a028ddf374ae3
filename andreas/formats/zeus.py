"""The Zeus NSDI '23 power-limit traces as andreas application profiles.

Zeus (You, Chung and Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
Consumption of DNN Training", USENIX NSDI '23; ml-energy/zeus, Apache-2.0) measured six
training workloads on four GPU types at power limits in 25 W steps: the time of one
epoch and the GPU's mean power (``summary_power_<gpu>.csv``, in
``../shared/traces/zeus-nsdi23-power/``). This module turns them into
``profiles/workloads/zeus.toml``: per workload, the batch size and optimizer Zeus' own
trace-driven simulator uses (``get_job_with_defaults`` of its ``run_alibaba.py``: the
default batch size, capped by the largest one measured on that GPU), the epoch time at
the GPU's default limit, and per level andreas considers (``profiles/power_limits.toml``)
the time factor and GPU power, made monotone and fitted where a level was not measured
(``andreas.powerfit``). ``python -m andreas.formats.zeus DIR`` prints the file; a test
holds the committed one equal to it.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from andreas.errors import InputError
from andreas.powerfit import Point, fit_levels

GPU_FILES = {"V100": "summary_power_v100.csv", "A40": "summary_power_a40.csv",
             "P100": "summary_power_p100.csv", "RTX6000": "summary_power_rtx6000.csv"}
COLUMNS = ("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch",
           "average_power")


@dataclass(frozen=True, kw_only=True)
class Workload:
    app: str
    dataset: str
    network: str
    optimizer: str
    batch_size: int        # Zeus' default b0
    max_epochs: int        # Zeus' epoch cap of the recurring job
    serial_fraction: float
    serial_why: str
    description: str


WORKLOADS = (
    Workload(app="shufflenet-cifar100", dataset="cifar100", network="shufflenetv2",
             optimizer="adadelta", batch_size=1024, max_epochs=100, serial_fraction=0.3,
             serial_why="a small network whose epoch is a few seconds: data loading and "
             "synchronisation weigh", description="ShuffleNet-v2 on CIFAR-100"),
    Workload(app="resnet50-imagenet", dataset="imagenet", network="resnet50",
             optimizer="adadelta", batch_size=256, max_epochs=100, serial_fraction=0.10957,
             serial_why="the resnet50 entry of apps.toml (fitted to the ANDREAS example "
             "trace)", description="ResNet-50 on ImageNet"),
    Workload(app="deepspeech2-librispeech", dataset="librispeech", network="deepspeech2",
             optimizer="adamw", batch_size=256, max_epochs=16, serial_fraction=0.15,
             serial_why="between the image networks of apps.toml", description="DeepSpeech2 "
             "on LibriSpeech"),
    Workload(app="ncf-movielens", dataset="movielens-1m", network="ncf", optimizer="adam",
             batch_size=1024, max_epochs=100, serial_fraction=0.5,
             serial_why="a tiny, memory-bound model (its GPU draws 35-70 W at any limit) "
             "that gains little from more GPUs", description="NCF on MovieLens-1M"),
    Workload(app="bert-squad", dataset="squad", network="bert_base_uncased",
             optimizer="adamw", batch_size=32, max_epochs=6, serial_fraction=0.1,
             serial_why="a large transformer, compute-bound", description="BERT-base "
             "fine-tuned on SQuAD"),
    Workload(app="bert-sentiment140", dataset="sentiment140", network="bert_base_uncased",
             optimizer="adamw", batch_size=128, max_epochs=10, serial_fraction=0.1,
             serial_why="a large transformer, compute-bound", description="BERT-base "
             "fine-tuned on Sentiment140"),
)


@dataclass(frozen=True, kw_only=True)
class Row:
    dataset: str
    network: str
    batch_size: int
    optimizer: str
    limit_w: float
    epoch_s: float
    power_w: float


def read_rows(path: Path) -> list[Row]:
    """One Zeus power-trace CSV; a missing column or a bad number is one line naming it."""
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise InputError(f"{path}: missing column {missing[0]!r}")
            rows = []
            for i, raw in enumerate(reader, start=2):
                try:
                    rows.append(Row(dataset=raw["dataset"], network=raw["network"],
                                    batch_size=int(raw["batch_size"]),
                                    optimizer=raw["optimizer"],
                                    limit_w=float(raw["power_limit"]),
                                    epoch_s=float(raw["time_per_epoch"]),
                                    power_w=float(raw["average_power"])))
                except ValueError:
                    raise InputError(f"{path}: line {i}: not a number in {raw!r}") from None
            return rows
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def batch_of(w: Workload, rows: list[Row]) -> int:
    """Zeus' rule: the default batch size, at most the largest measured on that GPU."""
    sizes = [r.batch_size for r in rows if r.dataset == w.dataset]
    if not sizes:
        raise InputError(f"workload {w.app}: no rows for dataset {w.dataset!r}")
    return min(w.batch_size, max(sizes))


@dataclass(frozen=True, kw_only=True)
class Measured:
    app: str
    gpu_type: str
    batch_size: int
    default_w: float
    epoch_s: float                     # at the default limit (fitted if not measured)
    levels: tuple[tuple[float, float, float, str], ...]   # limit, factor, power, source


def measured(directory: Path, limits: dict[str, tuple[float, tuple[float, ...]]]
             ) -> list[Measured]:
    """Every (workload, GPU type) with its levels; ``limits``: type -> (default, levels)."""
    out = []
    for gpu_type, name in GPU_FILES.items():
        rows = read_rows(directory / name)
        default_w, levels_w = limits[gpu_type]
        for w in WORKLOADS:
            b = batch_of(w, rows)
            pts = [Point(limit_w=r.limit_w, epoch_s=r.epoch_s, power_w=r.power_w)
                   for r in rows if (r.dataset, r.network, r.batch_size, r.optimizer)
                   == (w.dataset, w.network, b, w.optimizer)]
            if not pts:
                raise InputError(f"{directory / name}: no rows for {w.app} at batch {b}")
            fitted = fit_levels(pts, levels_w)
            base = fitted[0]
            assert base.limit_w == default_w
            out.append(Measured(app=w.app, gpu_type=gpu_type, batch_size=b,
                                default_w=default_w, epoch_s=base.epoch_s,
                                levels=tuple((f.limit_w, f.epoch_s / base.epoch_s, f.power_w,
                                              f.source) for f in fitted)))
    return out


def _num(x: float) -> str:
    return repr(round(x, 6))


def to_toml(items: list[Measured]) -> str:
    """The text of ``profiles/workloads/zeus.toml``."""
    lines = ["# The six Zeus NSDI '23 workloads (Apache-2.0; credit: profiles/README.md,",
             "# 'Power limits'). Generated by `python -m andreas.formats.zeus",
             "# ../shared/traces/zeus-nsdi23-power`: do not edit by hand.", ""]
    for w in WORKLOADS:
        mine = [m for m in items if m.app == w.app]
        lines += [f"[{w.app}]",
                  f'description = "{w.description} (Zeus NSDI \'23 power trace)"',
                  f"epochs = [{max(1, w.max_epochs // 4)}, {w.max_epochs}]",
                  f"serial_fraction = {w.serial_fraction}", "", f"[{w.app}.epoch_s]"]
        lines += [f"{m.gpu_type} = {_num(m.epoch_s)}" for m in mine]
        for m in mine:
            lines += ["", f"[{w.app}.power.{m.gpu_type}]",
                      "limit_w = [" + ", ".join(_num(x[0]) for x in m.levels) + "]",
                      "time_factor = [" + ", ".join(_num(x[1]) for x in m.levels) + "]",
                      "gpu_power_w = [" + ", ".join(_num(x[2]) for x in m.levels) + "]",
                      "level_source = [" + ", ".join(f'"{x[3]}"' for x in m.levels) + "]"]
        lines += ["", f"[{w.app}.source]",
                  'epochs = "Upper end: the epoch cap Zeus gives this recurring job '
                  '(max_epochs in run_alibaba.py); lower end: a quarter of it, an '
                  'assumption."',
                  f'serial_fraction = "Assumption (Zeus measured one GPU): {w.serial_why}."',
                  "", f"[{w.app}.source.epoch_s]"]
        lines += [f'{m.gpu_type} = "Zeus power trace {GPU_FILES[m.gpu_type]}: '
                  f'{w.dataset}/{w.network}, batch {m.batch_size}, {w.optimizer}, time_per_epoch '
                  f'at the {m.default_w:g} W default limit (made monotone with the other '
                  f'limits)."' for m in mine]
        lines += ["", f"[{w.app}.source.power]"]
        lines += [f'{m.gpu_type} = "Zeus power trace {GPU_FILES[m.gpu_type]}: '
                  f'{w.dataset}/{w.network}, batch {m.batch_size}, {w.optimizer}: '
                  f'time_per_epoch over the default limit\'s and average_power per limit, '
                  f'made monotone (andreas.powerfit); levels marked fit were not measured."'
                  for m in mine]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from andreas.profiles import load_power_limits

    if len(argv) != 1:
        print("usage: python -m andreas.formats.zeus ZEUS_TRACE_DIR", file=sys.stderr)
        return 2
    limits = {t: (lim.default_w, lim.levels_w) for t, lim in load_power_limits().items()}
    sys.stdout.write(to_toml(measured(Path(argv[0]), limits)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
