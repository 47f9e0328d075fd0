#!/usr/bin/env python3
"""Poisoning that fights back: attacker x defence x malicious share.

    python3 tests/bench/poisoning_bench.py [--build DIR] [--out DIR] [--plot DIR]
        [--quick] [--jobs J] [--runs R] [--datasets cora,pubmed]

Runs `ldpgraph eval` (seed 1; --runs R, default 5, at 0 and 10 % on cora,
the claims' cells; one run elsewhere) for every cell of the grid (attackers: maximal-gain,
input, adaptive, labels-only, and fake-edges over a Blink graph; defences:
none, screen, robust, their combination, edge-consistency; malicious shares
0, 1, 5, 10 and 20 %) for LPGNN (Multi-bit eps 3, label RR eps 3, the
chart of docs/scenarios.md) and PrivGE (HDS eps 1, labels known to the
curator), on cora and pubmed from ../shared/datasets (or
$LDPGRAPH_DATASETS). Each cell's JSON
is kept in OUT/cells/ and reused by the next run (delete it to recompute).
Writes OUT/poisoning.md (the table), OUT/poisoning.json (every cell) and one
SVG chart per dataset and method into PLOT (ldpgraph plot).

Then it checks the claims docs/scenarios.md makes ("Every attacker against
every defence, measured"; CLAIMS below), each on the mean of the paired
differences over the cells' runs (run r of every cell is seed 1, run r: the
same split and honest reports), never on one run: at 10 % malicious on
cora's LPGNN the undefended attack raises the target rate by more than 1
point; the screen holds maximal-gain's target rate within 2 points of the
unattacked run (accuracy within 3: the flagged nodes are lost to
training); robust cuts the adaptive attack's increase (its target rate
below the undefended attack's, its accuracy at most 1.5 points below). A claim
that does not hold fails the benchmark (exit 1); one whose cells hold fewer
than 5 runs is not judged. Cells a claim does not name are reported, not
judged: "this defence fails against this attacker" is a result.

--cached-only: the table, charts and claims from the cells already computed
(a grid cut short); claims whose cells are missing are skipped.

--quick: the generated 3000-node dataset, one run, shares 0 and 0.2, LPGNN
with three attackers; no claims are checked (a smoke run for ctest).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

ATTACKERS = ["maximal-gain", "input", "adaptive", "labels-only"]
FEATURE_DEFENCES = ["none", "screen", "robust", "screen,robust"]
EDGE_DEFENCES = ["none", "edge-consistency", "edge-consistency,robust"]
SHARES = ["0", "0.01", "0.05", "0.1", "0.2"]
METHODS = {
    "lpgnn": ["--method", "lpgnn", "--epsilon", "3", "--label-epsilon", "3"],
    "privge": [],
}
TITLES = {
    "lpgnn": "LPGNN (Multi-bit eps 3, label RR eps 3)",
    "privge": "PrivGE (HDS eps 1, labels known to the curator)",
}
# fake-edges: a Blink graph at eps_e = 8 learned over by LPGNN (at eps_e = 1
# the hard graph keeps about 70 of cora's 5,278 edges: LPGNN is near chance
# with or without an attack).
BLINK = ["--edges", "blink", "--edge-epsilon", "8"]

# (dataset, method, attacker) -> (the defence, the malicious share, what is
# claimed): "holds", the defended target rate within HOLD points of the
# unattacked run and its accuracy within ACCURACY_LOST; "cuts", the defended
# target rate below the undefended attack's and its accuracy at most
# CUT_COST points below it. Both: the undefended attack raises the target
# rate by more than MOVES points. Means of paired differences over at least
# CLAIM_RUNS runs. What does not hold, and is not claimed: robust does not
# bring adaptive back within 2 points (+1.7 on this machine's kernels, +3.4
# under OPENBLAS_CORETYPE=Prescott, 5 runs each), nor labels-only; nothing
# holds at 20 % but the screen against maximal-gain (the table); pubmed's
# cells are one run each, so nothing is claimed there.
# tests/integration/poisoning_defence_test.cc checks the same claims.
CLAIMS = {
    ("cora", "lpgnn", "maximal-gain"): ("screen", "0.1", "holds"),
    ("cora", "lpgnn", "adaptive"): ("robust", "0.1", "cuts"),
}
MOVES, HOLD, ACCURACY_LOST, CUT_COST = 1.0, 2.0, 3.0, 1.5
CLAIM_RUNS = 5


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--out", default=None)
    p.add_argument("--plot", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--runs", type=int, default=CLAIM_RUNS)
    p.add_argument("--datasets", default="cora,pubmed")
    p.add_argument("--only", choices=["all", "features", "edges"],
                   default="all")
    p.add_argument("--methods", default="lpgnn,privge",
                   help="the methods' cells to run (lpgnn, privge)")
    p.add_argument("--cached-only", action="store_true",
                   help="report the cells already in OUT/cells, run none")
    return p.parse_args()


def cells(datasets, quick, only):
    """Every (dataset, method, attacker, defence, share, extra flags)."""
    out = []
    for ds in datasets:
        methods = ["lpgnn"] if quick else ["lpgnn", "privge"]
        for m in methods:
            if ds == "pubmed" and m != "lpgnn":
                continue  # pubmed: LPGNN only (a run takes minutes)
            if only in ("all", "features"):
                out += feature_cells(ds, m, quick)
            if only in ("all", "edges") and not quick and ds == "cora" \
                    and m == "lpgnn":
                for d in EDGE_DEFENCES:
                    out.append((ds, m, "blink", d, "0", BLINK))
                for d in EDGE_DEFENCES:
                    out.append((ds, m, "fake-edges", d, "0.1", BLINK))
    return out


def feature_cells(ds, m, quick):
    # robust reads label reports: PrivGE (the curator's labels) has none.
    defences = FEATURE_DEFENCES if m == "lpgnn" else ["none", "screen"]
    shares = ["0", "0.2"] if quick else SHARES
    attackers = (["maximal-gain", "adaptive", "labels-only"] if quick
                 else ATTACKERS)
    out = [(ds, m, "none", d, "0", []) for d in defences
           if ds != "pubmed" or d in ("none", "robust")]
    for a in attackers:
        # Every share for the attackers of the earlier table on LPGNN; 10
        # and 20 % for the others (the grid's time on two cores).
        a_shares = (shares if quick or (m == "lpgnn" and a in
                                        ("maximal-gain", "input"))
                    else ["0", "0.1", "0.2"])
        if ds == "pubmed":
            # pubmed: none, screen and robust at 10 %; the claims' defence
            # too, and 20 % for labels-only and maximal-gain.
            ds_defences = ["none", "screen", "robust"]
            for d in ds_defences:
                out.append((ds, m, a, d, "0.1", []))
            if a in ("labels-only", "maximal-gain"):
                for d in ("none", "robust"):
                    out.append((ds, m, a, d, "0.2", []))
            continue
        for s in a_shares[1:]:
            # The combination at the claims' share only (and in --quick).
            for d in defences:
                if d == "screen,robust" and s != "0.1" and not quick:
                    continue
                out.append((ds, m, a, d, s, []))
    return out


def key(c):
    ds, m, a, d, s, _ = c
    return f"{ds}-{m}-{a}-{d.replace(',', '+')}-{s}"


def run_cell(tool, data, out, runs, c):
    ds, m, a, d, s, extra = c
    path = os.path.join(out, "cells", key(c) + ".json")
    if os.path.exists(path):
        return c, json.load(open(path))
    # The claims' cells (0 and 10 %) get every run; the others, and pubmed,
    # one.
    n = runs if s in ("0", "0.1") and ds != "pubmed" else 1
    cmd = [tool, "eval", "--dataset", data[ds], *METHODS[m], *extra,
           "--runs", str(n), "--seed", "1", "--threads", "1",
           "--attack-class", "0", "--defence", d, "--format", "json"]
    if s != "0":
        cmd += ["--malicious", s, "--attack",
                a if a != "blink" else "maximal-gain"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"poisoning_bench: {' '.join(cmd)} failed:\n{r.stderr}")
    j = json.loads(r.stdout)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(j, f)
    os.replace(tmp, path)
    return c, j


def caught(j):
    """Mean count of the attacker's nodes each defence caught per run."""
    out = {}
    for r in j["per_run"]:
        for name, field in (("screen", "malicious_flagged"),
                            ("robust", "malicious_dropped"),
                            ("edges", "malicious_flagged")):
            v = r.get(name, {})
            if isinstance(v, dict) and field in v:
                out.setdefault(name, []).append(v[field])
    return {k: sum(v) / len(v) for k, v in out.items()}


def summary(j):
    return {"accuracy": j["mean"], "accuracy_std": j["std"],
            "per_run_accuracy": [r["metric"] for r in j["per_run"]],
            "per_run_target_rate": [r.get("target_rate", 0)
                                    for r in j["per_run"]],
            "target_rate": j["target_rate"]["mean"],
            "target_rate_std": j["target_rate"]["std"],
            "malicious": j["per_run"][0].get("screen", {}).get("malicious"),
            "caught": caught(j)}


def main():
    a = parse_args()
    tool = os.path.join(a.build, "ldpgraph")
    if not os.access(tool, os.X_OK):
        sys.exit(f"no {tool}: build first (bash tests/run.sh)")
    out = a.out or os.path.join(a.build, "poisoning-bench")
    plot = a.plot or out
    os.makedirs(os.path.join(out, "cells"), exist_ok=True)
    os.makedirs(plot, exist_ok=True)
    shared = os.environ.get("LDPGRAPH_DATASETS", "../shared/datasets")
    data = {}
    if a.quick:
        gen = os.path.join(out, "dataset")
        subprocess.run([tool, "generate", "--out", gen, "--force"], check=True,
                       capture_output=True)
        data["generated"] = gen
        runs = 1
    else:
        for ds in a.datasets.split(","):
            path = os.path.join(shared, ds)
            if not os.path.exists(os.path.join(path, "meta.json")):
                sys.exit(f"poisoning_bench: no dataset {path}")
            data[ds] = path
        runs = a.runs
    grid = [c for c in cells(list(data), a.quick, a.only)
            if c[1] in a.methods.split(",")]
    if a.cached_only:
        grid = [c for c in grid if os.path.exists(
            os.path.join(out, "cells", key(c) + ".json"))]
    print(f"== poisoning: {len(grid)} cells, {runs} runs each, "
          f"{a.jobs} at a time ==", flush=True)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(run_cell, tool, data, out, runs, c) for c in grid]
        for n, f in enumerate(concurrent.futures.as_completed(futures), 1):
            c, j = f.result()
            results[key(c)] = summary(j)
            print(f"[{n}/{len(grid)}] {key(c)}: {100 * j['mean']:.1f} / "
                  f"{100 * j['target_rate']['mean']:.1f}", flush=True)
    json.dump(results, open(os.path.join(out, "poisoning.json"), "w"), indent=1)
    write_table(results, grid, out)
    write_charts(results, grid, out, plot, tool)
    if a.quick:
        return 0
    return check_claims(results)


def write_table(results, grid, out):
    md = ["accuracy / target rate in % (test nodes of other classes predicted "
          "as the attack class 0); in brackets, the attacker's nodes the "
          "defences caught per run\n"]
    groups = {}
    for c in grid:
        ds, m, a, d, s, _ = c
        groups.setdefault((ds, m), {}).setdefault((a, d), {})[s] = results[key(c)]
    for (ds, m), rows in groups.items():
        shares = sorted({s for r in rows.values() for s in r}, key=float)
        md.append(f"\n**{ds}, {TITLES[m]}**\n")
        md.append("| attacker | defence | " + " | ".join(
            f"{float(s) * 100:g} %" for s in shares) + " |")
        md.append("|---|---|" + "---|" * len(shares))
        for (atk, d), row in rows.items():
            cellsx = []
            for s in shares:
                r = row.get(s)
                if r is None:
                    cellsx.append("")
                    continue
                text = f"{100 * r['accuracy']:.1f} / {100 * r['target_rate']:.1f}"
                if r["caught"] and s != "0":
                    text += " (" + ", ".join(
                        f"{v:.0f}" for v in r["caught"].values()) + ")"
                cellsx.append(text)
            md.append(f"| {atk} | {d} | " + " | ".join(cellsx) + " |")
    text = "\n".join(md) + "\n"
    print(text)
    open(os.path.join(out, "poisoning.md"), "w").write(text)


def write_charts(results, grid, out, plot, tool):
    groups = {}
    for c in grid:
        ds, m, a, d, s, _ = c
        groups.setdefault((ds, m), []).append(c)
    for (ds, m), cs in groups.items():
        series = []
        baseline = results.get(key((ds, m, "none", "none", "0", [])))
        attackers = sorted({c[2] for c in cs if c[2] not in ("none", "blink")},
                           key=lambda x: (ATTACKERS + ["fake-edges"]).index(x))
        for atk in attackers:
            for d in ("none", CLAIMS.get((ds, m, atk), ("robust",))[0]):
                pts = sorted([c for c in cs if c[2] == atk and c[3] == d],
                             key=lambda c: float(c[4]))
                if not pts:
                    continue
                base = [baseline] if atk != "fake-edges" and baseline else []
                ys = base + [results[key(c)] for c in pts]
                xs = ([0.0] if base else []) + [float(c[4]) for c in pts]
                series.append({"name": f"{atk}, {d}", "x": xs,
                               "y": [r["target_rate"] for r in ys],
                               "error": [r["target_rate_std"] for r in ys]})
        chart = {"title": f"{ds}, {TITLES[m]}: target rate under poisoning",
                 "x_label": "fraction of malicious agents (attack class 0)",
                 "y_label": "target rate (other classes predicted 0)",
                 "series": series}
        path = os.path.join(out, f"poisoning-{ds}-{m}.json")
        json.dump(chart, open(path, "w"))
        svg = os.path.join(plot, f"poisoning-{ds}-{m}.svg")
        subprocess.run([tool, "plot", "--input", path, "--output", svg],
                       check=True)
        if not open(svg).read().startswith("<svg "):
            sys.exit(f"poisoning_bench: {svg} is not an SVG document")
        print(f"wrote {svg}")


def paired(a, b, field):
    """Mean, standard error (points) and count of a - b over paired runs."""
    xs = [100 * (x - y) for x, y in zip(a["per_run_" + field],
                                        b["per_run_" + field])]
    n = len(xs)
    mean = sum(xs) / n if n else 0.0
    var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return mean, (var / n) ** 0.5, n


def check_claims(results):
    bad = []
    for (ds, m, atk), (d, share, kind) in CLAIMS.items():
        try:
            base = results[key((ds, m, "none", "none", "0", []))]
            attacked = results[key((ds, m, atk, "none", share, []))]
            defended = results[key((ds, m, atk, d, share, []))]
        except KeyError:
            continue  # not in this grid (--datasets)
        name = f"claim {ds} {m} {atk} at {float(share) * 100:g} % with {d}"
        up = paired(attacked, base, "target_rate")
        if up[2] < CLAIM_RUNS:
            print(f"{name}: not judged ({up[2]} paired runs; the claims "
                  f"need {CLAIM_RUNS}: delete the cached cells or pass "
                  f"--runs {CLAIM_RUNS})")
            continue
        checks = [("undefended raises the target rate", up, ">", MOVES)]
        if kind == "holds":
            checks += [
                ("defended target rate - unattacked",
                 paired(defended, base, "target_rate"), "<=", HOLD),
                ("accuracy lost",
                 paired(base, defended, "accuracy"), "<=", ACCURACY_LOST)]
        else:
            checks += [
                ("target rate cut",
                 paired(attacked, defended, "target_rate"), ">", 0.0),
                ("accuracy against the undefended attack",
                 paired(defended, attacked, "accuracy"), ">=", -CUT_COST)]
        ok = True
        parts = []
        for what, (mean, se, n), op, bound in checks:
            held = {">": mean > bound, "<=": mean <= bound,
                    ">=": mean >= bound}[op]
            ok = ok and held
            margin = abs(mean - bound) / se if se > 0 else float("inf")
            parts.append(f"{what} {mean:+.2f} +- {se:.2f} ({op} {bound:g}; "
                         f"{margin:.1f} standard errors)")
        print(f"{name} ({kind}, {up[2]} paired runs): " + "; ".join(parts) +
              (": holds" if ok else ": FAILS"))
        if not ok:
            bad.append(f"{ds} {m} {atk} {d}")
    if bad:
        print("poisoning_bench: claims that do not hold: " + "; ".join(bad),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
