#!/bin/sh
# The TLS edge of a deployment (the image's entrypoint, ldpgraph-edge):
# waits for its secrets, writes HAProxy's configuration with `ldpctl
# edge-config` (common/net/edge_config.h says why HAProxy and what it does)
# and runs HAProxy in the foreground, as the image's unprivileged user.
#
# Settings (environment):
#   LDPGRAPH_EDGE_FRONTENDS    HOST:PORT,... of the frontends (compose), or
#   LDPGRAPH_EDGE_FRONTENDS_DNS  NAME:PORT: every address of a headless
#                              Service (Kubernetes), up to
#                              LDPGRAPH_EDGE_MAX_FRONTENDS (default 16)
#   LDPGRAPH_EDGE_SECRETS      a folder with curator.pem and curator.key (the
#                              certificate the clients are shown; the
#                              frontends' own will do) and ca.pem (the CA of
#                              the frontends' certificates); default /secrets
#   LDPGRAPH_EDGE_NAME         the name in the frontends' certificate
#                              (default curator)
#   LDPGRAPH_EDGE_LISTEN       default 0.0.0.0:7443
#   LDPGRAPH_EDGE_THREADS      HAProxy's threads (default: one per CPU)
# Names are resolved again at run time: a frontend that restarts at another
# address is found again within seconds.
set -eu
s=${LDPGRAPH_EDGE_SECRETS:-/secrets}
until [ -s "$s/curator.pem" ] && [ -s "$s/curator.key" ] && [ -s "$s/ca.pem" ]; do
  echo "edge: waiting for curator.pem, curator.key and ca.pem in $s"
  sleep 1
done
umask 077
work=$(mktemp -d)
cat "$s/curator.pem" "$s/curator.key" > "$work/edge.pem"
if [ -n "${LDPGRAPH_EDGE_FRONTENDS_DNS:-}" ]; then
  set -- --frontends-from-dns "$LDPGRAPH_EDGE_FRONTENDS_DNS" \
    --max-frontends "${LDPGRAPH_EDGE_MAX_FRONTENDS:-16}"
else
  set -- --frontends "${LDPGRAPH_EDGE_FRONTENDS:?set LDPGRAPH_EDGE_FRONTENDS or LDPGRAPH_EDGE_FRONTENDS_DNS}" --resolve
fi
[ -z "${LDPGRAPH_EDGE_THREADS:-}" ] || set -- "$@" --threads "$LDPGRAPH_EDGE_THREADS"
ldpctl edge-config "$@" --tls-pem "$work/edge.pem" --ca "$s/ca.pem" \
  --server-name "${LDPGRAPH_EDGE_NAME:-curator}" \
  --listen "${LDPGRAPH_EDGE_LISTEN:-0.0.0.0:7443}" > "$work/haproxy.cfg"
echo "edge: $(grep -c '^  server' "$work/haproxy.cfg") frontend line(s); serving on ${LDPGRAPH_EDGE_LISTEN:-0.0.0.0:7443}"
exec haproxy -f "$work/haproxy.cfg" -db
