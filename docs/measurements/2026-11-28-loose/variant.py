"""python variant.py OUT.jsonl TAIL CELL...

run.py's rows of greedy with above-idle + keep_node (variant ``above-idle+keep``) under
another idle tail (``problem._beyond_known_end``): TAIL ``self`` is the base's rule (the
end of the last running job, the job itself included), a number is TAIL_ALLOWANCE (0:
the last other running job alone; 0.3 is the shipped value). keep_node's rule for
running jobs that can stay is the shipped one in every variant. One JSON line per cell,
with ``tail`` set."""
import json
import runpy
import sys
from pathlib import Path

import numpy as np

from andreas.costs import SECONDS_PER_HOUR
from andreas.optimizer import problem

out, tail, cells = sys.argv[1], sys.argv[2], sys.argv[3:]


def _base_tail(t, runnable, pins, idle_h):
    """The base's rule (aaf13fc): beyond the last running job, the job itself included."""
    end = float(t[pins[0], pins[2]].max()) if len(pins[0]) else 0.0
    over = np.maximum(0.0, np.where(runnable, t, 0.0) - end)
    return np.where(runnable, idle_h * over / SECONDS_PER_HOUR, 0.0)


if tail == "self":
    problem._beyond_known_end = _base_tail
else:
    problem.TAIL_ALLOWANCE = float(tail)
tmp = Path(out + ".part")
sys.argv = ["run.py", str(tmp), "greedy", "above-idle+keep", *cells]
runpy.run_path(str(Path(__file__).with_name("run.py")), run_name="__main__")
with open(out, "a") as f:
    for line in tmp.read_text().splitlines():
        f.write(json.dumps({**json.loads(line), "tail": tail}) + "\n")
tmp.unlink()
