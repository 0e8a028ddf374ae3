"""Real-GPU check of the agent's NVML sampler (run on a machine with an NVIDIA GPU).

What the developers' guide asks of a lent GPU machine, in one short run (about 90 s):

1. ``andreas-agent --check``'s GPU report from the same sampler the daemon runs.
2. **Energy counter vs integrated power**: one thread reads the raw NVML values at
   ``--hz`` (default 10): the energy counter (mJ), the instant-power field and the 1-s
   average (``nvmlDeviceGetPowerUsage``), while a load worker (PyTorch bf16 matrix
   products) runs phases idle / full / half duty / idle / two processes / idle. Per phase
   and overall: counter energy ÷ the trapezoid of instant power at 10 Hz and at 1 Hz
   (the agent's cadence), and of the average power. Target: within 2 %.
3. **Instant vs averaged power**: at the idle→full step, the seconds each takes to reach
   90 % of the full-load plateau; mean |instant − average| per phase.
4. **Process list**: the PIDs the agent's :class:`GpuSampler` reports (``GpuSample.pids``,
   ``process_sm``) against the workers' own PIDs.
5. **Overhead**: wall and thread-CPU time of one ``GpuSampler.sample()`` call, and that
   at the agent's 1 Hz as a share of one core.
6. **Docker**: whether an engine answers here; if one does and ``--image`` is present,
   a container started with a GPU ``DeviceRequest`` (the executor's way) runs
   ``nvidia-smi -L``.

Needs ``pynvml`` (nvidia-ml-py) and ``psutil``; the load needs ``torch`` with CUDA.
Prints a report and writes ``--json``. No assertion: the figures go to docs/results.md.
Run: ``python tests/benchmarks/bench_nvml.py [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pynvml  # noqa: E402

from agents.check import gpu_report  # noqa: E402
from agents.gpu import GpuSampler  # noqa: E402
from agents.records import GpuSample  # noqa: E402

WORKER = r"""
import sys, time, torch
torch.backends.cuda.matmul.allow_tf32 = True
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
(a @ b).sum().item()
print("ready", flush=True)
for line in sys.stdin:
    mode, seconds = line.split()
    end = time.monotonic() + float(seconds)
    if mode == "idle":
        time.sleep(float(seconds))
    elif mode == "full":
        while time.monotonic() < end:
            for _ in range(20):
                c = a @ b
            torch.cuda.synchronize()
    elif mode == "half":          # 50 % duty over 200 ms periods
        while time.monotonic() < end:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.1:
                for _ in range(5):
                    c = a @ b
                torch.cuda.synchronize()
            time.sleep(0.1)
    print("done", flush=True)
"""

# (phase, seconds, what each of the two workers does)
PHASES = [("idle", 8.0, ("idle", "idle")), ("full", 15.0, ("full", "idle")),
          ("half", 12.0, ("half", "idle")), ("idle2", 8.0, ("idle", "idle")),
          ("two", 10.0, ("full", "full")), ("idle3", 6.0, ("idle", "idle"))]


class Raw:
    """Raw NVML readings of GPU 0 at a fixed rate, in a thread."""

    def __init__(self, handle: object, hz: float) -> None:
        self.handle, self.period = handle, 1.0 / hz
        self.rows: list[tuple[float, int, float | None, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def instant_w(self) -> float | None:
        fid = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if fid is None:
            return None
        v = pynvml.nvmlDeviceGetFieldValues(self.handle, [fid])[0]
        if v.nvmlReturn != pynvml.NVML_SUCCESS:
            return None
        return float(v.value.uiVal) / 1000.0

    def run(self) -> None:
        nxt = time.monotonic()
        while not self.stop.is_set():
            t = time.monotonic()
            e = pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
            inst = self.instant_w()
            avg = pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
            self.rows.append((t, int(e), inst, avg))
            nxt += self.period
            time.sleep(max(0.0, nxt - time.monotonic()))


def trapezoid(rows: list[tuple[float, float]]) -> float:
    return sum((p0 + p1) / 2.0 * (t1 - t0) for (t0, p0), (t1, p1) in zip(rows, rows[1:]))


def energy_table(rows: list, t0: float, t1: float) -> dict[str, float | None]:
    sel = [r for r in rows if t0 <= r[0] <= t1]
    if len(sel) < 3:
        return {}
    counter_j = (sel[-1][1] - sel[0][1]) / 1000.0
    out: dict[str, float | None] = {"seconds": sel[-1][0] - sel[0][0], "counter_j": counter_j,
                                    "mean_w": counter_j / (sel[-1][0] - sel[0][0])}
    for name, idx in (("instant", 2), ("average", 3)):
        pts = [(r[0], r[idx]) for r in sel if r[idx] is not None]
        if len(pts) < 3:
            out[f"{name}_10hz_ratio"] = out[f"{name}_1hz_ratio"] = None
            continue
        step = max(1, round(1.0 / max(1e-9, (pts[-1][0] - pts[0][0]) / (len(pts) - 1))))
        one_hz = pts[::step]
        if one_hz[-1] is not pts[-1]:
            one_hz.append(pts[-1])
        e10, e1 = trapezoid(pts), trapezoid(one_hz)
        out[f"{name}_10hz_ratio"] = counter_j / e10 if e10 > 0 else None
        out[f"{name}_1hz_ratio"] = counter_j / e1 if e1 > 0 else None
    diffs = [abs(r[2] - r[3]) for r in sel if r[2] is not None]
    out["mean_abs_instant_minus_average_w"] = statistics.fmean(diffs) if diffs else None
    return out


def rise_s(rows: list, t_step: float, plateau_w: float, idx: int) -> float | None:
    base = next((r[idx] for r in reversed(rows) if r[0] < t_step and r[idx] is not None), None)
    if base is None:
        return None
    target = base + 0.9 * (plateau_w - base)
    for r in rows:
        if r[0] >= t_step and r[idx] is not None and r[idx] >= target:
            return r[0] - t_step
    return None


def call_costs(handle: object, repeat: int = 200) -> dict[str, dict[str, float]]:
    """Wall and CPU µs per call of each NVML function the sampler makes per tick."""
    fid = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", 186)
    calls = {
        "FieldValues(POWER_INSTANT)": lambda: pynvml.nvmlDeviceGetFieldValues(handle, [fid]),
        "GetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        "GetTotalEnergyConsumption": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        "GetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(handle),
        "GetMemoryInfo": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle),
        "GetComputeRunningProcesses": lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(handle),
        "GetProcessUtilization": lambda: pynvml.nvmlDeviceGetProcessUtilization(handle, 0),
        # the counter through the field API, alone and with the instant power in one call
        "FieldValues(TOTAL_ENERGY)": lambda: pynvml.nvmlDeviceGetFieldValues(handle, [83]),
        "FieldValues(INSTANT+TOTAL_ENERGY)":
            lambda: pynvml.nvmlDeviceGetFieldValues(handle, [fid, 83]),
    }
    out: dict[str, dict[str, float]] = {}
    for name, fn in calls.items():
        try:
            fn()
        except pynvml.NVMLError as e:
            out[name] = {"error": str(e)}  # type: ignore[dict-item]
            continue
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(repeat):
            try:
                fn()
            except pynvml.NVMLError:
                pass
        out[name] = {"wall_us": (time.perf_counter() - w0) / repeat * 1e6,
                     "cpu_us": (time.process_time() - c0) / repeat * 1e6}
    return out


def counter_agreement(handle: object, reads: int = 20) -> dict[str, float]:
    """The energy counter read both ways back to back: the field's value minus
    nvmlDeviceGetTotalEnergyConsumption's (mJ), largest absolute difference."""
    worst = 0.0
    for _ in range(reads):
        a = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        v = pynvml.nvmlDeviceGetFieldValues(handle, [83])[0]
        if v.nvmlReturn != pynvml.NVML_SUCCESS:
            return {"field_error": float(v.nvmlReturn)}
        worst = max(worst, abs(float(v.value.ullVal) - float(a)))
        time.sleep(0.05)
    return {"max_abs_diff_mj": worst}


def docker_check(image: str, uuid: str) -> dict[str, object]:
    out: dict[str, object] = {"docker_cli": shutil.which("docker"),
                              "dockerd": shutil.which("dockerd"),
                              "socket": os.path.exists("/var/run/docker.sock")}
    try:
        import docker  # type: ignore[import-untyped]
        from docker.types import DeviceRequest  # type: ignore[import-untyped]
    except ImportError as e:
        out["sdk"] = f"not importable: {e}"
        return out
    try:
        client = docker.from_env(timeout=10)
        out["engine"] = client.version().get("Version")
        out["runtimes"] = sorted(client.info().get("Runtimes", {}))
        logs = client.containers.run(
            image, ["nvidia-smi", "-L"], remove=True,
            device_requests=[DeviceRequest(device_ids=[uuid], capabilities=[["gpu"]])])
        out["device_request_output"] = logs.decode(errors="replace").strip()
    except Exception as e:  # noqa: BLE001 - a probe reports every failure, never raises
        out["error"] = f"{type(e).__name__}: {e}"[:400]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--image", default="nvidia/cuda:12.4.1-base-ubuntu22.04")
    ap.add_argument("--scale", type=float, default=1.0, help="phase durations × this")
    ap.add_argument("--calls-only", action="store_true",
                    help="only the cost of each NVML call and the counter read both ways")
    args = ap.parse_args(argv)
    result: dict[str, object] = {}
    if args.calls_only:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        result = {"nvml_call_costs": call_costs(handle, repeat=100),
                  "counter_agreement": counter_agreement(handle)}
        for name, c in result["nvml_call_costs"].items():  # type: ignore[union-attr]
            print(f"  {name:<34} " + (f"wall {c['wall_us']:8.0f} µs  cpu {c['cpu_us']:8.0f} µs"
                                      if "wall_us" in c else f"error {c['error']}"))
        print(f"counter, field vs function: {result['counter_agreement']}")
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, default=str))
        return 0

    sampler = GpuSampler()
    report = gpu_report(sampler)
    print("\n".join(report))
    result["check"] = report
    uuid = sampler.sampled_uuids[0]
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    result["driver"] = pynvml.nvmlSystemGetDriverVersion()

    workers = [subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, bufsize=1)
               for _ in range(2)]
    for w in workers:
        assert w.stdout is not None
        line = w.stdout.readline().strip()
        if line != "ready":
            print(f"worker {w.pid} did not start: {line!r}")
            return 1
    pids = sorted(w.pid for w in workers)
    print(f"workers ready: PIDs {pids}")

    costs = call_costs(handle)
    result["nvml_call_costs"] = costs
    print("NVML call costs (2 processes hold contexts, GPU idle):")
    for name, c in costs.items():
        print(f"  {name:<34} " + (f"wall {c['wall_us']:8.0f} µs  cpu {c['cpu_us']:8.0f} µs"
                                  if "wall_us" in c else f"error {c['error']}"))

    raw = Raw(handle, args.hz)
    agent_samples: list[tuple[float, GpuSample]] = []
    call_wall: list[float] = []
    call_cpu: list[float] = []
    stop = threading.Event()

    def agent_loop() -> None:   # the daemon's cadence: one sample() per second
        nxt = time.monotonic()
        while not stop.is_set():
            w0, c0 = time.perf_counter(), time.thread_time()
            mono = time.monotonic()
            out = sampler.sample(mono, time.time())
            call_cpu.append(time.thread_time() - c0)
            call_wall.append(time.perf_counter() - w0)
            agent_samples.extend((mono, s) for s in out if isinstance(s, GpuSample))
            nxt += 1.0
            time.sleep(max(0.0, nxt - time.monotonic()))

    agent = threading.Thread(target=agent_loop, daemon=True)
    raw.thread.start()
    agent.start()
    spans: dict[str, tuple[float, float]] = {}
    for name, seconds, modes in PHASES:
        seconds *= args.scale
        t0 = time.monotonic()
        for w, mode in zip(workers, modes):
            assert w.stdin is not None
            w.stdin.write(f"{mode} {seconds}\n")
        for w in workers:
            assert w.stdout is not None
            w.stdout.readline()
        spans[name] = (t0, time.monotonic())
        print(f"phase {name:<6} {spans[name][1] - t0:5.1f} s")
    stop.set()
    raw.stop.set()
    agent.join()
    raw.thread.join()
    for w in workers:
        assert w.stdin is not None
        w.stdin.close()
        w.wait(timeout=30)

    rows = raw.rows
    phases = {n: energy_table(rows, a + 0.5, b) for n, (a, b) in spans.items()}
    phases["all"] = energy_table(rows, rows[0][0], rows[-1][0])
    result["phases"] = phases
    print(f"\n{'phase':<6} {'s':>5} {'counter J':>10} {'mean W':>7} {'ctr/inst10':>10} "
          f"{'ctr/inst1':>9} {'ctr/avg10':>9} {'ctr/avg1':>8} {'|i-a| W':>7}")
    for n, p in phases.items():
        if not p:
            continue

        def f(k: str, p: dict = p) -> str:
            v = p.get(k)
            return f"{v:.4f}" if isinstance(v, float) else "n/a"
        print(f"{n:<6} {p['seconds']:5.1f} {p['counter_j']:10.1f} {p['mean_w']:7.1f} "
              f"{f('instant_10hz_ratio'):>10} {f('instant_1hz_ratio'):>9} "
              f"{f('average_10hz_ratio'):>9} {f('average_1hz_ratio'):>8} "
              f"{f('mean_abs_instant_minus_average_w'):>7}")

    full_a, full_b = spans["full"]
    plateau = statistics.fmean(r[2] for r in rows
                               if full_a + 5 <= r[0] <= full_b and r[2] is not None) \
        if any(r[2] is not None for r in rows) else None
    if plateau is not None:
        result["step"] = {"plateau_w": plateau,
                          "instant_rise_90_s": rise_s(rows, full_a, plateau, 2),
                          "average_rise_90_s": rise_s(rows, full_a, plateau, 3)}
        print(f"\nidle→full step: plateau {plateau:.0f} W; 90 % reached by instant after "
              f"{result['step']['instant_rise_90_s']} s, by the 1-s average after "
              f"{result['step']['average_rise_90_s']} s")

    # The agent's own samples: energy, sources, PIDs.
    two_a, two_b = spans["two"]
    in_two = [s for m, s in agent_samples if two_a + 1.5 <= m <= two_b]
    samples = [s for _, s in agent_samples]
    seen = sorted({p for s in samples for p in s.pids})
    agent_j = sum((s.energy_mj or 0) for s in samples) / 1000.0
    span_j = (rows[-1][1] - rows[0][1]) / 1000.0
    result["agent"] = {
        "samples": len(agent_samples),
        "energy_sources": sorted({str(s.energy_source) for s in samples}),
        "power_sources": sorted({str(s.power_source) for s in samples}),
        "energy_j": agent_j, "raw_counter_span_j": span_j,
        "pids_seen": seen, "worker_pids": pids,
        "workers_seen": sorted(set(pids) & set(seen)),
        "process_sm_in_two": [list(s.process_sm) for s in in_two][:5],
        "process_memory_in_two": [list(s.process_memory_mib) for s in in_two][:5],
        "sample_wall_us": {"mean": statistics.fmean(call_wall) * 1e6,
                           "p50": statistics.median(call_wall) * 1e6,
                           "max": max(call_wall) * 1e6},
        "sample_cpu_us_mean": statistics.fmean(call_cpu) * 1e6,
        "cpu_share_at_1hz_percent": statistics.fmean(call_cpu) * 100.0,
    }
    a = result["agent"]
    print(f"\nagent sampler: {a['samples']} samples, energy {agent_j:.1f} J (raw counter over "
          f"the whole run {span_j:.1f} J), sources {a['energy_sources']} / {a['power_sources']}")
    print(f"PIDs reported {seen}; workers {pids}; seen {a['workers_seen']}")
    print(f"process_sm while two ran: {a['process_sm_in_two']}")
    print(f"sample(): wall mean {a['sample_wall_us']['mean']:.0f} µs (p50 "
          f"{a['sample_wall_us']['p50']:.0f}, max {a['sample_wall_us']['max']:.0f}); thread CPU "
          f"{a['sample_cpu_us_mean']:.0f} µs → {a['cpu_share_at_1hz_percent']:.4f} % of a core at 1 Hz")

    result["docker"] = docker_check(args.image, uuid)
    print(f"\ndocker: {result['docker']}")
    sampler.close()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
