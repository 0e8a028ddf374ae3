"""Print the epoch history of an example job's checkpoint directory.

Why: a job that was preempted and moved between nodes must still have run epochs 1..N
exactly once each; the history in the newest checkpoint shows which attempt
(restart count) ran each epoch and when.

    python3 history.py CHECKPOINT_DIR          # one JSON object per epoch
    python3 history.py --json CHECKPOINT_DIR   # the whole list as one JSON document
"""

from __future__ import annotations

import json
import sys

from train import read_history


def main(argv: list[str]) -> int:
    as_list = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if len(paths) != 1:
        print("usage: history.py [--json] CHECKPOINT_DIR", file=sys.stderr)
        return 2
    history = read_history(paths[0])
    if as_list:
        print(json.dumps(history))
    else:
        for entry in history:
            print(json.dumps(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
