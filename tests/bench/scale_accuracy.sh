#!/usr/bin/env bash
# Accuracy against graph size: does what the pipeline learns hold as n grows?
# For each graph family (the generator's defaults: degree-corrected SBM,
# 6 classes, 64 features, average degree 10, edge homophily 0.8; and the
# plain SBM, --degree-exponent 0) and each size, `ldpgraph eval --task node`
# at epsilon 1, RUNS runs from seed 1, one process per row:
#   privge        PrivGE's default: HDS, PPR or 16 KProp steps kept per run
#                 by validation (--propagation auto)
#   privge-ppr    PrivGE as the paper propagates: PPR only
#   lpgnn         LPGNN's default: Multi-bit, KProp, GraphSAGE
#   lpgnn-hds     LPGNN over HDS reports (unbiased by the curator)
#   raw           no privacy: the scaled features through PrivGE's pipeline
# Prints one line per row (mean, spread, the propagation the runs kept,
# seconds, peak MiB from /usr/bin/time) and writes OUT.tsv and OUT.svg (the
# chart in docs/papers.md, "Accuracy as the graph grows").
# Usage: tests/bench/scale_accuracy.sh [BUILD_DIR] [OUT]
# Environment: SIZES (default "10000 100000 1000000"), RUNS (default 3),
#   FAMILIES (default "default plain"), ROWS (default all five above).
# Wall-clock figures depend on the machine and what else it runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
out="${2:-$root/build/scale_accuracy}"
tool="$build/ldpgraph"
[ -x "$tool" ] || { echo "no $tool: build first (bash tests/run.sh)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
sizes="${SIZES:-10000 100000 1000000}"
runs="${RUNS:-3}"
families="${FAMILIES:-default plain}"
rows="${ROWS:-privge privge-ppr lpgnn lpgnn-hds raw}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
tsv="$out.tsv"
printf 'family\tnodes\trow\tmean\tstd\tkept\tseconds\tpeak_mib\n' > "$tsv"

flags_of() {
  case "$1" in
    privge) echo "--method privge --epsilon 1" ;;
    privge-ppr) echo "--method privge --propagation ppr --epsilon 1" ;;
    lpgnn) echo "--method lpgnn --epsilon 1" ;;
    lpgnn-hds) echo "--method lpgnn --mechanism hds --epsilon 1" ;;
    raw) echo "--method privge --mechanism none --scale symmetric --standardize" ;;
    *) echo "unknown row $1" >&2; exit 2 ;;
  esac
}

printf '%-8s %8s %-11s %7s %7s %-12s %9s %9s\n' family nodes row mean std kept seconds peak_MiB
for family in $families; do
  for n in $sizes; do
    data="$work/$family-$n"
    gen=(--out "$data" --nodes "$n" --seed 1)
    [ "$family" = plain ] && gen+=(--degree-exponent 0)
    "$tool" generate "${gen[@]}" > /dev/null 2>&1
    for row in $rows; do
      # shellcheck disable=SC2046
      /usr/bin/time -f '%e %M' -o "$work/time" \
        "$tool" eval --dataset "$data" --task node --runs "$runs" \
        --seed 1 --format json $(flags_of "$row") > "$work/eval.json" 2> "$work/eval.err" ||
        { echo "eval failed ($family $n $row):" >&2; cat "$work/eval.err" >&2; exit 1; }
      /usr/bin/python3 - "$family" "$n" "$row" "$work/eval.json" "$work/time" "$tsv" <<'PY'
import collections, json, sys
family, n, row, path, timing, tsv = sys.argv[1:]
j = json.load(open(path))
seconds, kib = open(timing).read().split()[-2:]
kept = collections.Counter(
    (r.get("tuning") or {}).get("propagation", "") for r in j["per_run"])
kept = ",".join(f"{k}:{v}" for k, v in sorted(kept.items()) if k) or "-"
std = j.get("std") or 0.0
line = [family, n, row, f"{j['mean']:.4f}", f"{std:.4f}", kept,
        f"{float(seconds):.1f}", f"{int(kib) / 1024:.0f}"]
print(f"{line[0]:<8} {line[1]:>8} {line[2]:<11} {line[3]:>7} {line[4]:>7} "
      f"{line[5]:<12} {line[6]:>9} {line[7]:>9}", flush=True)
open(tsv, "a").write("\t".join(line) + "\n")
PY
    done
  done
done

/usr/bin/python3 - "$tsv" "$out.svg" <<'PY'
# Accuracy (y) against log10 nodes (x), one line per family and row.
import collections, math, sys
tsv, svg = sys.argv[1:]
lines = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
series = collections.OrderedDict()
for fam, n, row, mean, std, *_ in lines:
    series.setdefault((fam, row), []).append((int(n), float(mean), float(std)))
W, H, L, R, T, B = 720, 420, 60, 200, 20, 50
ns = [p[0] for s in series.values() for p in s]
x0, x1 = math.log10(min(ns)) - 0.1, math.log10(max(ns)) + 0.1
x = lambda n: L + (math.log10(n) - x0) / (x1 - x0) * (W - L - R)
y = lambda a: T + (1 - a) * (H - T - B)
colours = {"privge": "#1f77b4", "privge-ppr": "#ff7f0e", "lpgnn": "#2ca02c",
           "lpgnn-hds": "#9467bd", "raw": "#7f7f7f"}
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
       f'font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>']
for a in [i / 10 for i in range(11)]:
    out.append(f'<line x1="{L}" x2="{W - R}" y1="{y(a)}" y2="{y(a)}" stroke="#ddd"/>')
    out.append(f'<text x="{L - 8}" y="{y(a) + 4}" text-anchor="end">{a:.1f}</text>')
for n in sorted(set(ns)):
    out.append(f'<text x="{x(n)}" y="{H - B + 18}" text-anchor="middle">{n:,}</text>')
out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">nodes (log scale)</text>')
out.append(f'<text x="14" y="{(T + H - B) / 2}" transform="rotate(-90 14 {(T + H - B) / 2})" '
           f'text-anchor="middle">test accuracy, eps 1</text>')
for i, ((fam, row), pts) in enumerate(series.items()):
    c = colours.get(row, "#000")
    dash = ' stroke-dasharray="6 4"' if fam == "plain" else ""
    path = " ".join(f"{x(n):.1f},{y(m):.1f}" for n, m, _ in pts)
    out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
    for n, m, s in pts:
        out.append(f'<circle cx="{x(n):.1f}" cy="{y(m):.1f}" r="3" fill="{c}"/>')
    ly = T + 14 + 18 * i
    out.append(f'<line x1="{W - R + 10}" x2="{W - R + 34}" y1="{ly - 4}" y2="{ly - 4}" '
               f'stroke="{c}" stroke-width="2"{dash}/>')
    out.append(f'<text x="{W - R + 40}" y="{ly}">{row} ({fam})</text>')
out.append("</svg>")
open(svg, "w").write("\n".join(out) + "\n")
PY
echo "wrote $tsv and $out.svg"
