"""python table.py: README.md's tables from before-*.jsonl (the base, aaf13fc),
after-*.jsonl (the fix) and variants.jsonl (the idle-tail variants), with the grid's
lower bounds from ../2026-11-28-grid/bounds.jsonl and ../2026-11-28-lpbound/bounds.jsonl.
Checks that default greedy (``node``) has the same bill before and after."""
import json
from pathlib import Path

HERE = Path(__file__).parent


def rows(name: str) -> dict:
    out: dict = {}
    path = HERE / name
    for line in path.read_text().splitlines() if path.exists() else []:
        r = json.loads(line)
        out[(r["cell"], r.get("tail", r["variant"]))] = r
    return out


def bounds() -> dict:
    out = {}
    for f in ("../2026-11-28-grid/bounds.jsonl", "../2026-11-28-lpbound/bounds.jsonl"):
        for line in (HERE / f).read_text().splitlines():
            r = json.loads(line)
            if r.get("setting") == "op":
                cell = f"op:{r['nodes']}:{r['scenario']}:{r['arrival']}:{r['seed']}"
                out[cell] = r["total_cost"]
    return out


def bill(r) -> str:
    return f"{r['total_cost']:,.2f} ({r['late_jobs']})".replace(",", " ")


def moves(r) -> str:
    m = r["moves"]
    return f"{m.get('gpus', 0)}/{m.get('class', 0)}/{m.get('same cfg, other node', 0)}"


def table(kind: str, bound: dict) -> None:
    before, after = rows(f"before-{kind}.jsonl"), rows(f"after-{kind}.jsonl")
    cells = list(dict.fromkeys(c for c, _ in after))
    grid = kind == "grid"
    head = ["cell", "node $ (late)", "ai+keep before $ (late)", "ai+keep after $ (late)",
            "after / node", "before / node"]
    head += (["bound", "node / bound", "before / bound", "after / bound"] if grid else
             ["kWh node / before / after", "makespan h node / before / after"])
    head += ["lost work h node / before / after", "moves g/class/same before / after"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    total = {"node": 0.0, "before": 0.0, "after": 0.0}
    for c in cells:
        n, a = after[(c, "node")], after[(c, "above-idle+keep")]
        b = before.get((c, "above-idle+keep"))
        nb = before.get((c, "node"))
        assert nb is None or nb["total_cost"] == n["total_cost"], c
        line = [c.split(":", 1)[1], bill(n), bill(b) if b else "-", bill(a),
                f"{a['total_cost'] / n['total_cost']:.4f}",
                f"{b['total_cost'] / n['total_cost']:.4f}" if b else "-"]
        if grid:
            lb = bound[c]
            line += [f"{lb:.2f}", f"{n['total_cost'] / lb:.4f}",
                     f"{b['total_cost'] / lb:.4f}" if b else "-", f"{a['total_cost'] / lb:.4f}"]
        else:
            line += [" / ".join(f"{x['energy_kwh']:.0f}" for x in (n, b, a)),
                     " / ".join(f"{x['makespan_s'] / 3600:.1f}" for x in (n, b, a))]
        line += [" / ".join(f"{x['lost_work_s'] / 3600:.0f}" for x in (n, b, a) if x),
                 f"{moves(b)} / {moves(a)}" if b else moves(a)]
        print("| " + " | ".join(line) + " |")
        total["node"] += n["total_cost"]
        total["after"] += a["total_cost"]
        total["before"] += b["total_cost"] if b else float("nan")
    print(f"\nTotals: node {total['node']:.2f}, above-idle+keep before {total['before']:.2f}, "
          f"after {total['after']:.2f} $; late jobs after: "
          f"{sum(after[(c, 'above-idle+keep')]['late_jobs'] for c in cells)}\n")


def variants(bound: dict) -> None:
    var, after = rows("variants.jsonl"), {**rows("after-zeus.jsonl"), **rows("after-grid.jsonl")}
    cells = list(dict.fromkeys(c for c, _ in after))
    tails = ["self", "0", "0.15"]
    print("| cell | node | " + " | ".join(f"tail {t}" for t in tails) + " | tail 0.3 (shipped) |")
    print("|" + "---|" * (len(tails) + 3))
    worse = {t: 0 for t in [*tails, "0.3"]}
    for c in cells:
        n = after[(c, "node")]["total_cost"]
        vals = [var.get((c, t)) for t in tails] + [after[(c, "above-idle+keep")]]
        for t, v in zip([*tails, "0.3"], vals):
            worse[t] += bool(v and v["total_cost"] > n)
        print(f"| {c} | {n:.2f} | " + " | ".join(
            f"{v['total_cost']:.2f} ({v['late_jobs']})" if v else "-" for v in vals) + " |")
    print("\nCells dearer than node: " + ", ".join(f"tail {t}: {k}" for t, k in worse.items()))


b = bounds()
print("## Zeus\n")
table("zeus", b)
print("## Grid\n")
table("grid", b)
print("## Variants\n")
variants(b)
