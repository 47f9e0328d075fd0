#!/usr/bin/env bash
# Runs the Kubernetes deployment on one machine with `podman kube play`,
# without a cluster: the curator, the agent hosts and the campaign, from the
# same manifests (overlays/local).
#
#   deploy/k8s/podman-play.sh play [--overlay DIR]
#       renders the overlay, converts it (podman-convert.mjs), creates the
#       network, secrets and volumes, starts the curator, then all agent
#       hosts at once, then the campaign; waits for the campaign to finish,
#       prints its log, and exits non-zero if it failed. The curator and the
#       agents keep running afterwards (as in a cluster).
#   deploy/k8s/podman-play.sh down [--purge] [--overlay DIR]
#       removes the pods, the podman secrets and the network. The volumes
#       standing in for PersistentVolumeClaims (the curator's store, the
#       agents' budget state) are KEPT, as a cluster keeps PVCs, so a later
#       `play` continues with them; --purge removes them too.
#
# Needs podman (tested with 4.3.1), kubectl or kustomize, node and npm (the
# converter shares validate.sh's npm dependencies), the images
# localhost/ldpgraph-curator:dev, localhost/ldpgraph-agent:dev and
# localhost/ldpctl:dev (built from deploy/Dockerfile), and the secrets from
# make-secrets.sh.
#
# What stands in for what (details in podman-convert.mjs):
#   StatefulSet pods  -> pods <sts>-<ordinal> with that hostname; each
#                        volumeClaimTemplate -> podman volume
#                        <claim>-<sts>-<ordinal>
#   Job               -> pod <job>, restartPolicy OnFailure; this script
#                        enforces backoffLimit and activeDeadlineSeconds
#   Services          -> one podman network with DNS; pods resolve each other
#                        by pod name, and the pods a Service selects carry the
#                        Service name as a network alias (ldpgraph-curator)
#   Secrets           -> podman secrets mounted as secret volumes
#   ConfigMap         -> kube play --configmap
#   probes            -> none (podman 4.3 would need curl in the images and
#                        systemd); this script watches the campaign instead
#
# Environment:
#   LDPGRAPH_PODMAN_NETWORK  network name (default ldpgraph)
#   LDPGRAPH_PLAY_TIMEOUT    seconds to wait for the campaign (default: the
#                            Job's activeDeadlineSeconds, else 7200)
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NETWORK="${LDPGRAPH_PODMAN_NETWORK:-ldpgraph}"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

log() { echo "[$(date +%H:%M:%S)] $*"; }

sub="${1:-}"
[[ $# -gt 0 ]] && shift
overlay="$K8S_DIR/overlays/local"
purge=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --overlay)
      [[ $# -ge 2 ]] || die "--overlay needs a directory"
      overlay="$(cd "$2" && pwd)"
      shift 2
      ;;
    --purge)
      purge=1
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
case "$sub" in
  play | down) ;;
  -h | --help)
    usage
    exit 0
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac
[[ "$sub" == down || $purge -eq 0 ]] || die "--purge goes with down"

command -v podman >/dev/null 2>&1 || die "podman is not installed"
PODMAN_VERSION="$(podman version --format '{{.Client.Version}}' 2>/dev/null)" ||
  die "podman does not answer (podman version failed)"
find_kustomize
ensure_validator_deps

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
plan="$tmp/play"

# ------------------------------------------------------ render + convert
render_dir="$overlay"
missing="$(missing_generator_files "$overlay")"
if [[ -n "$missing" ]]; then
  if [[ "$sub" == play ]]; then
    {
      echo "podman-play.sh: the overlay's secrets are missing:"
      echo "$missing" | sed "s|^|  $overlay/|"
      echo "  Run deploy/k8s/make-secrets.sh first."
    } >&2
    exit 1
  fi
  # down only needs the names: render with placeholders.
  render_dir="$(placeholder_tree "$(basename "$overlay")" "$tmp")"
fi
render "$render_dir" "$tmp/rendered.yaml"
node "$K8S_DIR/podman-convert.mjs" --in "$tmp/rendered.yaml" --out-dir "$plan" \
  --podman-version "$PODMAN_VERSION" --network "$NETWORK"

# The plan, by step kind.
images=() secrets=() pvcs=() workloads=() jobs=() configmaps=""
while read -r kind a b c d; do
  case "$kind" in
    image) images+=("$a") ;;
    configmaps) configmaps="$plan/$a" ;;
    secret) secrets+=("$a $b") ;;
    pvc) pvcs+=("$a $b") ;;
    workload) workloads+=("$a $b $c $d") ;;
    job) jobs+=("$a $b $c $d") ;;
    *) die "unknown plan step: $kind" ;;
  esac
done <"$plan/plan.txt"

all_pods() {
  local w name file aliases pods
  for w in "${workloads[@]}"; do
    read -r name file aliases pods <<<"$w"
    tr ',' '\n' <<<"$pods"
  done
}

# ---------------------------------------------------------------- down
down() {
  local pod s name file running=()
  while IFS= read -r pod; do
    podman pod exists "$pod" && running+=("$pod")
  done < <(all_pods)
  if [[ ${#running[@]} -gt 0 ]]; then
    # Stopped together; each gets 10 s to shut down gracefully.
    podman pod rm -f -t 10 "${running[@]}" >/dev/null
    log "removed pods ${running[*]}"
  else
    log "no pods of this deployment were running"
  fi
  # A pod's emptyDir volumes (named <pod>-<volume> by the converter) go
  # with it, as in a cluster: a later play must not find a stale one (a
  # run folder owned by another image's user stopped PostgreSQL).
  local v
  while IFS= read -r pod; do
    while IFS= read -r v; do
      [[ "$v" == "$pod"-* ]] || continue
      podman volume rm -f "$v" >/dev/null && log "removed volume $v (emptyDir)"
    done < <(podman volume ls --format '{{.Name}}')
  done < <(all_pods)
  for s in "${secrets[@]}"; do
    read -r name file <<<"$s"
    # kube play copies a secret's files into a volume named after it.
    podman volume exists "$name" && podman volume rm -f "$name" >/dev/null
    if podman secret inspect "$name" >/dev/null 2>&1; then
      podman secret rm "$name" >/dev/null
      log "removed secret $name"
    fi
  done
  for s in "${pvcs[@]}"; do
    read -r name file <<<"$s"
    if podman volume exists "$name"; then
      if [[ $purge -eq 1 ]]; then
        podman volume rm -f "$name" >/dev/null
        log "removed volume $name"
      else
        log "kept volume $name (PersistentVolumeClaim; down --purge removes it)"
      fi
    fi
  done
  if podman network exists "$NETWORK"; then
    if podman network rm "$NETWORK" >/dev/null 2>&1; then
      log "removed network $NETWORK"
    else
      log "kept network $NETWORK (still in use)"
    fi
  fi
}

# ---------------------------------------------------------------- play
# wait_job POD CONTAINER BACKOFF_LIMIT DEADLINE: 0 when the container exits
# 0; 1 when it failed more than BACKOFF_LIMIT times or ran out of time.
wait_job() {
  local pod="$1" ctr="$1-$2" backoff="$3" deadline="$4" start state status code restarts
  local timeout="${LDPGRAPH_PLAY_TIMEOUT:-}"
  [[ -n "$timeout" ]] || { [[ "$deadline" -gt 0 ]] && timeout="$deadline" || timeout=7200; }
  start="$(date +%s)"
  log "waiting for $pod (at most ${timeout}s, $backoff retries)"
  while :; do
    state="$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}' "$ctr" 2>/dev/null)" ||
      { log "container $ctr is gone"; return 1; }
    read -r status code restarts <<<"$state"
    if [[ "$status" == exited || "$status" == stopped ]] && [[ "$code" == 0 ]]; then
      log "$pod succeeded"
      return 0
    fi
    # podman restarts a failed container at once and without limit
    # (restartPolicy OnFailure): the Job has failed once it has been
    # restarted more than backoffLimit times, or has failed on its last
    # allowed attempt. A container that fails within a second may get a few
    # more attempts before this loop sees it.
    if [[ "$restarts" -gt "$backoff" ]] ||
      { [[ "$restarts" -eq "$backoff" && ("$status" == exited || "$status" == stopped) ]]; }; then
      log "$pod failed after $restarts restart(s) (backoffLimit $backoff)"
      podman pod stop -t 5 "$pod" >/dev/null 2>&1 || true
      return 1
    fi
    if (($(date +%s) - start > timeout)); then
      log "$pod did not finish within ${timeout}s"
      podman pod stop -t 10 "$pod" >/dev/null 2>&1 || true
      return 1
    fi
    sleep 1
  done
}

play() {
  local missing_images=() image pod s name file aliases pods net rc=0

  for image in "${images[@]}"; do
    podman image exists "$image" || missing_images+=("$image")
  done
  if [[ ${#missing_images[@]} -gt 0 ]]; then
    {
      echo "podman-play.sh: missing images (the manifests never pull them):"
      printf '  %s\n' "${missing_images[@]}"
      echo "  Build them from deploy/Dockerfile (see its header)."
    } >&2
    exit 1
  fi
  while IFS= read -r pod; do
    podman pod exists "$pod" && die "pod $pod exists already: run '$0 down' first"
  done < <(all_pods)

  if ! podman network exists "$NETWORK"; then
    podman network create "$NETWORK" >/dev/null
    log "created network $NETWORK"
  fi
  [[ "$(podman network inspect --format '{{.DNSEnabled}}' "$NETWORK")" == true ]] ||
    die "network $NETWORK has DNS disabled: pods could not find each other by name"

  for s in "${secrets[@]}"; do
    read -r name file <<<"$s"
    podman secret rm "$name" >/dev/null 2>&1 || true
    # A stale copy of the secret's files from an earlier run.
    podman volume exists "$name" && podman volume rm -f "$name" >/dev/null
    podman secret create "$name" "$plan/$file" >/dev/null
    log "created secret $name"
  done

  for s in "${pvcs[@]}"; do
    read -r name file <<<"$s"
    if podman volume exists "$name"; then
      log "reusing volume $name"
    else
      # --network: without it kube play creates a network of its own.
      podman kube play --network "$NETWORK" "$plan/$file" >"$tmp/kube.log" 2>&1 || {
        cat "$tmp/kube.log" >&2
        die "creating volume $name failed"
      }
      log "created volume $name"
    fi
  done

  for s in "${workloads[@]}"; do
    read -r name file aliases pods <<<"$s"
    net="$NETWORK"
    [[ "$aliases" != - ]] && net="$NETWORK:alias=${aliases//,/,alias=}"
    # Create all pods of the workload, then start them together (the
    # StatefulSets use podManagementPolicy: Parallel).
    if ! podman kube play --start=false --network "$net" ${configmaps:+--configmap "$configmaps"} \
      "$plan/$file" >"$tmp/kube.log" 2>&1; then
      cat "$tmp/kube.log" >&2
      die "podman kube play $file failed"
    fi
    # shellcheck disable=SC2086
    if ! podman pod start ${pods//,/ } >"$tmp/start.log" 2>&1; then
      cat "$tmp/start.log" >&2
      die "starting $name failed (podman pod start ${pods//,/ })"
    fi
    if [[ "$aliases" == - ]]; then
      log "started $name: ${pods//,/ }"
    else
      log "started $name: ${pods//,/ } (network alias ${aliases//,/, })"
    fi
  done

  local j ctr backoff deadline
  for j in "${jobs[@]}"; do
    read -r pod ctr backoff deadline <<<"$j"
    if wait_job "$pod" "$ctr" "$backoff" "$deadline"; then
      echo "----- log of $pod -----"
      podman logs "$pod-$ctr" 2>&1 || true
      echo "-----"
    else
      rc=1
      echo "----- log of $pod -----"
      podman logs "$pod-$ctr" 2>&1 || true
      echo "-----"
    fi
  done
  if [[ $rc -eq 0 ]]; then
    log "done. The curator and the agents keep running; stop them with: $0 down"
  else
    log "FAILED. Inspect with podman pod ps / podman logs, then: $0 down"
  fi
  return $rc
}

"$sub"
