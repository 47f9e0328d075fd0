#!/usr/bin/env bash
# Proves that the validator can fail: the real rendered manifests must pass,
# and each broken variant below must be rejected with the expected reason.
#
#   deploy/k8s/validate-selftest.sh
#
# Every broken variant is one object of the real rendered overlay with a
# single mistake applied (so the mistake, and nothing else, is what fails),
# plus a few hand-written YAML documents for things that cannot be expressed
# as an edit of a parsed object (duplicate keys, a broken document).
# Ends with "N passed, M failed"; exits 1 if any expectation was not met.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

find_kustomize
ensure_validator_deps

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# ---------------------------------------------------------------- renders
render "$K8S_DIR/base" "$tmp/base.yaml"
overlay="$(placeholder_tree local "$tmp/local")"
render "$overlay" "$tmp/local.yaml"
overlay="$(placeholder_tree replicas "$tmp/replicas")"
render "$overlay" "$tmp/replicas.yaml"

# The real manifests pass.
if node "$K8S_DIR/validate.mjs" "base=$tmp/base.yaml" "overlays/local=$tmp/local.yaml" \
  "overlays/replicas=$tmp/replicas.yaml" >"$tmp/real.log" 2>&1; then
  pass "the rendered base, overlays/local and overlays/replicas pass ($(tail -n1 "$tmp/real.log"))"
else
  fail "the rendered manifests should pass:"
  sed 's/^/    /' "$tmp/real.log"
fi

# ------------------------------------------------------- broken variants
# mutate OBJECT OP... : writes the object Kind/name of the rendered overlay
# (overlays/local, or the file MUTATE_FROM names), with the edits applied,
# to stdout. OPs (paths are JSON pointers):
#   set PATH JSON      set a value
#   del PATH           delete a field or array element
#   rename PATH NAME   rename the field at PATH to NAME (same parent)
mutate() {
  node - "${MUTATE_FROM:-$tmp/local.yaml}" "$@" <<'EOF'
const { createRequire } = require("node:module");
const req = createRequire(process.env.VALIDATOR_PACKAGE_JSON);
const YAML = req("yaml");
const fs = require("node:fs");
const [file, object, ...ops] = process.argv.slice(2);
const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"), { version: "1.1" }).map((d) => d.toJS());
const obj = docs.find((d) => d && `${d.kind}/${d.metadata?.name}` === object);
if (!obj) throw new Error(`no object ${object} in ${file}`);
const split = (p) => p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
const parentOf = (p, mustExist) => {
  const segs = split(p);
  const last = segs.pop();
  let cur = obj;
  for (const s of segs) {
    if (cur[s] === undefined) throw new Error(`${p}: no ${s}`);
    cur = cur[s];
  }
  if (mustExist && !(last in cur)) throw new Error(`${p}: no ${last}`);
  return [cur, last];
};
for (let i = 0; i < ops.length; ) {
  const op = ops[i++];
  const [parent, key] = parentOf(ops[i++], op !== "set");
  if (op === "set") parent[key] = JSON.parse(ops[i++]);
  else if (op === "del") Array.isArray(parent) ? parent.splice(Number(key), 1) : delete parent[key];
  else if (op === "rename") {
    parent[ops[i++]] = parent[key];
    delete parent[key];
  } else throw new Error(`unknown op ${op}`);
}
process.stdout.write(YAML.stringify(obj, { version: "1.1" }));
EOF
}
export VALIDATOR_PACKAGE_JSON="$VALIDATOR_DIR/package.json"

# expect_reject NAME EXPECTED-SUBSTRING FILE: the validator must exit 1,
# report exactly one failed object, and print the expected reason.
expect_reject() {
  local name="$1" expected="$2" file="$3" log="$tmp/case.log" rc=0
  node "$K8S_DIR/validate.mjs" "$name=$file" >"$log" 2>&1 || rc=$?
  if [[ $rc -ne 1 ]]; then
    fail "$name: validator exited $rc, expected 1"
    sed 's/^/    /' "$log"
  elif ! grep -qF -- "$expected" "$log"; then
    fail "$name: rejected, but without \"$expected\":"
    sed 's/^/    /' "$log"
  elif ! tail -n1 "$log" | grep -qx '0 passed, 1 failed'; then
    fail "$name: expected exactly one failed object:"
    sed 's/^/    /' "$log"
  else
    pass "$name: rejected ($expected)"
  fi
}

# case NAME OBJECT EXPECTED OP...
case_mutation() {
  local name="$1" object="$2" expected="$3"
  shift 3
  mutate "$object" "$@" >"$tmp/case.yaml"
  expect_reject "$name" "$expected" "$tmp/case.yaml"
}

AGENT=StatefulSet/ldpgraph-agent
CURATOR=StatefulSet/ldpgraph-curator
JOB=Job/ldpgraph-campaign
C0=/spec/template/spec/containers/0

# Unknown fields (the shipped schemas alone accept them).
case_mutation "typo'd field replica: 3" $AGENT \
  "spec.replica: unknown field" rename /spec/replicas replica
case_mutation "typo'd nested field" $CURATOR \
  "securityContext.readOnlyRootFileSystem: unknown field" \
  rename $C0/securityContext/readOnlyRootFilesystem readOnlyRootFileSystem
case_mutation "typo'd field in a Service" Service/ldpgraph-agent \
  "spec.clusterIp: unknown field" rename /spec/clusterIP clusterIp
case_mutation "typo'd metadata field" ConfigMap/ldpgraph-config \
  "metadata.label: unknown field" rename /metadata/labels label
case_mutation "field at the wrong level" $JOB \
  "spec.restartPolicy: unknown field" set /spec/restartPolicy '"Never"'

# Wrong types, required fields, enums, formats.
case_mutation "string where an integer belongs" $AGENT \
  "spec.replicas: must be integer" set /spec/replicas '"3"'
case_mutation "string port in a Service" Service/ldpgraph-curator \
  "spec.ports[0].port: must be integer" set /spec/ports/0/port '"7443"'
case_mutation "list where a map belongs" $CURATOR \
  "resources.limits: must be object" set $C0/resources/limits '["2Gi"]'
case_mutation "missing required selector" $AGENT \
  "spec.selector: required field missing" del /spec/selector
case_mutation "container without a name" $JOB \
  "spec.template.spec.containers[0].name: required field missing" del $C0/name
case_mutation "bad enum value" $AGENT \
  "spec.podManagementPolicy: must be equal to one of the allowed values" \
  set /spec/podManagementPolicy '"parallel"'
case_mutation "bad quantity" $CURATOR \
  "must match format \"quantity\"" set $C0/resources/limits/memory '"2 GB"'
case_mutation "Secret data not base64" Secret/ldpgraph-agent-secrets \
  "must match format \"byte\"" set /data/ca.pem '"not base64!"'

# Unknown kinds and apiVersions.
case_mutation "unknown kind" $AGENT \
  "apps/v1 has no kind StatefulSets" set /kind '"StatefulSets"'
case_mutation "unknown apiVersion" $AGENT \
  "unknown apiVersion apps/v1beta9" set /apiVersion '"apps/v1beta9"'

# Project rules.
case_mutation "container without resources" $JOB \
  "resources.requests.cpu is required" del $C0/resources
case_mutation "init container without limits" $AGENT \
  "resources.limits.memory is required" del /spec/template/spec/initContainers/0/resources/limits
case_mutation "agent without readinessProbe" $AGENT \
  "readinessProbe is required for the agent" del $C0/readinessProbe
case_mutation "curator without livenessProbe" $CURATOR \
  "livenessProbe is required for the curator" del $C0/livenessProbe
case_mutation "curator without startupProbe" $CURATOR \
  "startupProbe is required for the curator" del $C0/startupProbe
case_mutation "pod may run as root" $JOB \
  "runAsNonRoot: must be true" del /spec/template/spec/securityContext/runAsNonRoot
case_mutation "privilege escalation allowed" $AGENT \
  "allowPrivilegeEscalation must be false" set $C0/securityContext/allowPrivilegeEscalation true
case_mutation "missing part-of label" Service/ldpgraph-curator \
  "missing label app.kubernetes.io/part-of" del '/metadata/labels/app.kubernetes.io~1part-of'

# The replicas overlay's own kinds and components.
case_replicas() { MUTATE_FROM="$tmp/replicas.yaml" case_mutation "$@"; }
case_replicas "operator without readinessProbe" Deployment/ldpgraph-curator-operator \
  "readinessProbe is required for the operator" del $C0/readinessProbe
case_replicas "frontend without startupProbe" Deployment/ldpgraph-curator-frontend \
  "startupProbe is required for the frontend" del $C0/startupProbe
case_replicas "database without livenessProbe" StatefulSet/ldpgraph-postgres \
  "livenessProbe is required for the database" del $C0/livenessProbe
case_replicas "postgres may escalate privileges" StatefulSet/ldpgraph-postgres \
  "allowPrivilegeEscalation must be false" set $C0/securityContext/allowPrivilegeEscalation true
case_replicas "typo'd HPA field" HorizontalPodAutoscaler/ldpgraph-curator-frontend \
  "spec.minReplica: unknown field" rename /spec/minReplicas minReplica
case_replicas "HPA replicas as a string" HorizontalPodAutoscaler/ldpgraph-curator-frontend \
  "spec.maxReplicas: must be integer" set /spec/maxReplicas '"10"'
case_replicas "typo'd PDB field" PodDisruptionBudget/ldpgraph-curator-frontend \
  "spec.minAvailabe: unknown field" rename /spec/minAvailable minAvailabe

# Hand-written documents.
cat >"$tmp/dup.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: dup
  labels: {app.kubernetes.io/name: x, app.kubernetes.io/component: x, app.kubernetes.io/part-of: x}
data:
  A: "1"
  A: "2"
EOF
expect_reject "duplicate key" "Map keys must be unique" "$tmp/dup.yaml"

cat >"$tmp/nokind.yaml" <<'EOF'
apiVersion: v1
metadata:
  name: nokind
EOF
expect_reject "missing kind" "is not a valid kind" "$tmp/nokind.yaml"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
