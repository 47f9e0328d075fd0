#!/bin/sh
# PostgreSQL for the curators of an ldpgraph deployment (deploy/postgres/
# Dockerfile's entrypoint; docker-compose.yml's replicas profile and
# deploy/k8s/overlays/replicas run it). Runs as the user postgres, never root.
#
# First start (no $PGDATA/PG_VERSION): waits for the password file, then
#   initdb    the superuser postgres, its password the file's first line
#             (--pwfile), reachable only through the local socket (peer);
#   a role    $POSTGRES_USER (LOGIN, same password, scram-sha-256) owning
#             the database $POSTGRES_DB: what the curators connect as
#             (--store postgres://$POSTGRES_USER@HOST:5432/$POSTGRES_DB);
#   pg_hba    that role, to that database, from any address, with
#             scram-sha-256; nothing else over the network.
# Every start: PostgreSQL on $PGPORT of every address (listen_addresses
# '*': 0.0.0.0 and, where there is one, ::), in the foreground, with TCP
# keepalives that notice a lost curator in about 25 s (see the end).
#
# Environment (all optional):
#   PGDATA                  the cluster (default /var/lib/postgresql/data/
#                           pgdata: a folder inside the volume, whose root
#                           may hold lost+found)
#   POSTGRES_PASSWORD_FILE  default /db-secrets/db.password
#   POSTGRES_USER           default ldpgraph
#   POSTGRES_DB             default ldpgraph
#   POSTGRES_WAIT           seconds to wait for the password file (600)
#   PGPORT                  default 5432
#   PGSOCKETDIR             the Unix socket's folder (/var/run/postgresql)
# Arguments are passed on to postgres (e.g. -c max_connections=200).
set -eu
# The image's PATH names PostgreSQL's programs, but a runtime need not pass
# it on (podman kube play 4.3 gives a container the usual default instead).
PATH="/usr/lib/postgresql/15/bin:$PATH"
export PATH

PGDATA=${PGDATA:-/var/lib/postgresql/data/pgdata}
PGPORT=${PGPORT:-5432}
PGSOCKETDIR=${PGSOCKETDIR:-/var/run/postgresql}
password_file=${POSTGRES_PASSWORD_FILE:-/db-secrets/db.password}
role=${POSTGRES_USER:-ldpgraph}
db=${POSTGRES_DB:-ldpgraph}
export PGDATA PGPORT

say() { echo "ldpgraph-postgres: $*" >&2; }

if [ "$(id -u)" = 0 ]; then
  say "refusing to run as root (the image's user is postgres)"
  exit 1
fi
case "$role$db" in
  *[!A-Za-z0-9_]*)
    say "POSTGRES_USER and POSTGRES_DB may hold letters, digits and _ only"
    exit 1
    ;;
esac

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  waited=0
  until [ -s "$password_file" ]; do
    if [ "$waited" -ge "${POSTGRES_WAIT:-600}" ]; then
      say "no password in $password_file after ${waited} s"
      exit 1
    fi
    [ "$waited" -gt 0 ] || say "waiting for $password_file"
    sleep 1
    waited=$((waited + 1))
  done
  # Everything in a folder beside, renamed into place at the end: a start
  # interrupted half-way leaves no cluster without its role (and is
  # redone from scratch next time).
  umask 077
  init="$PGDATA.init"
  rm -rf "$init"
  mkdir -p "$(dirname "$PGDATA")"
  say "initialising $PGDATA (role $role, database $db)"
  initdb --pgdata="$init" --username=postgres --pwfile="$password_file" \
    --auth-local=peer --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  # The role and its database, on a server reachable through the socket
  # only. The password: the file's first line, as initdb and the curators
  # read it, as an SQL literal on psql's stdin (so in no process listing);
  # log_min_error_statement=panic keeps a failed statement, password and
  # all, out of the log.
  password=$(head -n 1 "$password_file" | tr -d '\r' | sed "s/'/''/g")
  pg_ctl --pgdata="$init" --wait --silent \
    -o "-c listen_addresses='' -c unix_socket_directories=$PGSOCKETDIR -c log_min_error_statement=panic" \
    start
  psql -X -q -v ON_ERROR_STOP=1 -h "$PGSOCKETDIR" -U postgres -d postgres <<SQL
CREATE ROLE "$role" LOGIN PASSWORD '$password';
CREATE DATABASE "$db" OWNER "$role";
REVOKE ALL ON DATABASE "$db" FROM PUBLIC;
SQL
  pg_ctl --pgdata="$init" --wait --silent --mode=fast stop
  unset password
  cat >>"$init/pg_hba.conf" <<HBA

# ldpgraph (deploy/postgres/entrypoint.sh): the curators, from any address,
# as $role to $db only, with scram-sha-256. The superuser has no network
# access (the local socket, peer authentication: psql -U postgres inside the
# container).
host    $db    $role    0.0.0.0/0    scram-sha-256
host    $db    $role    ::/0         scram-sha-256
HBA
  if [ -e "$PGDATA" ] && ! rmdir "$PGDATA" 2>/dev/null; then
    say "$PGDATA holds files but no cluster (PG_VERSION): move them away"
    exit 1
  fi
  mv "$init" "$PGDATA"
  say "initialised"
fi

# A volume that gives group access (Kubernetes' fsGroup) widens the
# folder's mode; PostgreSQL refuses anything beyond 0750.
chmod 0700 "$PGDATA"

# TCP keepalives towards the clients: the active operator's lease is an
# advisory lock held by its (idle) connection, and it is freed only when
# PostgreSQL sees that connection end. A curator that is killed closes it at
# once; one whose node is lost (or cut off) sends nothing more, and without
# keepalives the server would notice after the kernel's default (over two
# hours), keeping the standby waiting. With these: about 25 s.
exec postgres -D "$PGDATA" \
  -c listen_addresses='*' -c port="$PGPORT" \
  -c unix_socket_directories="$PGSOCKETDIR" \
  -c password_encryption=scram-sha-256 \
  -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 \
  -c tcp_keepalives_count=3 \
  "$@"
