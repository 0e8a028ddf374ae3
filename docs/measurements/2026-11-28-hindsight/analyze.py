"""python analyze.py BOUNDS.jsonl SEARCH-best.json... > analysis.md

Per cell: greedy (wspt-atc) against the best hindsight schedule (bill, energy,
tardiness, late jobs, moves, lost work, the LP bound of BOUNDS.jsonl), then what the best
schedule does differently: the jobs whose tier or mode it changed (weight, work, WSPT
index w / p, slack at submission, tardiness in each schedule), how the weighted
tardiness is spread over jobs, and the GPUs late jobs held."""
import json
import sys

import numpy as np


def moves(s):
    return s["migrations"] + s["preemptions"] + s["resizes"]


def gpus_held(jobs, attempts, late_only):
    """Mean GPUs a job held while running (GPU-seconds over run seconds), per job group."""
    late = {j["id"] for j in jobs if j["tardiness_s"] > 0}
    gs = rs = 0.0
    for a in attempts:
        if (a["job"] in late) == late_only:
            d = a["end_s"] - a["start_s"]
            gs, rs = gs + a["gpus"] * d, rs + d
    return gs / rs if rs else float("nan")


def node_share(attempts, trace_types, ids):
    """Share of run time of the jobs ``ids`` on each GPU type."""
    out: dict = {}
    for a in attempts:
        if a["job"] in ids:
            kind = trace_types[a["node"]]
            out[kind] = out.get(kind, 0) + a["end_s"] - a["start_s"]
    tot = sum(out.values()) or 1
    return {k: round(v / tot, 2) for k, v in sorted(out.items())}


def main():
    from andreas.simulator.generate import generate_trace
    bounds = {}
    for line in open(sys.argv[1]):
        d = json.loads(line)
        bounds[d["cell"]] = d["total_cost"]
    print("| cell | greedy (wspt-atc) | hindsight best | best / greedy | energy g / b | "
          "tardiness g / b | late g / b | moves g / b | lost h g / b | LP bound | "
          "greedy / bound | best / bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    details = []
    for path in sys.argv[2:]:
        d = json.load(open(path))
        g, b, cell = d["greedy"], d["best"], d["cell"]
        lb = bounds.get(cell, float("nan"))
        print(f"| {cell} | {g['total_cost']:,.2f} | {b['total_cost']:,.2f} | "
              f"{b['total_cost'] / g['total_cost']:.3f} | {g['energy_cost']:.2f} / "
              f"{b['energy_cost']:.2f} | {g['tardiness_cost']:,.2f} / {b['tardiness_cost']:,.2f} | "
              f"{g['late_jobs']} / {b['late_jobs']} | {moves(g)} / {moves(b)} | "
              f"{g['lost_work_s'] / 3600:.1f} / {b['lost_work_s'] / 3600:.1f} | {lb:,.2f} | "
              f"{g['total_cost'] / lb:.2f} | {b['total_cost'] / lb:.2f} |")
        details.append((cell, d))
    for cell, d in details:
        _, n, sc, arrival, seed = cell.split(":")
        tr = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                            cloud=False)
        types = {x.name: x.gpu_type for x in tr.nodes}
        gj = {j["id"]: j for j in d["greedy_jobs"]}
        bj = {j["id"]: j for j in d["best_jobs"]}
        print(f"\n## {cell}\n")
        print(f"{len(d['tier'])} tiers and {len(d['mode'])} modes changed of {len(gj)} jobs; "
              f"tiers {sorted(d['tier'].values())}, modes {sorted(d['mode'].values())}.\n")
        ws = {i: j["weight"] / max(j["ideal_s"] / 3600, 1e-9) for i, j in gj.items()}
        rank = {i: r for r, i in enumerate(sorted(ws, key=ws.get, reverse=True))}
        print("| job | tier | mode | weight | work h (fastest) | w/p rank (0 = highest) | "
              "slack h at submit | tardiness $ greedy | tardiness $ best |")
        print("|---|---|---|---|---|---|---|---|---|")
        for i in sorted(set(d["tier"]) | set(d["mode"])):
            j = gj[i]
            slack = (j["due_s"] - j["submit_s"] - j["ideal_s"]) / 3600
            print(f"| {i} | {d['tier'].get(i, 0)} | {d['mode'].get(i, 0)} | {j['weight']:.4f} | "
                  f"{j['ideal_s'] / 3600:.1f} | {rank[i]} | {slack:.1f} | "
                  f"{j['tardiness_cost']:,.2f} | {bj[i]['tardiness_cost']:,.2f} |")
        for name, jobs, att in (("greedy", d["greedy_jobs"], d["greedy_attempts"]),
                                ("best", d["best_jobs"], d["best_attempts"])):
            tc = np.sort([j["tardiness_cost"] for j in jobs])[::-1]
            late_ids = {j["id"] for j in jobs if j["tardiness_s"] > 0}
            late_w = [j["weight"] for j in jobs if j["tardiness_s"] > 0]
            th = sum(j["tardiness_s"] for j in jobs) / 3600
            print(f"\n- {name}: {len(late_ids)} late, tardiness {th:,.0f} job-h (unweighted), "
                  f"top 5 jobs {tc[:5].sum() / max(tc.sum(), 1e-9):.0%} of the weighted "
                  f"tardiness, top 20 {tc[:20].sum() / max(tc.sum(), 1e-9):.0%}; mean weight "
                  f"of late jobs {np.mean(late_w) if late_w else 0:.4f} (all "
                  f"{np.mean([j['weight'] for j in jobs]):.4f}); GPUs held while running: "
                  f"late jobs {gpus_held(jobs, att, True):.2f}, on-time "
                  f"{gpus_held(jobs, att, False):.2f}; late jobs' run time by GPU type "
                  f"{node_share(att, types, late_ids)}; starts "
                  f"{sum(j['starts'] for j in jobs)}, makespan "
                  f"{max(j['completion_s'] for j in jobs) / 3600:.0f} h")
        wl_g = sorted(gj, key=lambda i: -gj[i]["tardiness_cost"])[:10]
        print("\nThe 10 dearest jobs of greedy, their tardiness $ in each (w/p rank):\n")
        print(", ".join(f"{i} {gj[i]['tardiness_cost']:,.0f} -> {bj[i]['tardiness_cost']:,.0f} "
                        f"({rank[i]})" for i in wl_g))


if __name__ == "__main__":
    main()
