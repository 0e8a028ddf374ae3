#!/bin/bash
# The searches continued from their best (another 400 evaluations, rng seed 2), and one
# on the held-out cell op:10:1:high:2 (400, seed 1), from this directory.
set -e
PY=${PY:-../../../.venv/bin/python}
for cell in op:10:1:high:1 op:10:2:mixed:1 op:10:2:high:1; do
    name=$(echo "$cell" | tr : -)
    nice -n 10 "$PY" hindsight.py "search2-$name" "$cell" --evals 400 --seed 2 \
        --start "search-$name-best.json"
done
nice -n 10 "$PY" hindsight.py search-op-10-1-high-2 op:10:1:high:2 --evals 400 --seed 1
# and the held-out N = 20 cell (300, seed 1)
nice -n 10 "$PY" hindsight.py search-op-20-1-high-1 op:20:1:high:1 --evals 300 --seed 1
