# The idle-tail variants of README.md (the tuning of TAIL_ALLOWANCE), one process after
# the other, from the repository root; each appends to variants.jsonl.
set -e
D=docs/measurements/2026-11-28-loose
CELLS="zeus:10:1:on zeus:10:2:on zeus:10:3:on zeus:20:1:on zeus:20:2:on zeus:20:3:on
  zeus:10:1:off zeus:10:2:off zeus:10:3:off zeus:20:1:off zeus:20:2:off zeus:20:3:off
  op:10:1:exponential:1 op:10:1:exponential:2 op:10:1:mixed:1 op:10:1:mixed:2
  op:10:2:exponential:1 op:10:2:exponential:2 op:20:1:exponential:1 op:20:2:exponential:1
  op:20:2:mixed:1 op:20:1:exponential:2 op:20:1:mixed:1 op:50:1:exponential:1
  op:50:2:exponential:1 op:50:1:mixed:1"
for tail in self 0 0.15; do
  nice -n 10 python $D/variant.py $D/variants.jsonl $tail $CELLS
done
