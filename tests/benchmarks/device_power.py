"""GPU power limits on a real GPU: train a real model at several limits through NVML.

For each limit (the default, then 25 W steps down within NVML's constraints, at most
``--levels``): set it (``nvmlDeviceSetPowerManagementLimit``, needs root), read it back,
train ``--epochs`` short epochs of a real model (PyTorch: a ResNet-style CNN on random
images, so no data set is needed), and record per epoch the time and the GPU's energy
counter (``nvmlDeviceGetTotalEnergyConsumption``). Then, like the Job Profiler, the time
factor and mean power per limit, and how well andreas' fit (``andreas.powerfit``)
predicts each level from the others (leave one out). The default limit is restored at
the end, whatever happens. A limit the driver refuses (no permission, not supported) is
recorded as the refusal and the run goes on at the limit in force.

``--fake`` runs the same code on the fake NVML (``agents/nvml_fake.py``, a V100 whose
limit caps its power) and a numpy model on the CPU, whose epochs the fake's time factor
stretches: it tests the script, it measures nothing. JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def nvml_and_gpu(fake: bool) -> tuple[Any, Any, Any]:
    if fake:
        from agents.nvml_fake import make_fake_nvml
        nv = make_fake_nvml("1xV100", node="device-check")
    else:
        import pynvml as nv
    nv.nvmlInit()
    return nv, nv.nvmlDeviceGetHandleByIndex(0), fake


def limits_to_try(nv: Any, h: Any, levels: int, step_w: float) -> tuple[list[float], dict]:
    info: dict[str, Any] = {"name": str(nv.nvmlDeviceGetName(h))}
    try:
        lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(h)
        default = nv.nvmlDeviceGetPowerManagementDefaultLimit(h)
    except nv.NVMLError as e:
        info["constraints_error"] = str(e)
        return [], info
    info.update(min_w=lo / 1000, max_w=hi / 1000, default_w=default / 1000)
    out = [default / 1000]
    while len(out) < levels and out[-1] - step_w >= lo / 1000:
        out.append(out[-1] - step_w)
    return out, info


class Trainer:
    """One epoch of a real model: PyTorch on the GPU, or (fake) numpy on the CPU."""

    def __init__(self, fake: bool, steps: int) -> None:
        self.fake, self.steps = fake, steps
        if fake:
            import numpy as np
            self.np = np
            self.w = np.random.default_rng(0).standard_normal((256, 256)) * 0.01
            return
        import torch
        from torch import nn
        self.torch = torch
        dev = torch.device("cuda:0")
        self.model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            *[m for _ in range(6) for m in (nn.Conv2d(64, 64, 3, padding=1),
                                           nn.BatchNorm2d(64), nn.ReLU())],
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.x = torch.randn(256, 3, 64, 64, device=dev)
        self.y = torch.randint(0, 10, (256,), device=dev)

    def epoch(self, stretch: float = 1.0) -> None:
        if self.fake:
            start = time.perf_counter()
            for _ in range(self.steps):
                self.w = self.np.tanh(self.w @ self.w.T) * 0.5
            time.sleep((time.perf_counter() - start) * (stretch - 1.0))
            return
        torch = self.torch
        for _ in range(self.steps):
            self.opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(self.model(self.x), self.y)
            loss.backward()
            self.opt.step()
        torch.cuda.synchronize()


def measure(nv: Any, h: Any, trainer: Trainer, limit_w: float, epochs: int, fake: bool,
            default_w: float) -> dict[str, Any]:
    row: dict[str, Any] = {"limit_w": limit_w}
    try:
        nv.nvmlDeviceSetPowerManagementLimit(h, int(round(limit_w * 1000)))
    except nv.NVMLError as e:
        row["refused"] = str(e)
    row["read_back_w"] = nv.nvmlDeviceGetPowerManagementLimit(h) / 1000
    stretch = (default_w / row["read_back_w"]) ** 0.5 if fake else 1.0
    if fake:                                       # the fake GPU is busy while it trains
        nv.set_busy(nv.uuid_at_index(0), 100.0)
    trainer.epoch(stretch)                         # warm-up, not counted
    times, joules = [], []
    for _ in range(epochs):
        e0 = nv.nvmlDeviceGetTotalEnergyConsumption(h)
        t0 = time.perf_counter()
        trainer.epoch(stretch)
        times.append(time.perf_counter() - t0)
        joules.append((nv.nvmlDeviceGetTotalEnergyConsumption(h) - e0) / 1000)
    if fake:
        nv.set_idle(nv.uuid_at_index(0))
    row.update(epoch_s=statistics.median(times), energy_j=statistics.median(joules),
               power_w=sum(joules) / sum(times), epochs=epochs)
    return row


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each level against andreas' fit of the others (leave one out)."""
    from andreas.powerfit import Point, fit_levels

    ok = [r for r in rows if "epoch_s" in r and "refused" not in r]
    base = next((r for r in ok if r is ok[0]), None)
    out = []
    for r in ok[1:]:
        others = [Point(limit_w=o["read_back_w"], epoch_s=o["epoch_s"], power_w=o["power_w"])
                  for o in ok if o is not r]
        (fit,) = fit_levels(others, [r["read_back_w"]])
        assert base is not None
        out.append({"limit_w": r["read_back_w"],
                    "time_factor": r["epoch_s"] / base["epoch_s"],
                    "model_time_factor": fit.epoch_s / base["epoch_s"],
                    "power_w": r["power_w"], "model_power_w": fit.power_w,
                    "time_error": fit.epoch_s / r["epoch_s"] - 1,
                    "power_error": fit.power_w / r["power_w"] - 1})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--levels", type=int, default=5)
    ap.add_argument("--step-w", type=float, default=25.0)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60, help="training steps per epoch")
    ap.add_argument("--out", type=Path, default=Path("out/device-power.json"))
    args = ap.parse_args(argv)
    try:
        nv, h, fake = nvml_and_gpu(args.fake)
    except Exception as e:  # noqa: BLE001 - no driver: one line, nothing measured
        print(f"device_power: error: NVML: {e}", file=sys.stderr)
        return 2
    limits, info = limits_to_try(nv, h, args.levels, args.step_w)
    doc: dict[str, Any] = {"gpu": info, "fake": fake, "rows": [], "started": time.time()}
    if not limits:
        doc["refused"] = info.get("constraints_error", "no constraints")
    else:
        try:
            trainer = Trainer(fake, args.steps)
            for w in limits:
                doc["rows"].append(measure(nv, h, trainer, w, args.epochs, fake,
                                           info["default_w"]))
                print(json.dumps(doc["rows"][-1]), flush=True)
        finally:
            try:
                nv.nvmlDeviceSetPowerManagementLimit(h, int(round(info["default_w"] * 1000)))
            except nv.NVMLError as e:
                doc["restore_error"] = str(e)
            doc["restored_w"] = nv.nvmlDeviceGetPowerManagementLimit(h) / 1000
        doc["comparison"] = compare(doc["rows"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, default=lambda x: None if isinstance(
        x, float) and not math.isfinite(x) else str(x)))
    print(f"device_power: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
