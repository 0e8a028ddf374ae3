"""python decompose.py ROWS.jsonl... : where the distance goes in the default mode, per cell:
the cheapest policy's energy, tardiness (late jobs), the bound's parts (bounds.py rows),
waiting, slow and lost job-hours, moves (as "Where the distance goes" in results.md)."""
import json
import sys

rows, bounds = {}, {}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        key = (r["setting"], r["nodes"], r["scenario"], r["arrival"], r["seed"])
        if r["policy"] == "bound":
            bounds[key] = r
        elif r.get("mode", "default") == "default":
            if key not in rows or r["total_cost"] < rows[key]["total_cost"]:
                rows[key] = r


def money(x):
    return "–" if x is None else f"{x:,.2f}".replace(",", " ")


print("| setting | N | sc | arrival | seed | best | energy | tardiness (late) | bound energy "
      "| bound tardiness | wait h | slow h | lost h | moves |")
print("|" + "---|" * 14)
for key in sorted(rows):
    r, b = rows[key], bounds.get(key, {})
    print("| " + " | ".join([
        "on premise" if key[0] == "op" else "cloud", str(key[1]),
        str(key[2]) if key[0] == "op" else "–", key[3], str(key[4]), r["policy"],
        money(r["energy_cost"]), f"{money(r['tardiness_cost'])} ({r['late_jobs']})",
        money(b.get("energy_cost")), money(b.get("tardiness_cost")),
        f"{max(0.0, r['wait_s']) / 3600:.1f}", f"{r['slow_s'] / 3600:.1f}",
        f"{r['lost_work_s'] / 3600:.1f}",
        str(r["migrations"] + r["preemptions"] + r["resizes"])]) + " |")
