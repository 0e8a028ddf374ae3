"""bench_power_limits.py with the on-premise fallback to greedy switched off (margins 0),
so rg and pr plan with their own search, move costs included:
python no-fallback.py --policy rg --no-timing (run from the repository root)."""
import runpy
import sys

import andreas.optimizer.greedy as greedy

greedy.ONPREM_FALLBACK = greedy.SHORTAGE_FALLBACK = 0.0
sys.argv[0] = "tests/benchmarks/bench_power_limits.py"
runpy.run_path("tests/benchmarks/bench_power_limits.py", run_name="__main__")
