# shellcheck shell=bash
# Helpers shared by validate.sh, validate-selftest.sh and podman-play.sh.
# Source it; it defines functions and K8S_DIR, and runs nothing.

K8S_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VALIDATOR_DIR="$K8S_DIR/.validator"

die() {
  echo "$(basename "$0"): $*" >&2
  exit 1
}

# Sets KUSTOMIZE to the command that renders a kustomization directory:
# `kubectl kustomize` (kubectl has kustomize built in) or a standalone
# `kustomize build`.
find_kustomize() {
  if command -v kubectl >/dev/null 2>&1; then
    KUSTOMIZE=(kubectl kustomize)
  elif command -v kustomize >/dev/null 2>&1; then
    KUSTOMIZE=(kustomize build)
  else
    echo "$(basename "$0"): neither kubectl nor kustomize is installed." >&2
    echo "  Rendering the manifests needs one of them: kubectl (v1.21 or later" >&2
    echo "  has kustomize built in) or the standalone kustomize binary." >&2
    exit 1
  fi
}

# render DIR OUT: renders the kustomization in DIR into the file OUT.
render() {
  if ! "${KUSTOMIZE[@]}" "$1" >"$2"; then
    die "rendering $1 failed (${KUSTOMIZE[*]} $1)"
  fi
}

# Installs the validator's npm dependencies (pinned by package-lock.json)
# into .validator/node_modules when missing or older than the lock file.
ensure_validator_deps() {
  command -v node >/dev/null 2>&1 || die "node is not installed (the validator and the podman converter are Node.js scripts)"
  local stamp="$VALIDATOR_DIR/node_modules/.package-lock.json"
  if [[ ! -f "$stamp" || "$VALIDATOR_DIR/package-lock.json" -nt "$stamp" ]]; then
    command -v npm >/dev/null 2>&1 || die "npm is not installed (needed once to install the validator's dependencies)"
    echo "installing the validator's npm dependencies into $VALIDATOR_DIR/node_modules (npm ci)" >&2
    (cd "$VALIDATOR_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
      die "npm ci failed in $VALIDATOR_DIR"
  fi
}

# generator_files OVERLAY_DIR: the files the overlay's secretGenerator and
# configMapGenerator read, relative to OVERLAY_DIR, one per line.
generator_files() {
  node "$K8S_DIR/validate.mjs" --list-generator-files "$1/kustomization.yaml"
}

# missing_generator_files OVERLAY_DIR: those of them that do not exist.
missing_generator_files() {
  local f
  while IFS= read -r f; do
    [[ -n "$f" && ! -e "$1/$f" ]] && printf '%s\n' "$f"
  done < <(generator_files "$1")
  return 0
}

# placeholder_tree OVERLAY_NAME TMPDIR: copies base/ and overlays/ into
# TMPDIR/tree WITHOUT any secrets/ folder, writes a placeholder for every
# generator input of the overlay, and prints the path of the copied overlay.
# The working tree is never written to.
placeholder_tree() {
  local name="$1" tree="$2/tree" f
  mkdir -p "$tree"
  tar -C "$K8S_DIR" --exclude='./overlays/*/secrets' -cf - ./base ./overlays | tar -C "$tree" -xf -
  while IFS= read -r f; do
    [[ -z "$f" ]] && continue
    mkdir -p "$(dirname "$tree/overlays/$name/$f")"
    printf 'placeholder (deploy/k8s/lib.sh): not a real secret\n' >"$tree/overlays/$name/$f"
  done < <(generator_files "$K8S_DIR/overlays/$name")
  printf '%s\n' "$tree/overlays/$name"
}
