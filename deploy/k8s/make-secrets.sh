#!/usr/bin/env bash
# Generates the development secrets of the Kubernetes deployment and puts
# each workload's share where the overlay's secretGenerator reads it
# (OVERLAY below; overlays/local by default):
#
#   overlays/OVERLAY/secrets/curator/  curator.pem curator.key admin.token node.key
#   overlays/OVERLAY/secrets/agent/    ca.pem nodes.credentials
#   overlays/OVERLAY/secrets/admin/    ca.pem admin.token
#   overlays/replicas/secrets/db/      db.password (OVERLAY=replicas only)
#   overlays/replicas/secrets/edge/    curator.pem curator.key ca.pem (replicas only)
#
# (git ignores those folders.) Least privilege: the curator gets its TLS key
# pair, the admin token and the node key; the agents get the CA certificate
# and the node credentials; the campaign Job gets the CA certificate and the
# admin token; PostgreSQL and the curators get the database password (a
# random one: 32 bytes, hex). ca.key, the development CA's private key, is
# put in no Secret: it is deleted with the temporary folder. The
# certificate names the curator's Services of both overlays
# (ldpgraph-curator, ldpgraph-curator-frontend) in both namespaces.
#
# Usage:
#   deploy/k8s/make-secrets.sh [LDPCTL] [LDPGRAPH]
#
#   LDPCTL, LDPGRAPH  the ldpctl and ldpgraph binaries (default: build/ldpctl
#                     and build/ldpgraph under the repository root; a bare
#                     name is looked up in PATH)
#
# Environment:
#   OVERLAY         local (default) or replicas: whose secrets/ to fill.
#                   For an external database (replicas), write its password
#                   to overlays/replicas/secrets/db/db.password yourself
#                   afterwards (FORCE=1 replaces everything, that too).
#   LDPGRAPH_NODES  node count (default: LDPGRAPH_NODES of
#                   base/configmap.yaml, else 3000). It must match the
#                   deployment's: nodes.credentials holds one credential per
#                   node of the dataset.
#   FORCE=1         replace existing secrets. Without it the script refuses:
#                   new secrets mean a new CA, a new admin token and new node
#                   credentials, which a running deployment (and a curator
#                   store that enrolled nodes with the old ones) does not
#                   accept.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
overlay="${OVERLAY:-local}"
case "$overlay" in
  local | replicas) ;;
  *)
    echo "make-secrets.sh: OVERLAY must be local or replicas, got '$overlay'" >&2
    exit 2
    ;;
esac
out="$here/overlays/$overlay/secrets"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
case "${1:-}" in
  -h | --help)
    usage
    exit 0
    ;;
esac
[[ $# -le 2 ]] || {
  usage >&2
  exit 2
}

# resolve_binary NAME PATH-OR-EMPTY DEFAULT
resolve_binary() {
  local name="$1" given="$2" default="$3" path
  if [[ -z "$given" ]]; then
    path="$default"
  elif [[ "$given" == */* ]]; then
    path="$given"
  else
    path="$(command -v "$given" || true)"
  fi
  if [[ -z "$path" || ! -f "$path" || ! -x "$path" ]]; then
    {
      echo "make-secrets.sh: $name not found or not executable: ${path:-$given}"
      echo "  Build the project first (it writes build/ldpctl and build/ldpgraph), or pass"
      echo "  the binaries: deploy/k8s/make-secrets.sh /path/to/ldpctl /path/to/ldpgraph"
    } >&2
    exit 1
  fi
  printf '%s\n' "$path"
}

ldpctl="$(resolve_binary ldpctl "${1:-}" "$repo/build/ldpctl")"
ldpgraph="$(resolve_binary ldpgraph "${2:-}" "$repo/build/ldpgraph")"

# Node count: the environment, else the ConfigMap, else 3000.
nodes="${LDPGRAPH_NODES:-}"
if [[ -z "$nodes" ]]; then
  nodes="$(sed -n 's/^[[:space:]]*LDPGRAPH_NODES:[[:space:]]*"\{0,1\}\([0-9]*\)"\{0,1\}[[:space:]]*$/\1/p' \
    "$here/base/configmap.yaml" | head -n1)"
  nodes="${nodes:-3000}"
fi
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || {
  echo "make-secrets.sh: LDPGRAPH_NODES must be a positive integer, got '$nodes'" >&2
  exit 1
}

# Every name agents and ldpctl may dial: the Services' short names (what
# the manifests use: ldpgraph-curator, and overlays/replicas' frontends
# ldpgraph-curator-frontend), their namespace-qualified forms for the
# overlays' namespaces (ldpgraph, ldpgraph-replicas), and localhost for a
# port-forward.
tls_names="ldpgraph-curator,ldpgraph-curator-frontend"
for ns in ldpgraph ldpgraph-replicas; do
  for svc in ldpgraph-curator ldpgraph-curator-frontend; do
    tls_names="$tls_names,$svc.$ns,$svc.$ns.svc,$svc.$ns.svc.cluster.local"
  done
done
tls_names="$tls_names,localhost,127.0.0.1"

files_curator=(curator.pem curator.key admin.token node.key)
files_agent=(ca.pem nodes.credentials)
files_admin=(ca.pem admin.token)
files_db=()
files_edge=()
[[ "$overlay" == replicas ]] && files_db=(db.password) && files_edge=(curator.pem curator.key ca.pem)

existing=()
for f in "${files_curator[@]/#/curator/}" "${files_agent[@]/#/agent/}" "${files_admin[@]/#/admin/}" \
  "${files_db[@]/#/db/}" "${files_edge[@]/#/edge/}"; do
  [[ -e "$out/$f" ]] && existing+=("$f")
done
if [[ ${#existing[@]} -gt 0 && "${FORCE:-}" != 1 ]]; then
  {
    echo "make-secrets.sh: secrets already exist in $out (${existing[*]})."
    echo "  New secrets mean a new CA, admin token and node credentials: a running"
    echo "  deployment and a curator store that enrolled nodes with the old ones"
    echo "  will not accept them. To replace them anyway: FORCE=1 OVERLAY=$overlay $0 $*"
  } >&2
  exit 1
fi

umask 077
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "generating the dataset ($nodes nodes) ..."
"$ldpgraph" generate --out "$tmp/dataset" --nodes "$nodes" >/dev/null
echo "generating the secrets (TLS names: $tls_names) ..."
"$ldpctl" secrets --out "$tmp/secrets" --dataset "$tmp/dataset" --tls-names "$tls_names" >/dev/null

for f in ca.pem ca.key curator.pem curator.key admin.token node.key nodes.credentials; do
  [[ -s "$tmp/secrets/$f" ]] || {
    echo "make-secrets.sh: ldpctl secrets did not write $f" >&2
    exit 1
  }
done

# copy_to DIR FILE...: installs the files with mode 600 (readable by the
# user who runs kubectl; kustomize only reads them).
copy_to() {
  local dir="$out/$1" f
  shift
  mkdir -p "$dir"
  for f in "$@"; do
    install -m 600 "$tmp/secrets/$f" "$dir/$f"
  done
}
copy_to curator "${files_curator[@]}"
copy_to agent "${files_agent[@]}"
copy_to admin "${files_admin[@]}"
[[ ${#files_edge[@]} -eq 0 ]] || copy_to edge "${files_edge[@]}"
if [[ ${#files_db[@]} -gt 0 ]]; then
  # The first line is the password (initdb --pwfile and the curators'
  # --store-password-file read that).
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secrets/db.password"
  echo >>"$tmp/secrets/db.password"
  copy_to db "${files_db[@]}"
fi

echo "wrote:"
(cd "$here" && find "overlays/$overlay/secrets" -type f ! -name .gitignore | sort | sed 's/^/  /')
echo "ca.key was not kept (it belongs in no Secret). Next:"
echo "  kubectl apply -k $(realpath --relative-to="$PWD" "$here/overlays/$overlay" 2>/dev/null || echo "$here/overlays/$overlay")"
