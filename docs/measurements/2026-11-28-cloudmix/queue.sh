# The runs of README.md, one process after the other (nice -n 10), from this directory.
# m0: margin 0, what "m-" (unset) meant at c0b4681, where the rows were made.
set -e
PY=${PY:-../../../.venv/bin/python}
nice -n 10 $PY run-margin.py margin.jsonl rg,pr m0,m2,m3,m5 cloud:10:1:mixed:1 \
    cloud:10:1:mixed:2 cloud:10:1:exponential:1 cloud:10:1:exponential:2
nice -n 10 $PY run-margin.py seeds.jsonl rg,pr m0,m2,m3 cloud:10:1:mixed:3 cloud:10:1:mixed:4 \
    cloud:10:1:mixed:5 cloud:10:1:exponential:3 cloud:10:1:exponential:4 \
    cloud:10:1:exponential:5
nice -n 10 $PY run-margin.py n20.jsonl rg,pr m0,m2,m3 cloud:20:1:mixed:1
nice -n 10 $PY run-margin.py more.jsonl rg,pr m0,m3 cloud:20:1:exponential:1 cloud:10:1:high:1 \
    cloud:10:1:high:2
nice -n 10 $PY run-margin.py revisit.jsonl rg,pr m3nr cloud:10:1:mixed:1 cloud:10:1:mixed:2 \
    cloud:10:1:exponential:1 cloud:10:1:exponential:2 cloud:20:1:mixed:1
