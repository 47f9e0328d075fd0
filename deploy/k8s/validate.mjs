#!/usr/bin/env node
// Offline validation of rendered Kubernetes manifests (multi-document YAML).
//
//   node validate.mjs [LABEL=]FILE...          validate; "-" reads stdin
//   node validate.mjs --list-generator-files KUSTOMIZATION.yaml
//                                              print the files its
//                                              secretGenerator/configMapGenerator
//                                              read (validate.sh uses it to make
//                                              placeholders)
//
// Normally run through validate.sh, which renders the kustomizations and
// installs the dependencies (.validator/, pinned by package-lock.json).
//
// Every object is checked against the Kubernetes OpenAPI schemas shipped by
// the npm package kubernetes-models (one model class per apiVersion/kind,
// each with a compiled JSON-schema validator), then against the project's
// own rules. An object fails on:
//   - an unknown apiVersion, or a kind that apiVersion does not have;
//   - a wrong type, a missing required field, a bad enum value or format
//     (the schema validator);
//   - an unknown field. The shipped validators do NOT reject unknown fields
//     (Kubernetes' schemas carry no additionalProperties: false, so a typo
//     such as `replica: 3` passes them). The strict check here uses the
//     validators themselves as the source of the known field names: the
//     object is handed to the validator wrapped in Proxies that record
//     every property the validator looks up. A compiled validator reads
//     each property its schema declares (present or not), so a key of the
//     object that was never looked up is not in the schema. Objects whose
//     schema is free-form (no declared properties, e.g. RawExtension) get
//     no lookups at all and are left alone; maps (labels, resources.limits)
//     are iterated by the validator, so all their keys count as read.
//   - a project rule (see projectRules below): resources on every container,
//     probes on the curator, agent, operator, frontend and database, non-root
//     and hardened security contexts, the app.kubernetes.io labels.
//
// Output: one line per object ("Kind/name: ok" or "Kind/name: FAILED" with
// the reasons indented below), then "N passed, M failed". Exit status 1 if
// anything failed (or nothing was validated), 2 on usage errors.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// Resolve packages from .validator/node_modules, wherever this script is run
// from (the ESM loader would only look beside this file).
const requireDep = createRequire(join(here, ".validator", "package.json"));

function loadDeps() {
  try {
    return { YAML: requireDep("yaml") };
  } catch (e) {
    console.error(
      `validate.mjs: cannot load the npm dependencies from ${join(here, ".validator")}: ${e.message}\n` +
        "Run deploy/k8s/validate.sh (it runs `npm ci` there), or `npm ci --prefix deploy/k8s/.validator`.",
    );
    process.exit(2);
  }
}
const { YAML } = loadDeps();

// ---------------------------------------------------------------- YAML input

// Kubernetes reads manifests as YAML 1.1 (sigs.k8s.io/yaml on go-yaml), where
// 0440 is octal and yes/no are booleans: parse the same way.
const YAML_OPTIONS = { version: "1.1", uniqueKeys: true, prettyErrors: true };

function parseDocuments(text, source) {
  const out = [];
  const docs = YAML.parseAllDocuments(text, YAML_OPTIONS);
  for (const [i, doc] of docs.entries()) {
    const where = `${source}: document ${i + 1}`;
    if (doc.errors.length > 0) {
      out.push({ where, parseError: doc.errors.map((e) => e.message.split("\n")[0]).join("; ") });
      continue;
    }
    const value = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) continue; // empty document
    out.push({ where, value });
  }
  return out;
}

// ----------------------------------------------------------- model lookup

// apiVersion is "v1" (core) or "group/version"; a version is v1, v2beta1, ...
const API_VERSION_RE = /^(?:([a-z0-9]([a-z0-9.-]*[a-z0-9])?)\/)?(v[0-9]+(?:(?:alpha|beta)[0-9]+)?)$/;

function findModel(apiVersion, kind) {
  if (typeof apiVersion !== "string" || !API_VERSION_RE.test(apiVersion)) {
    return { error: `apiVersion: ${JSON.stringify(apiVersion)} is not a valid apiVersion` };
  }
  if (typeof kind !== "string" || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return { error: `kind: ${JSON.stringify(kind)} is not a valid kind` };
  }
  let mod;
  try {
    mod = requireDep(`kubernetes-models/${apiVersion}`);
  } catch (e) {
    if (e.code === "MODULE_NOT_FOUND" || e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED") {
      return { error: `apiVersion: unknown apiVersion ${apiVersion}` };
    }
    throw e;
  }
  const model = mod[kind];
  // The modules also export the nested types (e.g. StatefulSetSpec); only
  // top-level kinds carry apiVersion/kind of their own.
  if (typeof model !== "function" || model.kind !== kind || model.apiVersion !== apiVersion) {
    return { error: `kind: ${apiVersion} has no kind ${kind}` };
  }
  return { model };
}

// ------------------------------------------------ schema + unknown fields

function pathString(segments) {
  let s = "";
  for (const seg of segments) {
    if (typeof seg === "number") s += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(seg)) s += s === "" ? seg : `.${seg}`;
    else s += `[${JSON.stringify(seg)}]`;
  }
  return s === "" ? "(root)" : s;
}

function instancePathString(instancePath) {
  // ajv's JSON pointer: /spec/template/spec/containers/0/name
  if (!instancePath) return "(root)";
  const segs = instancePath
    .split("/")
    .slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((s) => (/^[0-9]+$/.test(s) ? Number(s) : s));
  return pathString(segs);
}

// Wraps `root` so that every property lookup made on it (and on everything
// reached through it) is recorded per object.
function trackLookups(root) {
  const records = [];
  const proxies = new WeakMap();
  function wrap(value, segs) {
    if (value === null || typeof value !== "object") return value;
    const known = proxies.get(value);
    if (known) return known;
    const rec = { segs, target: value, isArray: Array.isArray(value), read: new Set() };
    records.push(rec);
    const note = (key) => {
      if (typeof key === "string") rec.read.add(key);
    };
    const proxy = new Proxy(value, {
      get(t, key, receiver) {
        note(key);
        const v = Reflect.get(t, key, receiver);
        if (typeof key === "string" && Object.prototype.hasOwnProperty.call(t, key)) {
          return wrap(v, [...segs, rec.isArray ? Number(key) : key]);
        }
        return v;
      },
      has(t, key) {
        note(key);
        return Reflect.has(t, key);
      },
      getOwnPropertyDescriptor(t, key) {
        note(key);
        return Reflect.getOwnPropertyDescriptor(t, key);
      },
    });
    proxies.set(value, proxy);
    return proxy;
  }
  return { proxy: wrap(root, []), records };
}

function schemaProblems(model, value) {
  const problems = [];
  const { proxy, records } = trackLookups(value);
  try {
    // setValidateFunc() puts the compiled schema validator on the prototype;
    // calling it with the proxy as `this` validates the raw object.
    model.prototype.validate.call(proxy);
  } catch (e) {
    if (Array.isArray(e.errors)) {
      for (const err of e.errors) {
        if (err.keyword === "required" && err.params?.missingProperty) {
          const at = instancePathString(`${err.instancePath}/${err.params.missingProperty}`);
          problems.push(`${at}: required field missing`);
          continue;
        }
        let msg = err.message || err.keyword;
        if (err.keyword === "enum" && err.params?.allowedValues) {
          msg += `: ${err.params.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`;
        }
        problems.push(`${instancePathString(err.instancePath)}: ${msg}`);
      }
    } else {
      problems.push(`schema validation: ${e.message}`);
    }
  }
  for (const rec of records) {
    if (rec.isArray || rec.read.size === 0) continue; // arrays; free-form objects
    for (const key of Object.keys(rec.target)) {
      if (!rec.read.has(key)) problems.push(`${pathString([...rec.segs, key])}: unknown field`);
    }
  }
  return problems;
}

// ------------------------------------------------------------ project rules

const WORKLOAD_POD_TEMPLATE = {
  Pod: (o) => ({ metadata: o.metadata, spec: o.spec }),
  Deployment: (o) => o.spec?.template,
  StatefulSet: (o) => o.spec?.template,
  DaemonSet: (o) => o.spec?.template,
  ReplicaSet: (o) => o.spec?.template,
  Job: (o) => o.spec?.template,
  CronJob: (o) => o.spec?.jobTemplate?.spec?.template,
};

const REQUIRED_LABELS = ["app.kubernetes.io/name", "app.kubernetes.io/component", "app.kubernetes.io/part-of"];

// Components whose main containers must have probes. The curator also needs
// a startup probe: it may take a while to load a large store; so do the
// frontends (overlays/replicas) and the database (initdb on its first
// start). The operator (overlays/replicas) has no startup probe on purpose:
// its standby listens nowhere until it takes the lease, which may take any
// time, and its liveness probe passes while it waits.
const PROBED_COMPONENTS = {
  curator: ["readinessProbe", "livenessProbe", "startupProbe"],
  agent: ["readinessProbe", "livenessProbe"],
  operator: ["readinessProbe", "livenessProbe"],
  frontend: ["readinessProbe", "livenessProbe", "startupProbe"],
  database: ["readinessProbe", "livenessProbe", "startupProbe"],
};

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function missingLabels(metadata, where, problems) {
  const labels = isObject(metadata?.labels) ? metadata.labels : {};
  for (const l of REQUIRED_LABELS) {
    if (typeof labels[l] !== "string" || labels[l] === "") problems.push(`${where}: missing label ${l}`);
  }
}

function projectRules(obj) {
  const problems = [];
  const md = obj.metadata;
  if (!isObject(md) || typeof md.name !== "string" || md.name === "") {
    problems.push("metadata.name: required");
  }
  missingLabels(md, "metadata.labels", problems);

  const templateOf = WORKLOAD_POD_TEMPLATE[obj.kind];
  if (!templateOf) return problems;
  const template = templateOf(obj);
  const spec = template?.spec;
  if (!isObject(spec)) return problems; // the schema check reports it
  const tpath = obj.kind === "Pod" ? "" : obj.kind === "CronJob" ? "spec.jobTemplate.spec.template." : "spec.template.";
  if (obj.kind !== "Pod") missingLabels(template.metadata, `${tpath}metadata.labels`, problems);

  const podSC = isObject(spec.securityContext) ? spec.securityContext : {};
  const groups = [
    ["initContainers", spec.initContainers],
    ["containers", spec.containers],
  ];
  const all = [];
  for (const [field, list] of groups) {
    if (!Array.isArray(list)) continue;
    list.forEach((c, i) => {
      if (isObject(c)) all.push({ c, field, where: `${tpath}spec.${field}[${i}]`, name: c.name });
    });
  }

  // Non-root: runAsNonRoot at the pod level or on every container, and
  // never runAsUser 0.
  const everyContainerNonRoot = all.length > 0 && all.every(({ c }) => c.securityContext?.runAsNonRoot === true);
  if (podSC.runAsNonRoot !== true && !everyContainerNonRoot) {
    problems.push(`${tpath}spec.securityContext.runAsNonRoot: must be true (or set on every container)`);
  }
  if (podSC.runAsUser === 0) problems.push(`${tpath}spec.securityContext.runAsUser: must not be 0`);
  const podSeccomp = podSC.seccompProfile?.type;
  const seccompOk = (t) => t === "RuntimeDefault" || t === "Localhost";

  const component = template.metadata?.labels?.["app.kubernetes.io/component"];
  const probes = PROBED_COMPONENTS[component] || [];

  for (const { c, field, where, name } of all) {
    const at = `${where} (${name})`;
    const res = isObject(c.resources) ? c.resources : {};
    const req = isObject(res.requests) ? res.requests : {};
    const lim = isObject(res.limits) ? res.limits : {};
    if (req.cpu === undefined) problems.push(`${at}: resources.requests.cpu is required`);
    if (req.memory === undefined) problems.push(`${at}: resources.requests.memory is required`);
    if (lim.memory === undefined) problems.push(`${at}: resources.limits.memory is required`);

    const sc = isObject(c.securityContext) ? c.securityContext : {};
    if (sc.runAsUser === 0) problems.push(`${at}: securityContext.runAsUser must not be 0`);
    if (sc.runAsNonRoot === false) problems.push(`${at}: securityContext.runAsNonRoot must not be false`);
    if (sc.privileged === true) problems.push(`${at}: securityContext.privileged must not be true`);
    if (sc.allowPrivilegeEscalation !== false) {
      problems.push(`${at}: securityContext.allowPrivilegeEscalation must be false`);
    }
    if (sc.readOnlyRootFilesystem !== true) {
      problems.push(`${at}: securityContext.readOnlyRootFilesystem must be true`);
    }
    const drop = Array.isArray(sc.capabilities?.drop) ? sc.capabilities.drop : [];
    if (!drop.includes("ALL")) problems.push(`${at}: securityContext.capabilities.drop must include ALL`);
    if (!seccompOk(sc.seccompProfile?.type ?? podSeccomp)) {
      problems.push(`${at}: seccompProfile.type must be RuntimeDefault (pod or container securityContext)`);
    }
    if (field === "containers") {
      for (const p of probes) {
        if (!isObject(c[p])) problems.push(`${at}: ${p} is required for the ${component}`);
      }
    }
  }
  return problems;
}

// ------------------------------------------------------------------- main

// Base64 fields (Secret.data, ConfigMap.binaryData): the API server's
// decoder skips line breaks, and kustomize wraps long values at 70
// characters in a block scalar; the schema's "byte" format does not allow
// them, so they are removed before the schema check.
function withUnwrappedBase64(value) {
  const field = { Secret: "data", ConfigMap: "binaryData" }[value.kind];
  if (value.apiVersion !== "v1" || !field || !isObject(value[field])) return value;
  const unwrapped = {};
  for (const [k, v] of Object.entries(value[field])) {
    unwrapped[k] = typeof v === "string" ? v.replace(/[\r\n]/g, "") : v;
  }
  return { ...value, [field]: unwrapped };
}

function validateObject(value) {
  if (!isObject(value)) return { id: "(not an object)", problems: ["a manifest must be a mapping"] };
  const id = `${value.kind ?? "(no kind)"}/${value.metadata?.name ?? "(no name)"}`;
  const found = findModel(value.apiVersion, value.kind);
  if (found.error) return { id, problems: [found.error] };
  return { id, problems: [...schemaProblems(found.model, withUnwrappedBase64(value)), ...projectRules(value)] };
}

function listGeneratorFiles(kustomizationPath) {
  const k = YAML.parse(readFileSync(kustomizationPath, "utf8"), YAML_OPTIONS) || {};
  const out = [];
  for (const gen of [...(k.secretGenerator || []), ...(k.configMapGenerator || [])]) {
    for (const entry of [...(gen.files || []), ...(gen.envs || []), ...(gen.env ? [gen.env] : [])]) {
      // files entries may be "key=path".
      const s = String(entry);
      out.push(s.includes("=") ? s.slice(s.indexOf("=") + 1) : s);
    }
  }
  for (const f of out) console.log(f);
}

function main(argv) {
  if (argv[0] === "--list-generator-files") {
    if (argv.length !== 2) {
      console.error("usage: validate.mjs --list-generator-files KUSTOMIZATION.yaml");
      return 2;
    }
    listGeneratorFiles(argv[1]);
    return 0;
  }
  if (argv.length === 0 || argv[0] === "-h" || argv[0] === "--help") {
    console.error("usage: validate.mjs [LABEL=]FILE...   (FILE '-' is stdin)");
    return 2;
  }
  let passed = 0;
  let failed = 0;
  for (const arg of argv) {
    const eq = arg.indexOf("=");
    const [label, file] = eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, arg];
    let text;
    try {
      text = file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
    } catch (e) {
      console.error(`validate.mjs: ${file}: ${e.message}`);
      return 2;
    }
    console.log(`# ${label}`);
    const seen = new Set();
    for (const doc of parseDocuments(text, label)) {
      let id;
      let problems;
      if (doc.parseError) {
        id = doc.where;
        problems = [`YAML: ${doc.parseError}`];
      } else {
        ({ id, problems } = validateObject(doc.value));
        const ns = doc.value?.metadata?.namespace ?? "";
        const key = `${doc.value?.apiVersion}/${id}@${ns}`;
        if (seen.has(key)) problems.push("duplicate object (same apiVersion, kind, namespace and name)");
        seen.add(key);
      }
      if (problems.length === 0) {
        passed++;
        console.log(`${id}: ok`);
      } else {
        failed++;
        console.log(`${id}: FAILED`);
        for (const p of problems) console.log(`  - ${p}`);
      }
    }
  }
  if (passed + failed === 0) {
    console.log("no objects found in the input");
    failed = 1;
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
