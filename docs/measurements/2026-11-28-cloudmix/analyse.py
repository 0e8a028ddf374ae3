"""python analyse.py RUN.json: tables of the moves instrument.py recorded."""
import collections
import gzip
import json
import sys

d = json.load((gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt"))
mv = d["moves"]
s = d["summary"]
print(d["cell"], d["policy"], "bill", round(s["total_cost"], 2), "energy",
      round(s["energy_cost"], 2), "late", s["late_jobs"], "moves", len(mv),
      "lost h", round(s["lost_work_s"] / 3600, 1))
by = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
for m in mv:
    trig = m["trigger"]
    for key in (("kind", m["kind2"]), ("trigger", trig),
                ("kind x trigger", m["kind2"] + " @ " + trig)):
        b = by[key]
        b[0] += 1
        b[1] += m["partial_s"] / 3600
        b[2] += m["redo_cost"]
        b[3] += m.get("seen_saving", 0.0)
print("| group | value | moves | partial epochs lost (h) | redo cost at new rate "
      "| per-job saving seen |")
print("|---|---|---|---|---|---|")
for (g, v), b in sorted(by.items(), key=lambda kv: (kv[0][0], -kv[1][0])):
    print(f"| {g} | {v} | {b[0]} | {b[1]:.1f} | {b[2]:.1f} | {b[3]:.1f} |")
# ping-pong: per job the sequence of configurations it moved between
seq = collections.defaultdict(list)
for m in mv:
    seq[m["job"]].append((tuple(m["from"][:2]), tuple(m["to"][:2]) if "to" in m else None))
back = 0
trips = collections.Counter()
for steps in seq.values():
    seen = []
    for a, b in steps:
        if b is not None and b in seen:
            back += 1
        seen.append(a)
        if b is not None:
            trips[(a[0], b[0])] += 1
per_job = sorted(len(v) for v in seq.values())
print("jobs moved", len(seq), "moves per job: median", per_job[len(per_job) // 2], "max",
      per_job[-1], "returns to a configuration left before", back)
print("VM type pairs:", trips.most_common(8))
neg = [m for m in mv if m.get("seen_saving", 1) < m["redo_cost"]]
print("moves whose per-job seen saving < redo cost:", len(neg))
rec = sum(1 for m in mv if m.get("vm_reconfigured"))
print("moves whose old node's VM was reconfigured:", rec)
# how long a move's new configuration lasted: the time to the same job's next move
nxt = collections.defaultdict(list)
for m in mv:
    nxt[m["job"]].append(m["t"])
gaps = sorted(b - a for ts in nxt.values() for a, b in zip(ts, ts[1:]))
if gaps:
    def q(f):
        return gaps[int(f * (len(gaps) - 1))] / 3600
    print(f"time to the job's next move (h): quartiles {q(0.25):.2f} {q(0.5):.2f} {q(0.75):.2f};"
          f" within 1 h: {sum(g < 3600 for g in gaps)} of {len(gaps)}")
