#!/bin/bash
# The overloaded on-premise cells again with the default queue order wspt-atc (aaf13fc):
# greedy (rg and pr keep its plan on premise) and horizon, in default-wspt-atc.jsonl.
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
nice -n 19 $PY $H/run-traces.py default-wspt-atc.jsonl greedy op:10:1:high:1 op:10:1:high:2 \
    op:10:2:high:1 op:10:2:high:2 op:10:2:mixed:1 op:10:2:mixed:2 op:20:1:high:1 \
    op:20:2:high:1 op:50:2:mixed:1 op:50:1:high:1 op:50:2:high:1
nice -n 19 $PY $H/run-traces.py default-wspt-atc.jsonl horizon op:10:1:high:1 op:10:1:high:2 \
    op:10:2:high:1 op:10:2:mixed:1 op:10:2:mixed:2 op:20:2:high:1
# The cloud cells again with the default move margin (3 for rg and pr), in cloud-margin.jsonl.
nice -n 19 $PY $H/run-traces.py cloud-margin.jsonl rg,pr cloud:10:1:exponential:1 \
    cloud:10:1:exponential:2 cloud:10:1:mixed:1 cloud:10:1:mixed:2 cloud:10:1:high:1 \
    cloud:10:1:high:2 cloud:20:1:exponential:1 cloud:20:1:mixed:1 cloud:20:1:high:1
# Greedy on every on-premise cell with the defaults of 303d96a (runs priced above idle
# with keep_node where restarts cost an overhead), in default-abovekeep.jsonl.
nice -n 5 $PY $H/run-traces.py default-abovekeep.jsonl greedy op:10:1:exponential:1 \
    op:10:1:exponential:2 op:10:1:mixed:1 op:10:1:mixed:2 op:10:2:exponential:1 \
    op:10:2:exponential:2 op:10:1:high:1 op:10:1:high:2 op:10:2:high:1 op:10:2:high:2 \
    op:10:2:mixed:1 op:10:2:mixed:2 op:20:1:exponential:1 op:20:1:exponential:2 \
    op:20:1:mixed:1 op:20:2:exponential:1 op:20:2:mixed:1 op:20:1:high:1 op:20:2:high:1 \
    op:50:1:exponential:1 op:50:1:mixed:1 op:50:2:exponential:1 op:50:2:mixed:1 \
    op:50:1:high:1 op:50:2:high:1
