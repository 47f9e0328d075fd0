#!/usr/bin/env bash
# Renders deploy/k8s/base and every overlay under deploy/k8s/overlays/ with
# kustomize and validates each rendered object offline (validate.mjs):
# Kubernetes OpenAPI schemas from the npm package kubernetes-models, a strict
# unknown-field check, and the project's rules (resources, probes, non-root,
# hardened security contexts, labels).
#
#   deploy/k8s/validate.sh
#
# Needs node and npm, and kubectl (or kustomize) to render; without either,
# the base's files are validated as written and the overlays are skipped. The first run installs the
# pinned npm dependencies into deploy/k8s/.validator/node_modules (`npm ci`,
# ignored by git); later runs are offline.
#
# An overlay's secretGenerator reads files that make-secrets.sh writes (and
# git ignores). When they are missing, as in CI, the overlay is rendered from
# a temporary copy of the tree with placeholder files: nothing is written to
# the working tree.
#
# Prints one line per object and a closing "N passed, M failed"; exits 1 if
# anything failed.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_validator_deps

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

inputs=()

if ! command -v kubectl >/dev/null 2>&1 && ! command -v kustomize >/dev/null 2>&1; then
  # No renderer: the base's resources are plain manifests (its
  # kustomization transforms nothing), so they are validated as written;
  # the overlays cannot be rendered, and say so.
  echo "note: neither kubectl nor kustomize is installed: validating the base's files" \
    "as written; the overlays are NOT rendered or validated" >&2
  for f in $(sed -n 's/^  - \(.*\.yaml\)$/\1/p' "$K8S_DIR/base/kustomization.yaml"); do
    printf -- '---\n' >>"$tmp/base.yaml"
    cat "$K8S_DIR/base/$f" >>"$tmp/base.yaml"
  done
  exec node "$K8S_DIR/validate.mjs" "base=$tmp/base.yaml"
fi
find_kustomize

render "$K8S_DIR/base" "$tmp/base.yaml"
inputs+=("base=$tmp/base.yaml")

for overlay in "$K8S_DIR"/overlays/*/; do
  overlay="${overlay%/}"
  name="$(basename "$overlay")"
  [[ -f "$overlay/kustomization.yaml" ]] || continue
  dir="$overlay"
  missing="$(missing_generator_files "$overlay")"
  if [[ -n "$missing" ]]; then
    echo "note: overlays/$name: $(echo "$missing" | wc -l) generator input file(s) missing" \
      "(run make-secrets.sh for real ones); rendering with placeholders from a temporary copy" >&2
    dir="$(placeholder_tree "$name" "$tmp/$name")"
  fi
  out="$tmp/overlay-$name.yaml"
  render "$dir" "$out"
  inputs+=("overlays/$name=$out")
done

node "$K8S_DIR/validate.mjs" "${inputs[@]}"
