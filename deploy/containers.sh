#!/usr/bin/env bash
# ldpgraph in containers, verified end to end on this machine.
#
#   bash deploy/containers.sh all        # everything below, in order
#   bash deploy/containers.sh setup      # podman + podman-compose (Debian 12, no Docker engine)
#   bash deploy/containers.sh build      # the three images (deploy/Dockerfile)
#   bash deploy/containers.sh compose [N]  # docker-compose.yml with N agent hosts
#                                        # (default 3) to a finished campaign
#   bash deploy/containers.sh kube [replicas]
#                                        # deploy/k8s played with `podman kube play`
#                                        # (overlay local; replicas: PostgreSQL, two
#                                        # operators, three frontends, two edges, with
#                                        # the same three kills as `replicas`)
#   bash deploy/containers.sh replicas   # the compose replicas profile (PostgreSQL, the
#                                        # edge, two operators, three frontends) to a
#                                        # finished campaign, killing a frontend, the
#                                        # active operator and the database during it;
#                                        # checks every node's report and the ledger.
#                                        # Builds what it needs. Not in `all`: about
#                                        # 20 minutes on two cores.
#   bash deploy/containers.sh check      # compose config + Kubernetes schema validation
#                                        # (no engine, no images: what CI runs)
#
# The engine is podman when it is installed, else docker when its daemon
# answers, else podman (which setup installs; CONTAINER_ENGINE
# overrides). With podman, `setup` runs ../shared/tools/container-engine-setup
# when it exists, which also makes the local debian:bookworm-slim base image
# on machines that reach no container registry; builds use --network host so
# that apt-get inside them reaches Debian's mirrors.
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  # podman when installed; else docker when its daemon answers; else podman,
  # which `setup` installs (a docker client without a daemon is no engine).
  if command -v podman >/dev/null; then
    engine=podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  else
    engine=podman
  fi
fi
project=ldpgraph
# What `up` starts without a profile. Named on every `up`: podman-compose
# 1.0.3 ignores `profiles` and would start the monitoring profile too.
default_services="init curator agent campaign"
# The replicas profile (curators on PostgreSQL), also named on its `up`.
replicas_services="init postgres operator operator-standby frontend-1 frontend-2 frontend-3 edge agent-1 agent-2 agent-3 campaign-replicas"

# Removes every container and volume of the compose project, however many
# agents it had (podman-compose's down only knows the replicas it is told).
compose_purge() {
  LDPGRAPH_AGENTS=${1:-3} compose down -v >/dev/null 2>&1 || true
  local ids
  ids=$("$engine" ps -a -q --filter label=com.docker.compose.project="$project")
  [ -z "$ids" ] || "$engine" rm -f $ids >/dev/null
  "$engine" volume ls -q | grep "^${project}_" | xargs -r "$engine" volume rm -f >/dev/null || true
}

compose() {
  if [ "$engine" = podman ]; then
    podman-compose -p "$project" "$@"
  else
    docker compose -p "$project" "$@"
  fi
}

setup() {
  if [ "$engine" != podman ]; then
    echo "setup: engine is $engine; nothing to set up"
    return
  fi
  local tool=../shared/tools/container-engine-setup
  if [ -x "$tool" ] || [ -f "$tool" ]; then
    bash "$tool"
  else
    command -v podman-compose >/dev/null || {
      echo "setup: install podman and podman-compose (apt-get install podman podman-compose)" >&2
      exit 1
    }
  fi
}

build() {
  local net=()
  [ "$engine" = podman ] && net=(--network host)
  for target in curator agent ldpctl edge; do
    local name=ldpgraph-$target
    [ "$target" = ldpctl ] && name=ldpctl
    echo "== build localhost/$name:dev (target $target)"
    "$engine" build "${net[@]}" -f deploy/Dockerfile --target "$target" \
      -t "localhost/$name:dev" .
  done
  "$engine" images --filter reference='localhost/*' \
    --format '{{.Repository}}:{{.Tag}} {{.Size}}'
}

# PostgreSQL's image (deploy/postgres/Dockerfile), for the replicas profile.
build_postgres() {
  local net=()
  [ "$engine" = podman ] && net=(--network host)
  echo "== build localhost/ldpgraph-postgres:dev"
  "$engine" build "${net[@]}" -f deploy/postgres/Dockerfile \
    -t localhost/ldpgraph-postgres:dev deploy/postgres
}

# The container of a compose service of the current project.
service_id() {
  "$engine" ps -a -q --filter label=com.docker.compose.project="$project" \
    --filter label=com.docker.compose.service="$1" | head -1
}

# SIGKILL a service's container, then start it again after a second (the
# supervisor's restart, made explicit: podman's restart policy does not
# restart a container podman itself killed).
kill_and_restart() {
  local id
  id=$(service_id "$1")
  [ -n "$id" ] || { echo "replicas: no container for $1" >&2; return 1; }
  echo "-- $(date +%T) SIGKILL $1"
  "$engine" kill -s KILL "$id" >/dev/null
  sleep 1
  "$engine" start "$id" >/dev/null
  echo "-- $(date +%T) $1 started again"
}

# The operator that holds the lease now: operator-standby if it took it
# (its log says so), else operator.
active_operator() {
  local id
  id=$(service_id operator-standby)
  if [ -n "$id" ] && "$engine" logs "$id" 2>&1 | grep -q "took the operator lease"; then
    echo operator-standby
  else
    echo operator
  fi
}

replicas_run() {
  local project=ldpgraph-replicas
  local nodes=${LDPGRAPH_NODES:-3000} rate=${LDPGRAPH_AGENT_RATE:-30}
  echo "== replicas: PostgreSQL, the edge, two operators, three frontends, three agent"
  echo "   hosts ($nodes nodes, $rate reports/s per host); a frontend, the active operator"
  echo "   and the database killed during the features campaign"
  for image in ldpgraph-curator ldpgraph-agent ldpctl ldpgraph-edge; do
    "$engine" image exists "localhost/$image:dev" 2>/dev/null || { build; break; }
  done
  "$engine" image exists localhost/ldpgraph-postgres:dev 2>/dev/null || build_postgres
  compose_purge
  LDPGRAPH_NODES=$nodes LDPGRAPH_AGENT_RATE=$rate compose up -d --no-build \
    $replicas_services > /tmp/ldpgraph-replicas.log 2>&1 || {
    echo "replicas: up failed; see /tmp/ldpgraph-replicas.log" >&2
    tail -30 /tmp/ldpgraph-replicas.log >&2
    compose_purge
    return 1
  }
  local job rc=0 t0
  job=$(service_id campaign-replicas)
  [ -n "$job" ] || { echo "replicas: no campaign container" >&2; compose_purge; return 1; }
  t0=$(date +%s)
  echo "-- waiting for the features campaign ($job)"
  until "$engine" logs "$job" 2>&1 | grep -q "collecting features"; do
    if [ "$("$engine" inspect -f '{{.State.Running}}' "$job")" != true ] ||
       [ $(( $(date +%s) - t0 )) -gt 900 ]; then
      echo "replicas: the campaign did not start collecting" >&2
      "$engine" logs "$job" 2>&1 | tail -20 >&2
      compose logs > /tmp/ldpgraph-replicas.log 2>&1 || true
      compose_purge
      return 1
    fi
    sleep 1
  done
  sleep 4; kill_and_restart frontend-2
  sleep 4; kill_and_restart "$(active_operator)"
  sleep 4; kill_and_restart postgres
  rc=$(timeout 1800 "$engine" wait "$job") || rc=124
  local out svc logs=/tmp/ldpgraph-replicas-logs
  out=$("$engine" logs "$job" 2>&1)
  echo "$out" | sed 's/^/   /'
  # Every service's own log, before the containers go.
  rm -rf "$logs" && mkdir -p "$logs"
  for svc in $replicas_services; do
    local id
    id=$(service_id "$svc")
    [ -z "$id" ] || "$engine" logs "$id" > "$logs/$svc.log" 2>&1 || true
  done
  compose_purge
  if [ "$rc" != 0 ]; then
    echo "replicas: the campaign job failed (exit $rc); every service's log: $logs/" >&2
    return 1
  fi
  # Every node's report stored once, and the ledger charged each node its
  # one campaign's epsilon, no more.
  echo "$out" | grep -Eq "reports +$nodes \(0 refused, 0 rejected\)" || {
    echo "replicas: not every node's report was stored once" >&2; return 1; }
  echo "$out" | grep -Eq "epsilon spent per node +mean 1 \(min 1, max 1\)" || {
    echo "replicas: the ledger does not charge every node exactly epsilon 1" >&2; return 1; }
  echo "replicas: $nodes reports, each node charged once, through three kills (logs: $logs/)"
}

compose_run() {
  local n=${1:-3}
  echo "== compose: curator, $n agent hosts, one campaign"
  compose_purge
  # Detached, then wait for the one-shot job. (--exit-code-from would stop
  # everything as soon as init, itself a one-shot, exits.)
  # LDPGRAPH_AGENTS for podman-compose 1.0.3, which ignores --scale.
  LDPGRAPH_AGENTS="$n" compose up -d --no-build --scale agent="$n" \
    $default_services > /tmp/ldpgraph-compose.log 2>&1 || {
    echo "compose: up failed; see /tmp/ldpgraph-compose.log" >&2
    tail -30 /tmp/ldpgraph-compose.log >&2
    compose_purge "$n"
    return 1
  }
  local job rc=0
  job=$("$engine" ps -a -q --filter label=com.docker.compose.project="$project"         --filter label=com.docker.compose.service=campaign | head -1)
  [ -n "$job" ] || { echo "compose: no campaign container" >&2; return 1; }
  echo "-- waiting for the campaign job ($job)"
  rc=$(timeout 1800 "$engine" wait "$job") || rc=124
  "$engine" logs "$job" 2>&1 | sed 's/^/   /'
  compose logs > /tmp/ldpgraph-compose.log 2>&1 || true
  # Each agent container's own log (the merged one interleaves lines).
  local shards id
  shards=$(for id in $("$engine" ps -a -q --filter label=com.docker.compose.project="$project" \
                         --filter label=com.docker.compose.service=agent); do
             "$engine" logs "$id" 2>&1 | grep -o "holding shard [0-9]* of $n"
           done | sort -u | wc -l)
  compose_purge "$n"
  if [ "$rc" != 0 ]; then
    echo "compose: the campaign job failed (exit $rc); every log: /tmp/ldpgraph-compose.log" >&2
    return 1
  fi
  echo "compose: $shards distinct shards held by $n agent hosts (logs: /tmp/ldpgraph-compose.log)"
  [ "$shards" -eq "$n" ] || { echo "compose: expected $n distinct shards" >&2; return 1; }
}

kube() {
  local overlay=${1:-local}
  if [ "$overlay" = replicas ]; then
    for image in ldpgraph-curator ldpgraph-agent ldpctl ldpgraph-edge; do
      "$engine" image exists "localhost/$image:dev" 2>/dev/null || { build; break; }
    done
    "$engine" image exists localhost/ldpgraph-postgres:dev 2>/dev/null || build_postgres
  fi
  # The overlay's secrets, made once (make-secrets.sh keeps existing ones)
  # with the native binaries if built, else with the ldpctl image.
  if [ ! -f "deploy/k8s/overlays/$overlay/secrets/curator/node.key" ]; then
    if [ -x build/ldpctl ] && [ -x build/ldpgraph ]; then
      OVERLAY=$overlay bash deploy/k8s/make-secrets.sh
    else
      local wrap
      wrap=$(mktemp -d)
      for tool in ldpctl ldpgraph; do
        printf '#!/bin/sh\nexec %s run --rm --user 0 -v /tmp:/tmp -v "%s:%s" -w "$PWD" --entrypoint %s localhost/ldpctl:dev "$@"\n' \
          "$engine" "$PWD" "$PWD" "$tool" > "$wrap/$tool"
        chmod +x "$wrap/$tool"
      done
      OVERLAY=$overlay bash deploy/k8s/make-secrets.sh "$wrap/ldpctl" "$wrap/ldpgraph"
      rm -rf "$wrap"
    fi
  fi
  local rc=0
  if [ "$overlay" = replicas ]; then
    kube_replicas_faults || rc=$?
    return "$rc"
  fi
  bash deploy/k8s/podman-play.sh play --overlay "deploy/k8s/overlays/$overlay" || rc=$?
  bash deploy/k8s/podman-play.sh down --purge --overlay "deploy/k8s/overlays/$overlay"
  return "$rc"
}

# The replicas overlay played with its agents slowed (a kustomization over
# it that sets LDPGRAPH_AGENT_RATE, default 30 reports a second a host), a
# frontend pod, the operator pod holding the lease and the PostgreSQL pod
# SIGKILLed once each while the features campaign collects, each started
# again a second later (as the kubelet restarts a container); it passes only if
# every node's report was stored once and every node charged epsilon 1.
kube_replicas_faults() {
  local rate=${LDPGRAPH_AGENT_RATE:-30} nodes=3000 over rc=0 out play t0
  over=$(mktemp -d)
  cat > "$over/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$over" deploy/k8s/overlays/replicas)
patches:
  - patch: |-
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: ldpgraph-config
        namespace: ldpgraph-replicas
      data:
        LDPGRAPH_AGENT_RATE: "$rate"
EOF
  echo "== kube replicas: agents at $rate reports/s each; a frontend, the active operator and"
  echo "   PostgreSQL killed during the features campaign"
  out=$(mktemp)
  bash deploy/k8s/podman-play.sh play --overlay "$over" > "$out" 2>&1 &
  play=$!
  t0=$(date +%s)
  until podman logs ldpgraph-campaign-campaign 2>&1 | grep -q "collecting features"; do
    if ! kill -0 "$play" 2>/dev/null || [ $(( $(date +%s) - t0 )) -gt 900 ]; then
      echo "kube replicas: the campaign did not start collecting" >&2
      tail -30 "$out" >&2
      wait "$play" || true
      bash deploy/k8s/podman-play.sh down --purge --overlay "$over"
      rm -rf "$over" "$out"
      return 1
    fi
    sleep 1
  done
  local victim
  for victim in ldpgraph-curator-frontend-1-frontend ACTIVE ldpgraph-postgres-0-postgres; do
    sleep 4
    if [ "$victim" = ACTIVE ]; then
      victim=ldpgraph-curator-operator-0-operator
      podman logs ldpgraph-curator-operator-1-operator 2>&1 | grep -q "took the operator lease" &&
        victim=ldpgraph-curator-operator-1-operator
    fi
    # podman takes its own kill for a stop and does not apply the restart
    # policy: start it again a second later, as the kubelet would.
    echo "-- $(date +%T) SIGKILL $victim"
    podman kill -s KILL "$victim" >/dev/null
    sleep 1
    podman start "$victim" >/dev/null
    echo "-- $(date +%T) $victim started again"
  done
  wait "$play" || rc=$?
  sed 's/^/   /' "$out"
  bash deploy/k8s/podman-play.sh down --purge --overlay "$over"
  local text
  text=$(cat "$out")
  rm -rf "$over" "$out"
  [ "$rc" = 0 ] || { echo "kube replicas: the play failed (exit $rc)" >&2; return 1; }
  echo "$text" | grep -Eq "reports +$nodes \(0 refused, 0 rejected\)" || {
    echo "kube replicas: not every node's report was stored once" >&2; return 1; }
  echo "$text" | grep -Eq "epsilon spent per node +mean 1 \(min 1, max 1\)" || {
    echo "kube replicas: the ledger does not charge every node exactly epsilon 1" >&2; return 1; }
  echo "kube replicas: $nodes reports, each node charged once, through three kills"
}

# The tools `check` needs, from Debian's packages: docker-compose (only its
# config command, which needs no engine) and Node.js for the manifest
# validator.
check_tools() {
  local missing=()
  command -v docker-compose >/dev/null || missing+=(docker-compose)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && return
  local sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  echo "check: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

check() {
  check_tools
  # docker-compose (Debian's package, 1.29) validates the file against the
  # Compose schema and resolves every variable without an engine;
  # podman-compose 1.0.3 has no config command.
  echo "== compose config (docker-compose config -q)"
  docker-compose -f docker-compose.yml config -q
  # `--scale agent=N` works without editing only if nothing in the agent
  # service is per-container: no container_name, no published host port.
  # A service without `profiles` always starts: the default `up` must start
  # exactly the deployment, Prometheus only in the monitoring profile, and
  # the replicas profile's services only in it (init, shared, aside).
  docker-compose -f docker-compose.yml config | python3 -c '
import sys, yaml
services = yaml.safe_load(sys.stdin)["services"]
agent = services["agent"]
bad = [k for k in ("container_name", "ports", "hostname") if k in agent]
if bad:
    sys.exit("compose: the agent service sets %s, which breaks --scale" % ", ".join(bad))
default = sorted(n for n, s in services.items() if not s.get("profiles"))
if default != sorted(sys.argv[1].split()):
    sys.exit("compose: the default up starts %s, not %s" % (default, sys.argv[1]))
if services.get("prometheus", {}).get("profiles") != ["monitoring"]:
    sys.exit("compose: prometheus must be in the monitoring profile only")
replicas = sorted(n for n, s in services.items() if s.get("profiles") == ["replicas"])
want = sorted(n for n in sys.argv[2].split() if n != "init")
if replicas != want:
    sys.exit("compose: the replicas profile holds %s, not %s" % (replicas, want))
' "$default_services" "$replicas_services"
  echo "compose config: ok"
  # The scrape configuration, with Debian's promtool when prometheus is
  # installed (the dashboard's test checks its targets against this file).
  if command -v promtool >/dev/null; then
    echo "== promtool check config deploy/prometheus/prometheus.yml"
    promtool check config deploy/prometheus/prometheus.yml
  else
    echo "== promtool: not installed (apt-get install prometheus); skipped"
  fi
  echo "== Kubernetes manifests"
  bash deploy/k8s/validate.sh
  echo "== the validator rejects broken manifests"
  bash deploy/k8s/validate-selftest.sh | tail -1
}

case "${1:-all}" in
  setup) setup ;;
  build) build ;;
  compose) compose_run "${2:-3}" ;;
  kube) kube "${2:-local}" ;;
  replicas) replicas_run ;;
  check) check ;;
  all) setup; check; build; compose_run 3; kube ;;
  -h|--help|help) sed -n '2,22p' "$0" ;;
  *) echo "containers.sh: unknown command '$1' (setup, build, compose, kube, replicas, check, all)" >&2; exit 2 ;;
esac
