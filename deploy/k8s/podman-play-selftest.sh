#!/usr/bin/env bash
# Tests podman-play.sh end to end without the ldpgraph images: the real
# overlay is played with every image replaced by a Debian stand-in
# (docker.io/library/debian:bookworm-slim, which must be present locally)
# whose commands check the plumbing instead of running ldpgraph:
#
#   - DNS: the campaign and the agents resolve `ldpgraph-curator` (the
#     Service, a network alias) to the curator pod, and every agent pod by
#     its name;
#   - $(VAR) expansion and ConfigMap values (the dataset initContainer writes
#     nodes=$(LDPGRAPH_NODES), the curator's --fleet-settle, the agents'
#     --name $(POD_NAME));
#   - Secrets: each pod sees exactly its own files, byte for byte;
#   - volumes: emptyDir shared by initContainer and container; the agents'
#     state volume (a PVC) survives `down` and a second `play`; uid 10001
#     can write to it;
#   - the Job: a succeeding campaign makes `play` exit 0 with its log, a
#     failing one makes it exit non-zero after backoffLimit retries;
#   - `down --purge` leaves no pod, volume, secret or network behind.
#
#   deploy/k8s/podman-play-selftest.sh
#
# Uses the pod names of the real deployment: it refuses to run while one is
# up. Ends with "N passed, M failed".
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STANDIN="${STANDIN_IMAGE:-docker.io/library/debian:bookworm-slim}"
export LDPGRAPH_PODMAN_NETWORK="ldpgraph-selftest"
export LDPGRAPH_PLAY_TIMEOUT=120

command -v podman >/dev/null 2>&1 || die "podman is not installed"
podman image exists "$STANDIN" || die "the stand-in image $STANDIN is not present locally"
find_kustomize
ensure_validator_deps

tmp="$(mktemp -d)"
play="$K8S_DIR/podman-play.sh"
cleanup() {
  "$play" down --purge --overlay "$tmp/standin" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

passed=0
failed=0
check() { # check DESCRIPTION COMMAND...
  local what="$1"
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok: $what"
  else
    failed=$((failed + 1))
    echo "FAIL: $what"
  fi
}

# ---------------------------------------------- the stand-in overlay
overlay_copy="$(placeholder_tree local "$tmp")"
# A distinct content per secret file (and one binary byte string) so that
# the pods can prove they got exactly their own files.
while IFS= read -r f; do
  printf 'secret %s\n' "$f" >"$overlay_copy/$f"
done < <(generator_files "$overlay_copy")
printf '\000\001\377binary\n' >>"$overlay_copy/secrets/curator/node.key"

# The stand-in containers' scripts. Each check prints "check NAME ok" or
# "check NAME FAILED"; the long-running ones then sleep until stopped.
# shellcheck disable=SC2016
checks_sh='
  t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "check $n ok"; else echo "check $n FAILED"; fi; }
  sleep_until_stopped() { trap "exit 0" TERM INT; sleep 3600 & wait; }'
# shellcheck disable=SC2016
curator_sh="$checks_sh"'
  t curator-args sh -c "echo \"$*\" | grep -q -- \"--fleet-settle 10 \" && echo \"$*\" | grep -q -- \"--max-threads 512\"" - "$@"
  t curator-dataset test "$(cat /dataset/marker)" = nodes=3000
  t curator-secret-files test "$(ls /secrets | xargs)" = "admin.token curator.key curator.pem node.key"
  t curator-secret-bytes sh -c "printf \"secret secrets/curator/node.key\\n\\000\\001\\377binary\\n\" | cmp -s - /secrets/node.key"
  t curator-store-writable sh -c "echo x > /var/lib/ldpgraph/written"
  t curator-root-readonly sh -c "! touch /readonly-probe"
  t curator-uid test "$(id -u):$(id -g)" = 10001:10001
  sleep_until_stopped'
# shellcheck disable=SC2016
agent_sh="$checks_sh"'
  name=$(echo "$*" | sed -n "s/.*--name \([^ ]*\).*/\1/p")
  t agent-name-is-hostname test "$name" = "$(hostname)"
  t agent-resolves-curator getent hosts ldpgraph-curator
  t agent-resolves-peer getent hosts ldpgraph-agent-0
  t agent-dataset test "$(cat /dataset/marker)" = nodes=3000
  t agent-secret-files test "$(ls /secrets | xargs)" = "ca.pem nodes.credentials"
  runs=$(( $(cat /state/runs 2>/dev/null || echo 0) + 1 ))
  t agent-state-writable sh -c "echo $runs > /state/runs"
  echo "state runs=$runs"
  sleep_until_stopped'
# shellcheck disable=SC2016
campaign_sh="$checks_sh"'
  t campaign-env test "$LDPCTL_CURATOR $LDPCTL_CA $LDPCTL_SERVER_NAME" = "ldpgraph-curator:7443 /secrets/ca.pem ldpgraph-curator"
  t campaign-args test "$*" = "--method privge --epsilon 1 --timeout 1800"
  curator_ip=$(getent hosts ldpgraph-curator | cut -d" " -f1)
  pod_ip=$(getent hosts ldpgraph-curator-0 | cut -d" " -f1)
  t campaign-service-alias test -n "$curator_ip" -a "$curator_ip" = "$pod_ip"
  t campaign-resolves-agents sh -c "getent hosts ldpgraph-agent-0 && getent hosts ldpgraph-agent-1 && getent hosts ldpgraph-agent-2"
  t campaign-secret-files test "$(ls /secrets | xargs)" = "admin.token ca.pem"
  t campaign-secret-bytes test "$(cat /secrets/admin.token)" = "secret secrets/admin/admin.token"
  t campaign-dataset test "$(cat /dataset/marker)" = nodes=3000
  if [ -n "$CAMPAIGN_FAIL" ]; then echo "failing on purpose"; exit 3; fi
  echo "campaign stand-in done"'

make_standin() { # make_standin DIR FAIL
  mkdir -p "$1"
  cat >"$1/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../tree/overlays/local
images:
  - {name: localhost/ldpgraph-curator, newName: ${STANDIN%:*}, newTag: ${STANDIN##*:}}
  - {name: localhost/ldpgraph-agent, newName: ${STANDIN%:*}, newTag: ${STANDIN##*:}}
  - {name: localhost/ldpctl, newName: ${STANDIN%:*}, newTag: ${STANDIN##*:}}
patches:
  - target: {kind: StatefulSet}
    patch: |-
      - op: replace
        path: /spec/template/spec/initContainers/0/command
        value: ["sh", "-c", "echo nodes=\$(LDPGRAPH_NODES) > /dataset/marker"]
  - target: {kind: Job}
    patch: |-
      - op: replace
        path: /spec/template/spec/initContainers/0/command
        value: ["sh", "-c", "echo nodes=\$(LDPGRAPH_NODES) > /dataset/marker"]
  - target: {kind: StatefulSet, name: ldpgraph-curator}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/command
        value: ["sh", "-c", $(node -e 'console.log(JSON.stringify(process.argv[1]))' "$curator_sh"), "curator"]
  - target: {kind: StatefulSet, name: ldpgraph-agent}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/command
        value: ["sh", "-c", $(node -e 'console.log(JSON.stringify(process.argv[1]))' "$agent_sh"), "agent"]
  - target: {kind: Job}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/command
        value: ["sh", "-c", $(node -e 'console.log(JSON.stringify(process.argv[1]))' "$campaign_sh"), "campaign", "--method", "\$(LDPGRAPH_METHOD)", "--epsilon", "\$(LDPGRAPH_EPSILON)", "--timeout", "1800"]
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: CAMPAIGN_FAIL, value: "$2"}
EOF
}

make_standin "$tmp/standin" ""
make_standin "$tmp/standin-fail" "yes"

logs_have() { # logs_have CONTAINER PATTERN
  podman logs "$1" 2>&1 | grep -q -- "$2"
}
no_failed_checks() {
  local c
  for c in ldpgraph-curator-0-curator ldpgraph-agent-0-agent ldpgraph-agent-1-agent ldpgraph-agent-2-agent ldpgraph-campaign-campaign; do
    if podman logs "$c" 2>&1 | grep -q 'FAILED'; then
      podman logs "$c" 2>&1 | grep FAILED | sed "s/^/    $c: /"
      return 1
    fi
  done
}
all_checks_ran() { # every container printed its checks
  [[ "$(podman logs ldpgraph-curator-0-curator 2>&1 | grep -c '^check .* ok$')" -eq 7 ]] &&
    [[ "$(podman logs ldpgraph-agent-2-agent 2>&1 | grep -c '^check .* ok$')" -eq 6 ]] &&
    [[ "$(grep -c '^check .* ok$' "$tmp/play1.log")" -eq 7 ]]
}

for pod in ldpgraph-curator-0 ldpgraph-agent-0 ldpgraph-campaign; do
  podman pod exists "$pod" && die "pod $pod exists: a deployment is up; run podman-play.sh down first"
done

# ------------------------------------------------------------ run 1
echo "== play (stand-ins)"
if "$play" play --overlay "$tmp/standin" >"$tmp/play1.log" 2>&1; then rc=0; else rc=$?; fi
sed 's/^/    /' "$tmp/play1.log"
sleep 2 # let the long-running stand-ins print their checks
check "play exits 0 when the campaign succeeds" test "$rc" -eq 0
check "play prints the campaign's log" grep -q "campaign stand-in done" "$tmp/play1.log"
check "every stand-in ran all its checks" all_checks_ran
check "no stand-in check failed" no_failed_checks
check "agent state starts empty (runs=1)" logs_have ldpgraph-agent-1-agent "state runs=1"

echo "== down (keeps the volumes)"
"$play" down --overlay "$tmp/standin" | sed 's/^/    /'
check "down removes the pods" bash -c '! podman pod exists ldpgraph-curator-0 && ! podman pod exists ldpgraph-agent-1 && ! podman pod exists ldpgraph-campaign'
check "down keeps the PVC volumes" podman volume exists state-ldpgraph-agent-1
check "down removes the secrets" bash -c '! podman secret inspect ldpgraph-agent-secrets >/dev/null 2>&1'

# ------------------------------------------------------------ run 2: fail
echo "== play again, with a campaign that fails"
if "$play" play --overlay "$tmp/standin-fail" >"$tmp/play2.log" 2>&1; then rc=0; else rc=$?; fi
sed 's/^/    /' "$tmp/play2.log"
sleep 2
check "play exits non-zero when the campaign fails" test "$rc" -ne 0
check "the failing campaign was retried, then stopped" grep -Eq "failed after [0-9]+ restart\(s\) \(backoffLimit 3\)" "$tmp/play2.log"
check "agent state survived down/play (runs=2)" logs_have ldpgraph-agent-1-agent "state runs=2"

echo "== down --purge"
"$play" down --purge --overlay "$tmp/standin-fail" | sed 's/^/    /'
leftovers="$(
  podman pod ls --format '{{.Name}}' | grep '^ldpgraph-' || true
  podman volume ls --format '{{.Name}}' | grep 'ldpgraph-' || true
  podman secret ls --format '{{.Name}}' | grep '^ldpgraph-' || true
  podman network ls --format '{{.Name}}' | grep -x "$LDPGRAPH_PODMAN_NETWORK" || true
)"
check "down --purge leaves nothing behind" test -z "$leftovers"
[[ -z "$leftovers" ]] || echo "$leftovers" | sed 's/^/    left: /'

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
