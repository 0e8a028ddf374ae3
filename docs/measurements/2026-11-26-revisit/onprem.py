import sys, time, json
from concurrent.futures import ProcessPoolExecutor
from andreas.simulator.generate import generate_trace
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
def run(args):
    sc, arr, n, seed, pol, rv = args
    tr = generate_trace(n_nodes=n, scenario=sc, arrival=arr, seed=seed)
    c = time.process_time()
    r = simulate(tr, pol, SimOptions(revisit=rv))
    return (sc, arr, n, seed, pol, rv, r.total_cost, r.late_jobs, r.optimizer_calls, r.revisits, time.process_time() - c)
if __name__ == "__main__":
    n = int(sys.argv[1]); seeds = [int(s) for s in sys.argv[2].split(",")]; pols = sys.argv[3].split(",")
    tasks = [(sc, arr, n, s, p, rv) for sc in (1, 2) for arr in ("exponential", "high", "low", "mixed") for s in seeds for p in pols for rv in (False, True)]
    with ProcessPoolExecutor(int(sys.argv[4]) if len(sys.argv) > 4 else 1) as ex:
        for res in ex.map(run, tasks):
            print(json.dumps(res), flush=True)
