"""``defer_light`` (greedy's option, off by default): while the greedy plan leaves a job
waiting on premise where moves cost something, long jobs with little weight per hour of
work go behind every other job, late or not (``problem.defer_light``)."""

from __future__ import annotations

import numpy as np

from andreas.model import Energy, Job, Node, Params, Snapshot
from andreas.optimizer import decide
from andreas.optimizer.construction import compile_ordered, short_of_gpus
from andreas.optimizer.problem import DEFER_INDEX, DEFER_LONG, compile_problem, defer_light
from andreas.policies import POLICIES

ENERGY = Energy(pue=1.0, price_per_kwh=1.0)
EPOCH = Params(progress="epoch", restart_overhead_s=10.0)


def test_long_light_jobs_go_last_short_or_heavy_ones_keep_their_place() -> None:
    # w / p: A 1e-6 (long, light), B 2e-4, C 5e-5, D 1e-6 but short, E cannot run;
    # median 5e-5 over A-D, mean p 350 s
    weight = np.array([0.001, 0.02, 0.01, 0.0001, 0.5])
    t_min = np.array([1000.0, 100.0, 200.0, 100.0, np.inf])
    assert DEFER_INDEX * 5e-5 > 1e-6 and 1000.0 > DEFER_LONG * 350.0 > 100.0
    queue = np.array([0, 4, 3, 1, 2])
    assert defer_light(queue, weight, t_min, np.zeros(5)).tolist() == [4, 3, 1, 2, 0]
    # nothing light and long: the queue as it was
    assert defer_light(queue, np.full(5, 0.01), np.full(5, 100.0), np.zeros(5)).tolist() == queue.tolist()


def one_gpu(nodes: int, params: Params = EPOCH) -> Snapshot:
    """``nodes`` one-GPU nodes at t = 1000 s: L is late (due 500 s), has 1000 s of work
    and weight 0.001; S has 100 s of work, 100 s of slack and weight 0.02."""
    node = tuple(Node(name=f"n{i}", gpu_type="V100", gpus=1, power_w=(100.0, 300.0))
                 for i in range(nodes))
    late = Job(id="L", submit_s=0.0, due_s=500.0, weight=0.001, epochs=10,
               epoch_time_s={"V100": (100.0,)})
    short = Job(id="S", submit_s=900.0, due_s=1_200.0, weight=0.02, epochs=1,
                epoch_time_s={"V100": (100.0,)})
    return Snapshot(now_s=1000.0, nodes=node, jobs=(late, short), energy=ENERGY,
                    params=params)


def test_the_option_is_greedys_and_off_by_default() -> None:
    assert POLICIES["greedy"].options["defer_light"] is False
    snap = one_gpu(1)
    assert decide(snap, np.random.default_rng(0), "greedy") == \
        decide(snap, np.random.default_rng(0), "greedy", defer_light=False)


def test_short_of_gpus_the_short_heavy_job_passes_the_late_long_light_one() -> None:
    snap, rng = one_gpu(1), np.random.default_rng(0)
    assert short_of_gpus(compile_problem(snap), rng)
    default = decide(snap, np.random.default_rng(0), "greedy")
    deferred = decide(snap, np.random.default_rng(0), "greedy", defer_light=True)
    assert [x.job for x in default.assignments] == ["L"]     # late jobs first
    assert [x.job for x in deferred.assignments] == ["S"]
    # with wspt-late as the order the deferral applies all the same
    assert compile_ordered(snap, rng, order="wspt-late",
                           defer_light_jobs=True).queue.tolist() == [1, 0]


def test_no_deferral_with_gpus_for_every_job_or_in_the_papers_mode() -> None:
    for snap in (one_gpu(2), one_gpu(1, Params(progress="exact", restart_overhead_s=0.0))):
        assert decide(snap, np.random.default_rng(0), "greedy", defer_light=True) == \
            decide(snap, np.random.default_rng(0), "greedy")
    snap = one_gpu(2)
    queues = [compile_ordered(snap, np.random.default_rng(0), defer_light_jobs=d).queue
              for d in (True, False)]
    assert queues[0].tolist() == queues[1].tolist()
