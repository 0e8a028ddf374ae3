"""Compiling the optimizer's kernels ahead of the first decision (numba caches them on disk).

Apart from ``kernels.py`` so that the kernels import nothing that imports them: this
module runs a tiny construction, which needs the whole optimizer.
"""

from __future__ import annotations

import numpy as np

_warmed = False   # set once warm() has run in this process


def warm(notice=None) -> float:
    """Compile (or load from the cache) every kernel on a tiny problem; returns seconds.

    Call it before forking worker processes, so that they inherit the compiled code
    instead of each compiling it again; the first run on a machine takes 20-60 s, and
    ``notice`` (a callable taking a message) is called if it takes more than 2 s. Later
    calls in the same process (``compare`` per policy, a sweep per trace) return at once.
    """
    global _warmed
    if _warmed:
        return 0.0
    import logging
    import threading
    import time

    from andreas.model import Job, Node, Snapshot
    from andreas.optimizer.construction import construct
    from andreas.optimizer.problem import compile_problem

    start = time.perf_counter()
    timer = None
    if notice is not None:
        timer = threading.Timer(2.0, notice, args=(
            "compiling the optimizer's kernels (the first run on this machine takes "
            "20-60 s; later runs load them from the cache)",))
        timer.daemon = True
        timer.start()
    job = Job(id="j", submit_s=0.0, due_s=100.0, weight=0.01, epochs=1,
              epoch_time_s={"X": (10.0,)})
    snapshot = Snapshot(now_s=0.0, nodes=(Node(name="n", gpu_type="X", gpus=1,
                                                power_w=(1.0, 2.0)),), jobs=(job,))
    construct(compile_problem(snapshot), 4, np.random.default_rng(0), floor=True)
    if timer is not None:
        timer.cancel()
    _warmed = True
    seconds = time.perf_counter() - start
    if seconds > 2.0:
        logging.getLogger(__name__).info(
            "compiled the optimizer's kernels in %.0f s (cached for later runs)", seconds)
    return seconds
