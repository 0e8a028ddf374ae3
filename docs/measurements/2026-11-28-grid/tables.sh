#!/bin/bash
# The tables of docs/results.md from every row (run from this folder):
# default.md (the default mode, with the rows of ../2026-11-27-longrun/horizon), paper.md
# (the papers' mode) and decompose.md (where the distance goes). The bounds of
# ../2026-11-28-lpbound (the LP with its cuts), last, replace the earlier ones per cell;
# default-wspt-atc.jsonl, cloud-margin.jsonl (queue7.sh, aaf13fc) and default-abovekeep.jsonl
# (queue7.sh, 303d96a) the earlier bills.
H=../2026-11-27-longrun/horizon
B=../2026-11-28-lpbound/bounds.jsonl
PY=${PY:-../../../.venv/bin/python}
$PY $H/table.py $H/onprem.jsonl $H/cloud.jsonl $H/bounds.jsonl default.jsonl default-wspt-atc.jsonl default-abovekeep.jsonl cloud-margin.jsonl bounds.jsonl \
    $B > default.md
$PY $H/table.py --mode paper paper.jsonl $H/bounds.jsonl bounds.jsonl $B > paper.md
$PY decompose.py $H/onprem.jsonl $H/cloud.jsonl $H/bounds.jsonl default.jsonl default-wspt-atc.jsonl default-abovekeep.jsonl cloud-margin.jsonl bounds.jsonl \
    $B > decompose.md
