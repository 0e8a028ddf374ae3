#!/bin/bash
# The hindsight searches of README.md, one after another (from this directory).
set -e
PY=${PY:-../../../.venv/bin/python}
for cell in op:10:1:high:1 op:10:2:mixed:1 op:10:2:high:1; do
    name=$(echo "$cell" | tr : -)
    nice -n 10 "$PY" hindsight.py "search-$name" "$cell" --evals 400 --seed 1
done
