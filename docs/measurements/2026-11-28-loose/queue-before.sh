# The bills before the fix (this branch's base), one process after the other, from the
# repository root: default greedy (node) and above-idle + keep_node.
set -e
D=docs/measurements/2026-11-28-loose
R="nice -n 10 python $D/run.py"
V=node,above-idle+keep
$R $D/before-zeus.jsonl greedy $V zeus:10:1:on zeus:10:2:on zeus:10:3:on zeus:20:1:on \
  zeus:20:2:on zeus:20:3:on zeus:10:1:off zeus:10:2:off zeus:10:3:off zeus:20:1:off \
  zeus:20:2:off zeus:20:3:off
$R $D/before-grid.jsonl greedy $V op:10:1:exponential:1 op:10:1:exponential:2 \
  op:10:1:mixed:1 op:10:1:mixed:2 op:10:2:exponential:1 op:10:2:exponential:2 \
  op:20:1:exponential:1 op:20:2:exponential:1 op:20:2:mixed:1 op:50:1:exponential:1 \
  op:50:2:exponential:1
$R $D/before-grid.jsonl greedy $V op:20:1:exponential:2 op:20:1:mixed:1 op:50:1:mixed:1
