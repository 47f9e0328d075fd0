#!/usr/bin/env bash
# Development TLS material and secrets for a curator and its agent hosts
# (docs/operators.md, "Starting a deployment by hand"): a throwaway CA, a
# curator server certificate signed by it, an admin token and the key the
# curator derives per-node credentials from. For development and tests only:
# the CA key sits beside the certificates, so anyone who can read OUTDIR can
# mint certificates.
set -euo pipefail

prog="dev-certs"
default_hosts="localhost,curator,127.0.0.1,::1"
days=825  # the most a TLS certificate may be valid for in common clients

usage() {
  cat <<EOF
Usage: deploy/dev-certs.sh OUTDIR [--hosts "localhost,curator,127.0.0.1"] [--force]

Writes development TLS material and secrets into OUTDIR (created if missing):
  ca.key         CA private key, EC P-256                        (mode 600)
  ca.pem         CA certificate, valid ${days} days; what clients trust
  curator.key    curator server private key, EC P-256            (mode 600)
  curator.pem    curator server certificate signed by the CA, valid ${days}
                 days, extendedKeyUsage serverAuth, subjectAltName = --hosts
  admin.token    32 random bytes as hex, one line: the admin API's credential
                                                                 (mode 600)
  node.key       32 random bytes as hex, one line: the curator derives each
                 node's credential from it                       (mode 600)

Options:
  --hosts LIST   comma-separated DNS names and IP addresses (IPv4 or IPv6) the
                 curator is reached by; default: ${default_hosts}
  --force        replace the material already in OUTDIR (a new CA: every
                 client must be given the new ca.pem)
  -h, --help     this text

Refuses to touch an OUTDIR that already holds any of these files unless
--force is given. Needs the openssl command-line tool.
EOF
}

die() {
  echo "${prog}: $*" >&2
  exit 1
}

usage_error() {
  echo "${prog}: $*" >&2
  echo "Try 'deploy/dev-certs.sh --help'." >&2
  exit 2
}

outdir=""
hosts="$default_hosts"
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --hosts)
      [ $# -ge 2 ] || usage_error "--hosts needs a value"
      hosts="$2"
      shift 2
      ;;
    --hosts=*)
      hosts="${1#--hosts=}"
      shift
      ;;
    --force)
      force=1
      shift
      ;;
    -*)
      usage_error "unknown option $1"
      ;;
    *)
      [ -z "$outdir" ] || usage_error "more than one OUTDIR: $outdir and $1"
      outdir="$1"
      shift
      ;;
  esac
done
[ -n "$outdir" ] || usage_error "no OUTDIR given"

command -v openssl >/dev/null 2>&1 ||
  die "the openssl command-line tool is not installed (Debian: apt-get install openssl; deploy/install-deps.sh installs it)"

# --- the subjectAltName entries ------------------------------------------------
san_lines=()
dns_count=0
ip_count=0
IFS=',' read -r -a host_list <<<"$hosts"
for raw in "${host_list[@]}"; do
  host="$(echo "$raw" | tr -d '[:space:]')"
  [ -n "$host" ] || continue
  if [[ "$host" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
    ip_count=$((ip_count + 1))
    san_lines+=("IP.${ip_count} = ${host}")
  elif [[ "$host" == *:* ]]; then
    [[ "$host" =~ ^[0-9A-Fa-f:.]+$ ]] || die "--hosts: '$host' is not an IPv6 address"
    ip_count=$((ip_count + 1))
    san_lines+=("IP.${ip_count} = ${host}")
  elif [[ "$host" =~ ^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$ ]]; then
    dns_count=$((dns_count + 1))
    san_lines+=("DNS.${dns_count} = ${host}")
  else
    die "--hosts: '$host' is neither a DNS name nor an IP address"
  fi
done
[ ${#san_lines[@]} -gt 0 ] || die "--hosts: no host names given"

# --- refuse to overwrite -------------------------------------------------------
files=(ca.key ca.pem curator.key curator.pem admin.token node.key)
mkdir -p "$outdir"
existing=()
for f in "${files[@]}"; do
  [ ! -e "$outdir/$f" ] || existing+=("$f")
done
if [ ${#existing[@]} -gt 0 ] && [ "$force" -ne 1 ]; then
  die "$outdir already holds ${existing[*]}; refusing to replace its CA (pass --force to make new material)"
fi

# --- make everything in a scratch folder, then move it into place -------------
umask 077
work="$(mktemp -d "$outdir/.dev-certs.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cat >"$work/openssl.cnf" <<EOF
[req]
distinguished_name = dn_ca
prompt = no

[dn_ca]
O = ldpgraph development
CN = ldpgraph development CA

[v3_ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[v3_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = @alt_names

[alt_names]
$(printf '%s\n' "${san_lines[@]}")
EOF

new_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
    -pkeyopt ec_param_enc:named_curve -out "$1" 2>/dev/null
}
serial() { echo "0x$(openssl rand -hex 16)"; }

new_key "$work/ca.key"
openssl req -x509 -new -key "$work/ca.key" -config "$work/openssl.cnf" \
  -extensions v3_ca -sha256 -days "$days" -set_serial "$(serial)" \
  -out "$work/ca.pem"

new_key "$work/curator.key"
openssl req -new -key "$work/curator.key" -config "$work/openssl.cnf" \
  -subj "/O=ldpgraph development/CN=ldpgraph curator" \
  -out "$work/curator.csr"
openssl x509 -req -in "$work/curator.csr" -CA "$work/ca.pem" \
  -CAkey "$work/ca.key" -set_serial "$(serial)" -sha256 -days "$days" \
  -extfile "$work/openssl.cnf" -extensions v3_server \
  -out "$work/curator.pem" 2>/dev/null

openssl rand -hex 32 >"$work/admin.token"
openssl rand -hex 32 >"$work/node.key"

openssl verify -CAfile "$work/ca.pem" "$work/curator.pem" >/dev/null ||
  die "the new curator certificate does not verify against the new CA"

chmod 600 "$work/ca.key" "$work/curator.key" "$work/admin.token" "$work/node.key"
chmod 644 "$work/ca.pem" "$work/curator.pem"
for f in "${files[@]}"; do
  mv -f "$work/$f" "$outdir/$f"
done

# --- say what was made ---------------------------------------------------------
expires="$(openssl x509 -noout -enddate -in "$outdir/curator.pem" | cut -d= -f2)"
sans="$(openssl x509 -noout -ext subjectAltName -in "$outdir/curator.pem" | tail -n +2 | tr -d ' ')"
echo "${prog}: wrote to ${outdir}:"
echo "  ca.key       CA private key (EC P-256, mode 600)"
echo "  ca.pem       CA certificate: give it to every agent host and admin client"
echo "  curator.key  curator private key (EC P-256, mode 600)"
echo "  curator.pem  curator certificate for ${sans}, expires ${expires}"
echo "  admin.token  admin API token (64 hex digits, mode 600)"
echo "  node.key     per-node credential key (64 hex digits, mode 600)"
echo "Development only: anyone who can read ca.key can impersonate the curator."
