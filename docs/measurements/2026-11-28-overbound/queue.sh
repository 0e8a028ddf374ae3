# bash docs/measurements/2026-11-28-overbound/queue.sh (from the repository root): the
# fluid reading of the LP and the integral model's dual bound, one process at a time
D=docs/measurements/2026-11-28-overbound
PY=${PY:-.venv/bin/python}
nice -n 10 $PY $D/fluid.py 10:1:high:1 10:2:mixed:1 10:2:high:1 > $D/fluid.txt 2>&1
nice -n 10 $PY $D/milp.py $D/milp.jsonl 10:1:high:1 120 300 > $D/milp.log 2>&1
nice -n 10 $PY $D/milp.py $D/milp.jsonl 10:1:high:1 40 300 >> $D/milp.log 2>&1
