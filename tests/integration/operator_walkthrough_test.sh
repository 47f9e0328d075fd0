#!/usr/bin/env bash
# operator_walkthrough_test.sh BUILD_DIR SOURCE_DIR: the admin commands an
# operator types by hand in docs/operators.md, run as written against real
# deployments (ldpctl simulate --keep-running: a TLS curator and two agent
# host processes).
#   - "Starting a deployment by hand": campaign create (features, hds),
#     campaign wait, pipeline run, pipeline propagate, export; against a
#     curator that knows the graph (its pipeline needs the edges).
#   - "Private edges": campaign create (edges, edge-substitution),
#     campaign wait, campaign create (features, multibit), campaign wait,
#     pipeline run --graph-campaign; against a curator with --private-edges
#     (simulate --edges ns1), whose graph has no edges.
# The commands are the page's `build/ldpctl ... $A` lines: the test first
# checks that the page's lines are exactly the ones below, then runs each
# with $A = --config WORK/ldpctl.conf and the page's ids (c1, r1, ...; a
# fresh curator's) replaced by the ones the deployment gives out. Each must
# exit 0 and print what the page says it does: the campaign closes with 600
# reports, the pipeline's evaluation has an accuracy, the export writes
# 600 x 64 and the ids. Each deployment is stopped with SIGINT and must exit
# 0 leaving no process behind; on any exit path, including a failure, the
# trap stops it (SIGINT, then SIGKILL: its children die with it). Fails
# naming the command, its output and the deployment's log. About 10 s.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
bin=$(cd "$1" && pwd)
doc=$(cd "$2" && pwd)/docs/operators.md
for f in "$bin/ldpctl" "$bin/ldpgraph-curator" "$bin/ldpgraph-agent"; do
  [ -x "$f" ] || { echo "operator_walkthrough_test: $f is not built" >&2; exit 1; }
done
[ -f "$doc" ] || { echo "operator_walkthrough_test: no $doc" >&2; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/operator-walkthrough.XXXXXX")
sim_pid=""    # the running `ldpctl simulate`, if any
work=""       # its work folder
A=()          # the page's $A: the connection

# --- Failing, and stopping the deployment on every exit path. ---

fail() {
  echo "operator_walkthrough_test: FAILED: $*" >&2
  exit 1
}

show_tail() {  # show_tail FILE [LINES]
  [ -s "$1" ] || return 0
  echo "--- $1 (last ${2:-20} lines)" >&2
  tail -n "${2:-20}" "$1" | sed 's/\r/\n/g' >&2
}

# Stops the deployment: SIGINT, as Ctrl-C would, then SIGKILL after 20 s
# (its curator and agent hosts get SIGTERM when it dies). Its exit status
# goes to sim_rc.
sim_rc=""
stop_deployment() {
  local pid=$sim_pid
  sim_pid=""
  kill -0 "$pid" 2>/dev/null && kill -INT "$pid" 2>/dev/null
  local deadline=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "operator_walkthrough_test: ldpctl simulate (pid $pid) still running 20 s after SIGINT; SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  sim_rc=0
  wait "$pid" || sim_rc=$?
}

on_exit() {
  local status=$?
  trap - EXIT
  if [ -n "$sim_pid" ]; then stop_deployment; fi
  if [ "$status" -ne 0 ]; then
    show_tail "$scratch/cmd.out"
    show_tail "$scratch/cmd.err"
    if [ -n "$work" ]; then
      show_tail "$work.log" 30
      show_tail "$work/curator.log"
    fi
    echo "operator_walkthrough_test: files kept in $scratch" >&2
  else
    rm -rf "$scratch"
  fi
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# --- A deployment. ---

# start_deployment NAME [SIMULATE FLAGS]: starts `ldpctl simulate --nodes
# 600 --hosts 2 --seed 1 FLAGS --keep-running` in the background and waits
# (120 s at most) until its table is printed and `ldpctl status` through its
# ldpctl.conf sees 600 enrolled nodes.
start_deployment() {
  local name=$1
  shift
  work=$scratch/$name
  "$bin/ldpctl" simulate --nodes 600 --hosts 2 --seed 1 "$@" --keep-running \
      --work-dir "$work" >"$work.out" 2>"$work.log" &
  sim_pid=$!
  local deadline=$((SECONDS + 120))
  until grep -q "deployment keeps running" "$work.log" 2>/dev/null; do
    kill -0 "$sim_pid" 2>/dev/null ||
        fail "ldpctl simulate $* exited before the deployment was up"
    [ "$SECONDS" -lt "$deadline" ] ||
        fail "ldpctl simulate $* not up after 120 s"
    sleep 0.2
  done
  [ -f "$work/ldpctl.conf" ] || fail "ldpctl simulate wrote no $work/ldpctl.conf"
  A=(--config "$work/ldpctl.conf")
  "$bin/ldpctl" status "${A[@]}" >"$scratch/cmd.out" 2>"$scratch/cmd.err" ||
      fail "ldpctl status --config $work/ldpctl.conf: exit $?"
  grep -q "600 of 600" "$scratch/cmd.out" ||
      fail "ldpctl status: not 600 of 600 nodes enrolled"
  echo "deployment up: ldpctl simulate --nodes 600 --hosts 2 --seed 1 ${*:+$* }--keep-running (at ${SECONDS} s)"
}

# Stops the deployment; it must exit 0 on SIGINT and leave no process that
# mentions its work folder (curator, agent hosts).
finish_deployment() {
  stop_deployment
  [ "$sim_rc" -eq 0 ] || fail "ldpctl simulate exited $sim_rc on SIGINT (want 0)"
  local deadline=$((SECONDS + 10))
  while pgrep -f -- "$work/" >/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] ||
        fail "processes outlived ldpctl simulate: $(pgrep -af -- "$work/")"
    sleep 0.2
  done
  echo "deployment stopped (SIGINT, exit 0)"
}

# --- The page's commands. ---

# The `build/ldpctl ... $A` commands of docs/operators.md, as
# "BLOCK<TAB>COMMAND" lines, BLOCK counting the page's fenced blocks:
# continuation lines joined, the trailing comment dropped, blanks squeezed.
doc_commands() {
  awk '
    /^[ \t]*```/ { if (!fence) { fence = 1; block++ } else fence = 0; next }
    !fence { next }
    { line = cont $0; cont = "" }
    line ~ /\\$/ { sub(/\\$/, "", line); cont = line " "; next }
    {
      sub(/[ \t]+#.*$/, "", line)
      gsub(/[ \t]+/, " ", line)
      sub(/^ /, "", line); sub(/ $/, "", line)
      if (line ~ /^build\/ldpctl / && line ~ / \$A( |$)/) print block "\t" line
    }
  ' "$doc"
}

# Joins continuation lines and squeezes blanks, like doc_commands.
norm() {
  local s=${1//$'\\\n'/ }
  s=$(tr -s ' \t' ' ' <<<"$s")
  s=${s# }
  echo "${s% }"
}

# As the page writes them ("Starting a deployment by hand").
by_hand=(
  'build/ldpctl campaign create $A --attribute features --mechanism hds --epsilon 1 \
    --dimension 64 --sampled 8'
  'build/ldpctl campaign wait c1 $A'
  'build/ldpctl pipeline run c1 $A'
  'build/ldpctl pipeline propagate r1 $A'
  'build/ldpctl export r3 $A --out z.npy'
)
# As the page writes them ("Private edges").
private_edges=(
  'build/ldpctl campaign create $A --attribute edges --mechanism edge-substitution --epsilon 1 \
    --approach 1 --similarity cosine --top-k 10 --max-dummies 5 \
    --feature-mechanism multibit --feature-epsilon 2 --feature-dimension 64 \
    --feature-range 0,1 --round-timeout-ms 30000'
  'build/ldpctl campaign wait c1 $A'
  'build/ldpctl campaign create $A --attribute features --mechanism multibit --epsilon 2 \
    --dimension 64 --range 0,1'
  'build/ldpctl campaign wait c2 $A'
  'build/ldpctl pipeline run c2 $A --method lpgnn --graph-campaign c1'
)
for i in "${!by_hand[@]}"; do by_hand[i]=$(norm "${by_hand[i]}"); done
for i in "${!private_edges[@]}"; do private_edges[i]=$(norm "${private_edges[i]}"); done

# The page must still say exactly this: two blocks of such commands.
doc_commands >"$scratch/doc_commands"
mapfile -t blocks < <(cut -f1 "$scratch/doc_commands" | uniq)
[ "${#blocks[@]}" -eq 2 ] ||
    fail "$doc has ${#blocks[@]} blocks of \`build/ldpctl ... \$A\` commands, not 2 (by hand, private edges): update this test"
check_block() {  # check_block BLOCK TITLE EXPECTED...
  local block=$1 title=$2
  shift 2
  if ! diff -u --label "this test" --label "$doc ($title)" \
      <(printf '%s\n' "$@") \
      <(awk -F'\t' -v b="$block" '$1 == b { print $2 }' "$scratch/doc_commands") >&2; then
    fail "the commands of \"$title\" in $doc changed: update this test and its checks"
  fi
}
check_block "${blocks[0]}" "Starting a deployment by hand" "${by_hand[@]}"
check_block "${blocks[1]}" "Private edges" "${private_edges[@]}"

declare -A ids     # the page's ids (a fresh curator's) -> this deployment's
created=0          # campaigns created so far in the block: c1, c2, ...
recorded=0         # results recorded so far in the block: r1, r2, ...
new_block() {
  ids=()
  created=0
  recorded=0
}

# campaign_row ID: the row of `ldpctl campaign show ID` (id, state,
# attribute, mechanism, epsilon, targeted, reported, refused, rejected).
campaign_row() {
  "$bin/ldpctl" campaign show "$1" "${A[@]}" >"$scratch/show.out" 2>&1 ||
      fail "ldpctl campaign show $1: exit $?"
  awk -v id="$1" '$1 == id' "$scratch/show.out"
}

# features_spent: the ledger's "features mean M, max X" (ldpctl budget show).
features_spent() {
  "$bin/ldpctl" budget show "${A[@]}" >"$scratch/budget.out" 2>&1 ||
      fail "ldpctl budget show: exit $?"
  awk '$1 == "features" { print $2, $3, $4, $5 }' "$scratch/budget.out"
}

accuracy=""   # of the last `pipeline run`
evaluate=""   # its evaluate row

# run_doc COMMAND: runs one of the page's commands, build/ldpctl -> BIN/ldpctl,
# $A -> the connection, page ids -> ours; checks its exit code and output.
run_doc() {
  local cmd=$1 w
  local -a words argv=()
  read -r -a words <<<"$cmd"
  for w in "${words[@]}"; do
    if [ "$w" = build/ldpctl ]; then
      argv+=("$bin/ldpctl")
    elif [ "$w" = '$A' ]; then
      argv+=("${A[@]}")
    elif [[ $w =~ ^[cr][0-9]+$ ]]; then
      [ -n "${ids[$w]:-}" ] || fail "$cmd: no campaign or result stands for $w yet"
      argv+=("${ids[$w]}")
    else
      argv+=("$w")
    fi
  done
  echo "+ ${cmd}"
  local rc=0
  (cd "$scratch" && "${argv[@]}") >"$scratch/cmd.out" 2>"$scratch/cmd.err" || rc=$?
  [ "$rc" -eq 0 ] || fail "$cmd: exit $rc (want 0)"
  local out=$scratch/cmd.out err=$scratch/cmd.err
  case "${words[1]} ${words[2]}" in
    "campaign create")
      # One row: the new campaign, open.
      local id attribute
      id=$(awk 'NR == 2 { print $1 }' "$out")
      [[ $id =~ ^c[0-9]+$ ]] || fail "$cmd: printed no campaign id"
      attribute=$(awk 'NR == 2 { print $3 }' "$out")
      [[ " ${words[*]} " == *" --attribute $attribute "* ]] ||
          fail "$cmd: created a $attribute campaign"
      created=$((created + 1))
      ids[c$created]=$id
      echo "  the page's c$created is $id"
      ;;
    "campaign wait")
      # Every node answered; the campaign is (or, within 10 s, becomes)
      # CLOSED with 600 reports and no refusal.
      local id=${argv[3]} row deadline=$((SECONDS + 10))
      grep -q "600/600 answered (600 reported, 0 refused" "$err" ||
          fail "$cmd: not 600/600 answered"
      until row=$(campaign_row "$id"); [[ $row =~ ^$id\ +closed\  ]]; do
        [ "$SECONDS" -lt "$deadline" ] || fail "$cmd: $id not closed: $row"
        sleep 0.2
      done
      read -r -a row <<<"$row"
      [ "${row[5]} ${row[6]} ${row[7]}" = "600 600 0" ] ||
          fail "$cmd: $id closed with targeted/reported/refused ${row[5]}/${row[6]}/${row[7]}, want 600/600/0"
      echo "  $id closed: 600 reports"
      ;;
    "pipeline run")
      # Two results: the estimate (600 x 64) of the campaign, then the
      # evaluation of that estimate, whose details give an accuracy.
      local -a rows
      mapfile -t rows < <(grep -E '^r[0-9]+ ' "$out")
      [ "${#rows[@]}" -eq 2 ] || fail "$cmd: ${#rows[@]} results, want 2"
      local -a est ev
      read -r -a est <<<"${rows[0]}"
      read -r -a ev <<<"${rows[1]}"
      [ "${est[1]} ${est[2]} ${est[3]} ${est[4]} ${est[5]}" = "estimate ${argv[3]} 600 x 64" ] ||
          fail "$cmd: first result is not a 600 x 64 estimate of ${argv[3]}"
      [ "${ev[1]} ${ev[2]}" = "evaluate ${est[0]}" ] ||
          fail "$cmd: second result is not the evaluation of ${est[0]}"
      evaluate=${rows[1]}
      [[ $evaluate == *'"metric":"accuracy"'* ]] || fail "$cmd: the evaluation has no accuracy"
      accuracy=$(sed -nE 's/.*"metric":"accuracy".*"value":([0-9.eE+-]+)[,}].*/\1/p' <<<"$evaluate")
      awk -v a="$accuracy" 'BEGIN { exit !(a != "" && a >= 0 && a <= 1) }' ||
          fail "$cmd: accuracy '$accuracy' is not in [0, 1]"
      ids[r$((recorded + 1))]=${est[0]}
      ids[r$((recorded + 2))]=${ev[0]}
      echo "  the page's r$((recorded + 1)) is ${est[0]} (estimate), r$((recorded + 2)) is ${ev[0]} (evaluate): accuracy $accuracy"
      recorded=$((recorded + 2))
      ;;
    "pipeline propagate")
      # One result: the embedding, 600 x 64, propagated from the estimate.
      local -a row
      read -r -a row <<<"$(grep -E '^r[0-9]+ ' "$out")"
      [ "${row[1]} ${row[2]} ${row[3]} ${row[4]} ${row[5]}" = "propagate ${argv[3]} 600 x 64" ] ||
          fail "$cmd: no 600 x 64 propagation of ${argv[3]}"
      recorded=$((recorded + 1))
      ids[r$recorded]=${row[0]}
      echo "  the page's r$recorded is ${row[0]} (propagate)"
      ;;
    "export "*)
      # z.npy (600 x 64, float32) and z.ids.npy (600 node ids).
      grep -q "wrote 600 x 64 to z.npy and the node ids to z.ids.npy" "$err" ||
          fail "$cmd: did not say it wrote 600 x 64 and the ids"
      head -c 128 "$scratch/z.npy" | grep -aq "'shape': (600, 64)" ||
          fail "$cmd: z.npy is not a 600 x 64 .npy"
      head -c 128 "$scratch/z.ids.npy" | grep -aq "'shape': (600,)" ||
          fail "$cmd: z.ids.npy is not 600 ids"
      echo "  z.npy: 600 x 64, z.ids.npy: 600 ids"
      ;;
    *)
      fail "$cmd: this test has no check for it; add one"
      ;;
  esac
}

# --- Starting a deployment by hand: a curator that knows the graph. ---

start_deployment by-hand
new_block
for c in "${by_hand[@]}"; do run_doc "$c"; done
[[ $evaluate == *'"graph":"curator"'* ]] ||
    fail "by hand: the evaluation did not use the curator's graph"
# PrivGE at epsilon 1 on the generated 600 nodes (6 classes) learns: 0.98
# with simulate's seed; chance is about 0.17.
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' ||
    fail "by hand: accuracy $accuracy, want > 0.5"
finish_deployment

# --- Private edges: a curator with --private-edges (no edges of its own). ---

start_deployment private-edges --edges ns1
grep -q "600 nodes, 0 edges" "$scratch/cmd.out" ||
    fail "private edges: the curator's graph has edges (want --private-edges: 0)"
new_block
run_doc "${private_edges[0]}"   # c1: edges, edge-substitution
run_doc "${private_edges[1]}"   # wait c1
spent=$(features_spent)
[ -n "$spent" ] || fail "private edges: ldpctl budget show has no features line"
run_doc "${private_edges[2]}"   # c2: features, multibit, the same question
run_doc "${private_edges[3]}"   # wait c2
# "answered from the memo": the ledger charges eps_x once.
[ "$(features_spent)" = "$spent" ] ||
    fail "private edges: c2 charged features again: before '$spent', after '$(features_spent)'"
echo "  c2 answered from the memo: features $spent, unchanged"
run_doc "${private_edges[4]}"   # pipeline run c2 --graph-campaign c1
for want in "\"graph\":\"${ids[c1]}\"" '"graph_mechanism":"edge-substitution"' \
    '"method":"lpgnn"' '"graph_reports":600'; do
  [[ $evaluate == *"$want"* ]] || fail "private edges: the evaluation's details lack $want"
done
finish_deployment

echo "operator_walkthrough_test: ok (${SECONDS} s)"
