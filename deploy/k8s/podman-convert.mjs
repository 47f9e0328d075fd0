#!/usr/bin/env node
// Converts rendered Kubernetes manifests into what `podman kube play` can
// run on a single machine, plus a plan that podman-play.sh executes.
//
//   node podman-convert.mjs --in RENDERED.yaml --out-dir DIR
//                           [--podman-version X.Y.Z] [--network NAME]
//
// podman kube play (4.3) plays Pods, Deployments, PersistentVolumeClaims
// (and reads ConfigMaps given with --configmap). What this converter
// substitutes, and why (every item was checked on podman 4.3.1):
//
//   StatefulSet   -> one Pod per replica named <sts>-<ordinal> with
//                    hostname <sts>-<ordinal> (the stable identity the agent
//                    hosts use as --name), and for each volumeClaimTemplate a
//                    PersistentVolumeClaim <claim>-<sts>-<ordinal> (a podman
//                    named volume, kept by `podman-play.sh down`).
//   Deployment    -> one Pod per replica named <deployment>-<i>.
//   Job           -> a Pod named after the Job, with the template's
//                    restartPolicy (OnFailure); backoffLimit and
//                    activeDeadlineSeconds go to the plan, and the play
//                    script enforces them.
//   Service       -> no podman object. Pods join one podman network with DNS
//                    (aardvark-dns), where every pod resolves by its pod
//                    name; the pods a Service selects get the Service's name
//                    as a network alias (kube play --network NET:alias=NAME),
//                    so `ldpgraph-curator` resolves to the curator pod, as the
//                    ClusterIP Service does in a cluster.
//   Secret        -> a podman secret holding the Secret as YAML (podman
//                    secret create); a `secret` volume then mounts its keys
//                    as files. podman 4.3 does not decode the base64 of
//                    `data` (the files would hold base64 text) and ignores
//                    stringData, so for 4.3 the values are written as YAML
//                    !!binary scalars, which its YAML reader does decode:
//                    byte-exact files. Later versions read a plain Secret.
//                    Each secret volume also gets `optional: false`: without
//                    it, 4.3.1 dereferences a nil pointer and panics.
//   ConfigMap     -> configmaps.yaml, passed with --configmap.
//   Namespace     -> dropped (podman has no namespaces).
//   HorizontalPodAutoscaler, PodDisruptionBudget -> dropped: a cluster's
//                    scaling and eviction policies, with no machine to
//                    scale to or drain on one host; the Deployment's own
//                    replicas run (the replicas overlay sets them to the
//                    autoscaler's minimum).
//   PersistentVolumeClaim -> kept (one file per claim, played only if the
//                    volume does not exist yet: 4.3.1 fails on an existing one).
//
// And in every pod:
//   - restartPolicy Always -> OnFailure: under Always, podman 4.3.1 restarts
//     the init containers forever (a finished init container is restarted,
//     then kube play fails removing it). OnFailure still restarts a crashed
//     server.
//   - probes are removed: podman turns livenessProbe into a healthcheck
//     that runs curl inside the container (absent from the images) driven
//     by systemd timers (absent in many containers and CI machines), and it
//     ignores readiness and startup probes.
//   - ports are removed: 4.3.1 publishes every containerPort on the host,
//     so two agent pods collide on 9091 (and the curator would be exposed
//     on the host). Pods reach each other on any port over the network.
//   - emptyDir volumes are renamed <pod>-<volume>: 4.3.1 turns an emptyDir
//     into a named volume called after the volume, shared by every pod
//     using that name (all pods would write the same `dataset`).
//   - $(VAR) in command and args is expanded here, as the kubelet does
//     (podman 4.3.1 passes it through literally), from the container's env:
//     plain values, ConfigMap keys and fieldRef metadata.name/namespace.
//     Secret values are never put on a command line.
//   - PATH is set to the usual default when the container sets none: unlike
//     `podman run`, kube play 4.3.1 adds no default PATH, so an image
//     without ENV PATH could not find a relative entrypoint.
//   Pod-level runAsUser/runAsGroup are honoured by 4.3.1; fsGroup is not,
//   but podman chowns a new, empty named or emptyDir volume to the
//   container's user on first use, and mounts secret files world-readable
//   inside the pod, so uid 10001 can use them all. A secret's volume takes
//   the image's mount point's owner and mode, though, so a pod whose user
//   is not that owner names the owner's group in supplementalGroups (which
//   4.3.1 honours): PostgreSQL's pod, for /db-secrets (group 10001). seccompProfile
//   RuntimeDefault is what podman applies anyway.
//
// Plan (DIR/plan.txt, one step per line, fields separated by spaces):
//   image REF                                      an image the pods need
//   configmaps FILE
//   secret NAME FILE
//   pvc NAME FILE
//   workload NAME FILE ALIASES POD[,POD...]      ALIASES "-" or a,b
//   job POD CONTAINER BACKOFF_LIMIT DEADLINE_SECONDS
// Workloads come in start order: StatefulSets behind a ClusterIP Service
// (the stores others wait for: PostgreSQL, the single curator) first, then
// the other pods behind a ClusterIP Service (servers others dial), then
// the rest, then Jobs. kube play returns only once a pod's init containers
// are done, so a frontend whose init container waits for PostgreSQL must
// come after it.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const YAML = createRequire(join(here, ".validator", "package.json"))("yaml");
const YAML_IN = { version: "1.1" };

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

function usage(msg) {
  if (msg) console.error(`podman-convert.mjs: ${msg}`);
  console.error("usage: podman-convert.mjs --in RENDERED.yaml --out-dir DIR [--podman-version X.Y.Z] [--network NAME]");
  process.exit(2);
}

function parseArgs(argv) {
  const o = { podmanVersion: "4.3.1" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i] ?? usage(`${a} needs a value`);
    if (a === "--in") o.in = v();
    else if (a === "--out-dir") o.outDir = v();
    else if (a === "--podman-version") o.podmanVersion = v();
    else if (a === "--network") o.network = v();
    else usage(`unknown argument ${a}`);
  }
  if (!o.in || !o.outDir) usage();
  return o;
}

function versionBelow(version, major, minor) {
  const [ma, mi] = version.split(".").map((s) => parseInt(s, 10));
  return ma < major || (ma === major && mi < minor);
}

const clone = (x) => (x === undefined ? undefined : JSON.parse(JSON.stringify(x)));

function matches(selector, labels) {
  const entries = Object.entries(selector || {});
  return entries.length > 0 && entries.every(([k, v]) => labels?.[k] === v);
}

// Kubernetes' $(VAR) expansion (k8s.io/kubernetes third_party/forked/golang/expansion):
// $$ -> $, $(NAME) -> value when NAME is defined, else left as is.
function expand(input, lookup) {
  let out = "";
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c !== "$" || i + 1 >= input.length) {
      out += c;
      continue;
    }
    const next = input[i + 1];
    if (next === "$") {
      out += "$";
      i++;
    } else if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close < 0) {
        out += input.slice(i);
        break;
      }
      const name = input.slice(i + 2, close);
      const value = lookup(name);
      out += value === undefined ? input.slice(i, close + 1) : value;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

class Converter {
  constructor(objects, opts) {
    this.opts = opts;
    this.objects = objects;
    this.configMaps = new Map(objects.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o]));
    this.services = objects.filter((o) => o.kind === "Service");
    this.steps = [];
    this.files = new Map(); // file name -> content
  }

  envLookup(container, podName, namespace) {
    const env = new Map();
    for (const e of container.env || []) {
      if (e.value !== undefined) env.set(e.name, String(e.value));
      else if (e.valueFrom?.configMapKeyRef) {
        const { name, key } = e.valueFrom.configMapKeyRef;
        const v = this.configMaps.get(name)?.data?.[key];
        if (v !== undefined) env.set(e.name, String(v));
      } else if (e.valueFrom?.fieldRef) {
        const f = e.valueFrom.fieldRef.fieldPath;
        if (f === "metadata.name") env.set(e.name, podName);
        else if (f === "metadata.namespace") env.set(e.name, namespace);
      }
    }
    for (const ref of container.envFrom || []) {
      if (!ref.configMapRef) continue;
      const data = this.configMaps.get(ref.configMapRef.name)?.data || {};
      for (const [k, v] of Object.entries(data)) if (!env.has((ref.prefix || "") + k)) env.set((ref.prefix || "") + k, String(v));
    }
    return (name) => env.get(name);
  }

  // A pod for podman from a pod template.
  pod(template, name, { extraLabels = {}, hostname, restartPolicy, namespace }) {
    const spec = clone(template.spec);
    const metadata = {
      name,
      labels: { ...(template.metadata?.labels || {}), ...extraLabels },
    };
    if (template.metadata?.annotations) metadata.annotations = clone(template.metadata.annotations);
    if (hostname) spec.hostname = hostname;
    delete spec.subdomain;
    spec.restartPolicy = restartPolicy ?? (spec.restartPolicy === "Never" ? "Never" : "OnFailure");
    for (const c of [...(spec.initContainers || []), ...(spec.containers || [])]) {
      delete c.livenessProbe;
      delete c.readinessProbe;
      delete c.startupProbe;
      const lookup = this.envLookup(c, name, namespace);
      if (c.command) c.command = c.command.map((s) => expand(String(s), lookup));
      if (c.args) c.args = c.args.map((s) => expand(String(s), lookup));
      c.env = c.env || [];
      if (!c.env.some((e) => e.name === "PATH")) c.env.unshift({ name: "PATH", value: DEFAULT_PATH });
    }
    // emptyDir: podman 4.3.1 makes a named volume called after the volume,
    // shared by every pod that uses the same name (all pods would write
    // one `dataset`); name it after the pod instead.
    const renamed = new Map();
    for (const v of spec.volumes || []) {
      if (v.secret) v.secret.optional = v.secret.optional ?? false;
      if (v.emptyDir) {
        renamed.set(v.name, `${name}-${v.name}`);
        v.name = `${name}-${v.name}`;
      }
    }
    for (const c of [...(spec.initContainers || []), ...(spec.containers || [])]) {
      for (const m of c.volumeMounts || []) m.name = renamed.get(m.name) ?? m.name;
      // containerPort: podman 4.3.1 publishes it on the host (as if it were
      // a hostPort), so the agent pods would collide on 9091. Pods reach
      // each other on every port over the network anyway.
      delete c.ports;
    }
    return { apiVersion: "v1", kind: "Pod", metadata, spec };
  }

  aliasesFor(podLabels) {
    return this.services.filter((s) => matches(s.spec?.selector, podLabels)).map((s) => s.metadata.name);
  }

  behindClusterIP(podLabels) {
    return this.services.some(
      (s) => matches(s.spec?.selector, podLabels) && s.spec?.clusterIP !== "None" && s.spec?.type !== "ExternalName",
    );
  }

  writeYaml(file, docs) {
    this.files.set(file, docs.map((d) => YAML.stringify(d, { lineWidth: 0 })).join("---\n"));
  }

  secretFile(secret) {
    const name = secret.metadata.name;
    const data = secret.data || {};
    let text;
    if (versionBelow(this.opts.podmanVersion, 4, 4)) {
      // podman 4.3: values verbatim as !!binary (its reader decodes those).
      const lines = ["apiVersion: v1", "kind: Secret", "metadata:", `  name: ${JSON.stringify(name)}`, "data:"];
      for (const [k, v] of Object.entries(data)) {
        lines.push(`  ${JSON.stringify(k)}: !!binary ${String(v).replace(/[\r\n]/g, "")}`);
      }
      for (const [k, v] of Object.entries(secret.stringData || {})) {
        lines.push(`  ${JSON.stringify(k)}: !!binary ${Buffer.from(String(v)).toString("base64")}`);
      }
      text = lines.join("\n") + "\n";
    } else {
      const plain = { apiVersion: "v1", kind: "Secret", metadata: { name }, type: secret.type, data: {} };
      for (const [k, v] of Object.entries(data)) plain.data[k] = String(v).replace(/[\r\n]/g, "");
      for (const [k, v] of Object.entries(secret.stringData || {})) plain.data[k] = Buffer.from(String(v)).toString("base64");
      text = YAML.stringify(plain);
    }
    const file = `secret-${name}.yaml`;
    this.files.set(file, text);
    this.steps.push(["secret", name, file]);
  }

  pvcFile(pvc) {
    const file = `pvc-${pvc.metadata.name}.yaml`;
    this.writeYaml(file, [pvc]);
    this.steps.push(["pvc", pvc.metadata.name, file]);
  }

  run() {
    const workloads = [];
    const jobs = [];
    let order = 0;
    for (const o of this.objects) {
      const ns = o.metadata?.namespace || "default";
      switch (o.kind) {
        case "Namespace":
        case "Service":
        case "ConfigMap":
        case "HorizontalPodAutoscaler":
        case "PodDisruptionBudget":
          break;
        case "Secret":
          this.secretFile(o);
          break;
        case "PersistentVolumeClaim":
          this.pvcFile({ apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: o.metadata.name, labels: o.metadata.labels }, spec: o.spec });
          break;
        case "StatefulSet": {
          const sts = o.metadata.name;
          const n = o.spec.replicas ?? 1;
          const pods = [];
          for (let i = 0; i < n; i++) {
            const podName = `${sts}-${i}`;
            const pod = this.pod(o.spec.template, podName, {
              hostname: podName,
              namespace: ns,
              extraLabels: { "statefulset.kubernetes.io/pod-name": podName, "apps.kubernetes.io/pod-index": String(i) },
            });
            for (const t of o.spec.volumeClaimTemplates || []) {
              const claim = `${t.metadata.name}-${sts}-${i}`;
              pod.spec.volumes = pod.spec.volumes || [];
              pod.spec.volumes.push({ name: t.metadata.name, persistentVolumeClaim: { claimName: claim } });
              this.pvcFile({
                apiVersion: "v1",
                kind: "PersistentVolumeClaim",
                metadata: { name: claim, labels: { ...(t.metadata.labels || {}), ...(o.spec.selector?.matchLabels || {}) } },
                spec: clone(t.spec),
              });
            }
            pods.push(pod);
          }
          workloads.push({ name: sts, pods, labels: o.spec.template.metadata?.labels, order: order++, stateful: true });
          break;
        }
        case "Deployment": {
          const pods = [];
          for (let i = 0; i < (o.spec.replicas ?? 1); i++) {
            pods.push(this.pod(o.spec.template, `${o.metadata.name}-${i}`, { namespace: ns }));
          }
          workloads.push({ name: o.metadata.name, pods, labels: o.spec.template.metadata?.labels, order: order++ });
          break;
        }
        case "Pod":
          workloads.push({
            name: o.metadata.name,
            pods: [this.pod({ metadata: o.metadata, spec: o.spec }, o.metadata.name, { namespace: ns })],
            labels: o.metadata.labels,
            order: order++,
          });
          break;
        case "Job": {
          const name = o.metadata.name;
          const restart = o.spec.template.spec.restartPolicy || "OnFailure";
          const pod = this.pod(o.spec.template, name, {
            namespace: ns,
            restartPolicy: restart,
            extraLabels: { "job-name": name, "batch.kubernetes.io/job-name": name },
          });
          const container = pod.spec.containers[0].name;
          jobs.push({
            name,
            pods: [pod],
            labels: o.spec.template.metadata?.labels,
            job: [name, container, String(o.spec.backoffLimit ?? 6), String(o.spec.activeDeadlineSeconds ?? 0)],
          });
          break;
        }
        default:
          throw new Error(`${o.kind}/${o.metadata?.name}: podman-play cannot run kind ${o.kind}`);
      }
    }

    if (this.configMaps.size > 0) {
      this.writeYaml("configmaps.yaml", [...this.configMaps.values()].map((c) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: c.metadata.name }, data: c.data || {} })));
      this.steps.unshift(["configmaps", "configmaps.yaml"]);
    }

    const images = new Set();
    for (const w of [...workloads, ...jobs]) {
      for (const p of w.pods) {
        for (const c of [...(p.spec.initContainers || []), ...p.spec.containers]) images.add(c.image);
      }
    }
    for (const image of images) this.steps.unshift(["image", image]);

    const tier = (w) => (this.behindClusterIP(w.labels) ? (w.stateful ? 0 : 1) : 2);
    workloads.sort((a, b) => tier(a) - tier(b) || a.order - b.order);
    let index = 10;
    for (const w of [...workloads, ...jobs]) {
      const file = `${index}-${w.name}.yaml`;
      index += 10;
      this.writeYaml(file, w.pods);
      const aliases = this.aliasesFor(w.labels);
      this.steps.push(["workload", w.name, file, aliases.length ? aliases.join(",") : "-", w.pods.map((p) => p.metadata.name).join(",")]);
      if (w.job) this.steps.push(["job", ...w.job]);
    }
  }

  write(outDir) {
    mkdirSync(outDir, { recursive: true, mode: 0o700 });
    for (const [file, content] of this.files) writeFileSync(join(outDir, file), content, { mode: 0o600 });
    writeFileSync(join(outDir, "plan.txt"), this.steps.map((s) => s.join(" ")).join("\n") + "\n");
  }
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const objects = YAML.parseAllDocuments(readFileSync(opts.in, "utf8"), YAML_IN)
    .map((d) => {
      if (d.errors.length) throw new Error(`${opts.in}: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((o) => o && typeof o === "object");
  for (const o of objects) {
    if (/[^a-z0-9.-]/.test(o.metadata?.name ?? "")) throw new Error(`${o.kind}: unusable name ${JSON.stringify(o.metadata?.name)}`);
  }
  const c = new Converter(objects, opts);
  c.run();
  c.write(opts.outDir);
}

try {
  main();
} catch (e) {
  console.error(`podman-convert.mjs: ${e.message}`);
  process.exit(1);
}
