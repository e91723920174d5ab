/**
 * Test helpers for the deployment files, with no Docker engine, kustomize or
 * network at hand:
 *
 * - `renderKustomization(dir)`: a small, faithful kustomize for exactly the
 *   features deploy/k8s uses (resources, namespace, labels with
 *   includeTemplates, images, patches: strategic merge by kind and name and
 *   JSON 6902 with a target). Any other kustomization field is an error, so a
 *   new feature cannot slip past the tests unrendered.
 * - `validateObject(obj)`: compact JSON schemas of the Kubernetes kinds and
 *   fields the manifests use (ajv 8), with additionalProperties false where a
 *   typo would otherwise pass. CI with network access should add kubeconform
 *   against the upstream schemas (docs/operations.md).
 * - `parseDockerfile(text)`: stages, instructions and exec-form arguments.
 */
import { readFileSync, existsSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import { parseAllDocuments } from "yaml";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

// ---------------------------------------------------------------- objects

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface K8sObject extends JsonObject {
  apiVersion: string;
  kind: string;
  metadata: JsonObject & { name: string; namespace?: string; labels?: Record<string, string> };
}

export const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const clone = <T>(value: T): T => structuredClone(value);

export const groupOf = (apiVersion: string) => (apiVersion.includes("/") ? apiVersion.split("/")[0]! : "");
export const objectId = (o: K8sObject) => `${groupOf(o.apiVersion)}/${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;

export function loadYamlDocuments(file: string): Json[] {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const out: Json[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`);
    const value = doc.toJS({ maxAliasCount: 0 }) as Json;
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

function asK8sObject(value: Json, where: string): K8sObject {
  if (!isObject(value) || typeof value.apiVersion !== "string" || typeof value.kind !== "string" || !isObject(value.metadata)) {
    throw new Error(`${where}: not a Kubernetes object (apiVersion, kind, metadata)`);
  }
  if (typeof value.metadata.name !== "string") throw new Error(`${where}: metadata.name missing`);
  return value as K8sObject;
}

// --------------------------------------------------------------- kustomize

const KUSTOMIZATION_FIELDS = new Set(["apiVersion", "kind", "resources", "namespace", "labels", "images", "patches"]);

/** Kinds the namespace transformer leaves alone (cluster-scoped). */
const CLUSTER_SCOPED = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "CustomResourceDefinition",
  "PersistentVolume",
  "StorageClass",
  "PriorityClass",
  "IngressClass",
]);

/** Kinds whose spec.template is a pod template (labels includeTemplates, images). */
const POD_TEMPLATE_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"]);

interface Target {
  group?: string;
  version?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  labelSelector?: string;
}

export function renderKustomization(dir: string): K8sObject[] {
  const file = ["kustomization.yaml", "kustomization.yml", "Kustomization"].map((f) => path.join(dir, f)).find(existsSync);
  if (!file) throw new Error(`${dir}: no kustomization.yaml`);
  const [k] = loadYamlDocuments(file);
  if (!isObject(k)) throw new Error(`${file}: not a mapping`);
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_FIELDS.has(key)) throw new Error(`${file}: field "${key}" is not supported by this renderer`);
  }
  if (k.apiVersion !== "kustomize.config.k8s.io/v1beta1" || k.kind !== "Kustomization") {
    throw new Error(`${file}: apiVersion/kind must be kustomize.config.k8s.io/v1beta1 Kustomization`);
  }

  // 1. resources: files (multi-document YAML) and directories (kustomizations).
  let objects: K8sObject[] = [];
  for (const entry of (k.resources as Json[] | undefined) ?? []) {
    if (typeof entry !== "string" || /^[a-z]+:\/\//i.test(entry)) throw new Error(`${file}: unsupported resource ${JSON.stringify(entry)}`);
    const target = path.resolve(dir, entry);
    if (!existsSync(target)) throw new Error(`${file}: resource ${entry} does not exist`);
    if (statSync(target).isDirectory()) objects.push(...renderKustomization(target));
    else objects.push(...loadYamlDocuments(target).map((d, i) => asK8sObject(d, `${target}#${i}`)));
  }
  assertUnique(objects, file);

  // 2. patches, in order.
  for (const [i, entry] of ((k.patches as Json[] | undefined) ?? []).entries()) {
    if (!isObject(entry)) throw new Error(`${file}: patches[${i}] is not a mapping`);
    for (const key of Object.keys(entry)) {
      if (!["path", "patch", "target"].includes(key)) throw new Error(`${file}: patches[${i}].${key} is not supported`);
    }
    const source =
      typeof entry.path === "string"
        ? loadYamlDocuments(path.resolve(dir, entry.path))
        : typeof entry.patch === "string"
          ? parseAllDocuments(entry.patch).map((d) => d.toJS() as Json)
          : undefined;
    if (!source) throw new Error(`${file}: patches[${i}] needs path or patch`);
    const target = isObject(entry.target) ? (entry.target as Target) : undefined;
    if (source.length === 1 && Array.isArray(source[0])) {
      if (!target) throw new Error(`${file}: patches[${i}] is a JSON 6902 patch and needs a target`);
      const matched = objects.filter((o) => matchesTarget(o, target));
      if (matched.length === 0) throw new Error(`${file}: patches[${i}] matches no object`);
      objects = objects.map((o) => (matchesTarget(o, target) ? applyJson6902(o, source[0] as Json[]) : o));
      continue;
    }
    for (const doc of source) {
      const patch = asK8sObject(doc, `${file} patches[${i}]`);
      const hits = objects.filter((o) =>
        target
          ? matchesTarget(o, target)
          : o.kind === patch.kind && groupOf(o.apiVersion) === groupOf(patch.apiVersion) && o.metadata.name === patch.metadata.name,
      );
      if (hits.length !== 1 && !target) throw new Error(`${file}: patch ${patch.kind}/${patch.metadata.name} matches ${hits.length} objects`);
      if (hits.length === 0) throw new Error(`${file}: patches[${i}] matches no object`);
      objects = objects.map((o) => {
        if (!hits.includes(o)) return o;
        const { metadata: patchMeta, ...rest } = patch;
        // With a target, the patch's own name does not rename anything.
        const meta = target ? { ...patchMeta, name: o.metadata.name } : patchMeta;
        return strategicMerge(o, { ...rest, metadata: meta } as JsonObject, o.kind, isBuiltinKind(o)) as K8sObject;
      });
    }
  }

  // 3. namespace.
  if (typeof k.namespace === "string") {
    const ns = k.namespace;
    objects = objects.map((o) => (CLUSTER_SCOPED.has(o.kind) ? o : { ...o, metadata: { ...o.metadata, namespace: ns } }));
  }

  // 4. labels (never selectors: includeSelectors is refused).
  for (const [i, entry] of ((k.labels as Json[] | undefined) ?? []).entries()) {
    if (!isObject(entry) || !isObject(entry.pairs)) throw new Error(`${file}: labels[${i}] needs pairs`);
    for (const key of Object.keys(entry)) {
      if (!["pairs", "includeTemplates", "includeSelectors"].includes(key)) throw new Error(`${file}: labels[${i}].${key} is not supported`);
    }
    if (entry.includeSelectors === true) throw new Error(`${file}: labels[${i}].includeSelectors is not supported (selectors are immutable)`);
    const pairs = entry.pairs as Record<string, string>;
    objects = objects.map((o) => {
      const next = clone(o);
      next.metadata.labels = { ...(next.metadata.labels ?? {}), ...pairs };
      const template = podTemplateOf(next);
      if (entry.includeTemplates === true && template) {
        const meta = (template.metadata ??= {}) as JsonObject;
        meta.labels = { ...((meta.labels as Record<string, string> | undefined) ?? {}), ...pairs };
      }
      return next;
    });
  }

  // 5. images.
  for (const [i, entry] of ((k.images as Json[] | undefined) ?? []).entries()) {
    if (!isObject(entry) || typeof entry.name !== "string") throw new Error(`${file}: images[${i}] needs a name`);
    for (const key of Object.keys(entry)) {
      if (!["name", "newName", "newTag", "digest"].includes(key)) throw new Error(`${file}: images[${i}].${key} is not supported`);
    }
    const rule = entry as { name: string; newName?: string; newTag?: string | number; digest?: string };
    objects = objects.map((o) => {
      const next = clone(o);
      const spec = podTemplateOf(next)?.spec;
      if (!isObject(spec)) return next;
      for (const list of [spec.containers, spec.initContainers]) {
        for (const c of (list as JsonObject[] | undefined) ?? []) {
          if (typeof c.image === "string") c.image = retag(c.image, rule);
        }
      }
      return next;
    });
  }

  assertUnique(objects, file);
  return objects;
}

function assertUnique(objects: K8sObject[], where: string) {
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new Error(`${where}: ${id} defined twice`);
    seen.add(id);
  }
}

export function podTemplateOf(o: K8sObject): JsonObject | undefined {
  if (!POD_TEMPLATE_KINDS.has(o.kind)) return undefined;
  const spec = o.spec;
  return isObject(spec) && isObject(spec.template) ? spec.template : undefined;
}

export function splitImage(image: string): { name: string; tag?: string; digest?: string } {
  const at = image.indexOf("@");
  const digest = at >= 0 ? image.slice(at + 1) : undefined;
  const rest = at >= 0 ? image.slice(0, at) : image;
  const colon = rest.lastIndexOf(":");
  const hasTag = colon > rest.lastIndexOf("/");
  return { name: hasTag ? rest.slice(0, colon) : rest, tag: hasTag ? rest.slice(colon + 1) : undefined, digest };
}

function retag(image: string, rule: { name: string; newName?: string; newTag?: string | number; digest?: string }): string {
  const parts = splitImage(image);
  if (parts.name !== rule.name) return image;
  const name = rule.newName ?? parts.name;
  if (rule.digest) return `${name}@${rule.digest}`;
  if (rule.newTag !== undefined) return `${name}:${rule.newTag}`;
  return `${name}${parts.tag ? `:${parts.tag}` : ""}${parts.digest ? `@${parts.digest}` : ""}`;
}

function matchesTarget(o: K8sObject, t: Target): boolean {
  const anchored = (pattern: string, value: string) => new RegExp(`^(?:${pattern})$`).test(value);
  if (t.kind && !anchored(t.kind, o.kind)) return false;
  if (t.name && !anchored(t.name, o.metadata.name)) return false;
  if (t.namespace && !anchored(t.namespace, o.metadata.namespace ?? "")) return false;
  if (t.group !== undefined && t.group !== groupOf(o.apiVersion)) return false;
  if (t.version && t.version !== o.apiVersion.split("/").pop()) return false;
  if (t.labelSelector) {
    for (const term of t.labelSelector.split(",")) {
      const [key, value] = term.split("=").map((s) => s.trim());
      if (!key || o.metadata.labels?.[key] !== value) return false;
    }
  }
  return true;
}

// Strategic merge: maps merge, null deletes, lists of built-in kinds merge by
// their patchMergeKey (as in the Kubernetes API types), other lists replace.
// Custom resources have no merge keys: their lists are replaced whole, as
// kustomize does without an OpenAPI schema for them.
const BUILTIN_GROUPS = new Set(["", "apps", "batch", "policy", "autoscaling", "networking.k8s.io"]);
const isBuiltinKind = (o: K8sObject) => BUILTIN_GROUPS.has(groupOf(o.apiVersion));

function mergeKeyFor(listKey: string, kind: string): string | undefined {
  switch (listKey) {
    case "containers":
    case "initContainers":
    case "ephemeralContainers":
    case "env":
    case "volumes":
    case "imagePullSecrets":
      return "name";
    case "volumeMounts":
      return "mountPath";
    case "ports":
      return kind === "Service" ? "port" : "containerPort";
    case "topologySpreadConstraints":
      return "topologyKey";
    default:
      return undefined;
  }
}

export function strategicMerge(base: Json, patch: Json, kind: string, builtin: boolean, listKey = ""): Json {
  if (Array.isArray(patch)) {
    const key = builtin ? mergeKeyFor(listKey, kind) : undefined;
    if (!key || !Array.isArray(base)) return clone(patch).filter((item) => !(isObject(item) && "$patch" in item));
    const out = clone(base) as JsonObject[];
    for (const item of patch) {
      if (!isObject(item) || !(key in item)) throw new Error(`strategic merge: item of ${listKey} without ${key}`);
      const index = out.findIndex((b) => b[key] === item[key]);
      if (item.$patch === "delete") {
        if (index >= 0) out.splice(index, 1);
        continue;
      }
      if ("$patch" in item) throw new Error(`strategic merge: unsupported $patch ${String(item.$patch)}`);
      if (index >= 0) out[index] = strategicMerge(out[index]!, item, kind, builtin) as JsonObject;
      else out.push(clone(item));
    }
    return out;
  }
  if (isObject(patch)) {
    if ("$patch" in patch) throw new Error(`strategic merge: unsupported $patch ${String(patch.$patch)}`);
    const out: JsonObject = isObject(base) ? clone(base) : {};
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete out[key];
      else out[key] = strategicMerge(out[key] ?? null, value, kind, builtin, key);
    }
    return out;
  }
  return patch;
}

/** JSON Patch (RFC 6902): add, replace, remove, test. */
export function applyJson6902<T extends Json>(doc: T, ops: Json[]): T {
  const out = clone(doc) as Json;
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== "string" || typeof op.path !== "string") throw new Error("json6902: bad operation");
    if (!["add", "replace", "remove", "test"].includes(op.op)) throw new Error(`json6902: unsupported op ${op.op}`);
    const tokens = op.path
      .split("/")
      .slice(1)
      .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
    const last = tokens.pop();
    if (last === undefined) throw new Error("json6902: empty path");
    let parent: Json = out;
    for (const t of tokens) {
      parent = Array.isArray(parent) ? (parent[Number(t)] as Json) : isObject(parent) ? (parent[t] as Json) : null;
      if (parent === null || parent === undefined) throw new Error(`json6902: ${op.path} does not exist`);
    }
    if (Array.isArray(parent)) {
      const index = last === "-" ? parent.length : Number(last);
      if (op.op === "add") parent.splice(index, 0, clone(op.value as Json));
      else if (op.op === "replace") parent[index] = clone(op.value as Json);
      else if (op.op === "remove") parent.splice(index, 1);
      else if (op.op === "test" && JSON.stringify(parent[index]) !== JSON.stringify(op.value)) throw new Error(`json6902: test failed at ${op.path}`);
    } else if (isObject(parent)) {
      if (op.op === "add" || op.op === "replace") {
        if (op.op === "replace" && !(last in parent)) throw new Error(`json6902: ${op.path} does not exist`);
        parent[last] = clone(op.value as Json);
      } else if (op.op === "remove") delete parent[last];
      else if (op.op === "test" && JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new Error(`json6902: test failed at ${op.path}`);
    } else throw new Error(`json6902: ${op.path} has no parent`);
  }
  return out as T;
}

// ------------------------------------------------------------------ selectors

export function selectorMatches(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

// -------------------------------------------------------------- Dockerfile

export interface DockerInstruction {
  keyword: string;
  args: string;
  /** Exec-form arguments (JSON array) of CMD/ENTRYPOINT/RUN, when written so. */
  exec?: string[];
}

export interface DockerStage {
  name: string;
  from: string;
  instructions: DockerInstruction[];
}

export function parseDockerfile(text: string): DockerStage[] {
  // Join continuation lines; drop comments and parser directives.
  const logical: string[] = [];
  let current = "";
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (current === "" && (line === "" || line.startsWith("#"))) continue;
    if (current !== "" && line.startsWith("#")) continue;
    if (line.endsWith("\\")) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(`${current}${line}`.trim());
    current = "";
  }
  if (current.trim() !== "") logical.push(current.trim());

  const stages: DockerStage[] = [];
  for (const line of logical) {
    const match = /^([A-Za-z]+)\s*(.*)$/.exec(line);
    if (!match) throw new Error(`Dockerfile: cannot parse "${line}"`);
    const keyword = match[1]!.toUpperCase();
    const args = match[2]!.trim();
    if (keyword === "FROM") {
      const from = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!from) throw new Error(`Dockerfile: cannot parse FROM ${args}`);
      stages.push({ name: from[2] ?? String(stages.length), from: from[1]!, instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`Dockerfile: ${keyword} before FROM`);
    let exec: string[] | undefined;
    if (args.startsWith("[")) {
      const parsed = JSON.parse(args) as unknown;
      if (Array.isArray(parsed) && parsed.every((a) => typeof a === "string")) exec = parsed;
    }
    stage.instructions.push({ keyword, args, exec });
  }
  return stages;
}

/** The stage and every stage it is built FROM, nearest first. */
export function stageChain(stages: DockerStage[], name: string): DockerStage[] {
  const chain: DockerStage[] = [];
  let stage = stages.find((s) => s.name === name);
  while (stage) {
    if (chain.includes(stage)) throw new Error(`Dockerfile: FROM cycle at ${stage.name}`);
    chain.push(stage);
    const parent = stage.from;
    stage = stages.find((s) => s.name === parent);
  }
  return chain;
}

// ------------------------------------------------------------------ schemas

type Schema = Record<string, unknown>;

const str: Schema = { type: "string" };
const nonEmpty: Schema = { type: "string", minLength: 1 };
const bool: Schema = { type: "boolean" };
const int = (minimum?: number, maximum?: number): Schema => ({ type: "integer", ...(minimum !== undefined && { minimum }), ...(maximum !== undefined && { maximum }) });
const arr = (items: Schema, minItems?: number): Schema => ({ type: "array", items, ...(minItems !== undefined && { minItems }) });
const strMap: Schema = { type: "object", additionalProperties: { type: "string" } };
/** A closed object: unknown fields are typos. */
const obj = (properties: Record<string, Schema>, required: string[] = [], extra: Schema = {}): Schema => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
  ...extra,
});
const oneOfKeys = (keys: string[]): Schema => ({ oneOf: keys.map((k) => ({ required: [k] })) });

const dnsLabel: Schema = { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 63 };
const dnsSubdomain: Schema = { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", maxLength: 253 };
const labelValue: Schema = { type: "string", pattern: "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", maxLength: 63 };
const labelKey: Schema = { type: "string", pattern: "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" };
const labels: Schema = { type: "object", propertyNames: labelKey, additionalProperties: labelValue };
const quantity: Schema = {
  anyOf: [{ type: "string", pattern: "^[+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$" }, { type: "number", minimum: 0 }],
};
const portName: Schema = { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 15 };
const portNumber = int(1, 65535);
const intOrString: Schema = { anyOf: [{ type: "integer" }, { type: "string" }] };
const percentOrInt: Schema = { anyOf: [{ type: "integer", minimum: 0 }, { type: "string", pattern: "^[0-9]+%$" }] };

const metadata = obj({ name: dnsSubdomain, namespace: dnsLabel, labels, annotations: strMap }, ["name"]);
const templateMetadata = obj({ labels, annotations: strMap });
const labelSelector = obj({
  matchLabels: labels,
  matchExpressions: arr(
    obj({ key: labelKey, operator: { enum: ["In", "NotIn", "Exists", "DoesNotExist"] }, values: arr(str) }, ["key", "operator"]),
  ),
});
const resources = obj({
  requests: { type: "object", propertyNames: { enum: ["cpu", "memory", "ephemeral-storage"] }, additionalProperties: quantity },
  limits: { type: "object", propertyNames: { enum: ["cpu", "memory", "ephemeral-storage"] }, additionalProperties: quantity },
});
const keyRef = obj({ name: dnsSubdomain, key: nonEmpty, optional: bool }, ["name", "key"]);
const envVar = obj(
  {
    name: { type: "string", pattern: "^[-._a-zA-Z][-._a-zA-Z0-9]*$" },
    // Kubernetes wants strings here: `value: 8080` is rejected by the API server.
    value: str,
    valueFrom: obj(
      {
        secretKeyRef: keyRef,
        configMapKeyRef: keyRef,
        fieldRef: obj({ fieldPath: nonEmpty, apiVersion: str }, ["fieldPath"]),
        resourceFieldRef: obj({ resource: nonEmpty, containerName: str, divisor: quantity }, ["resource"]),
      },
      [],
      { minProperties: 1, maxProperties: 1 },
    ),
  },
  ["name"],
  { not: { required: ["value", "valueFrom"] } },
);
const envFromSource = obj(
  { configMapRef: obj({ name: dnsSubdomain, optional: bool }, ["name"]), secretRef: obj({ name: dnsSubdomain, optional: bool }, ["name"]), prefix: str },
  [],
  oneOfKeys(["configMapRef", "secretRef"]),
);
const execAction = obj({ command: arr(nonEmpty, 1) }, ["command"]);
const probe = obj(
  {
    httpGet: obj({ path: { type: "string", pattern: "^/" }, port: intOrString, scheme: { enum: ["HTTP", "HTTPS"] }, host: str }, ["port"]),
    tcpSocket: obj({ port: intOrString, host: str }, ["port"]),
    exec: execAction,
    grpc: obj({ port: portNumber, service: str }, ["port"]),
    initialDelaySeconds: int(0),
    periodSeconds: int(1),
    timeoutSeconds: int(1),
    successThreshold: int(1),
    failureThreshold: int(1),
    terminationGracePeriodSeconds: int(1),
  },
  [],
  oneOfKeys(["httpGet", "tcpSocket", "exec", "grpc"]),
);
const seccompProfile = obj({ type: { enum: ["RuntimeDefault", "Localhost", "Unconfined"] }, localhostProfile: str }, ["type"]);
const containerSecurityContext = obj({
  allowPrivilegeEscalation: bool,
  readOnlyRootFilesystem: bool,
  runAsNonRoot: bool,
  runAsUser: int(0),
  runAsGroup: int(0),
  privileged: bool,
  capabilities: obj({ add: arr(str), drop: arr(str) }),
  seccompProfile,
});
const container = obj(
  {
    name: dnsLabel,
    image: nonEmpty,
    imagePullPolicy: { enum: ["Always", "IfNotPresent", "Never"] },
    command: arr(str),
    args: arr(str),
    workingDir: str,
    ports: arr(obj({ name: portName, containerPort: portNumber, protocol: { enum: ["TCP", "UDP", "SCTP"] } }, ["containerPort"])),
    env: arr(envVar),
    envFrom: arr(envFromSource),
    resources,
    startupProbe: probe,
    readinessProbe: probe,
    livenessProbe: probe,
    lifecycle: obj({
      preStop: obj({ exec: execAction, sleep: obj({ seconds: int(0) }, ["seconds"]) }),
      postStart: obj({ exec: execAction }),
    }),
    securityContext: containerSecurityContext,
    volumeMounts: arr(obj({ name: dnsLabel, mountPath: { type: "string", pattern: "^/" }, readOnly: bool, subPath: str }, ["name", "mountPath"])),
    terminationMessagePolicy: { enum: ["File", "FallbackToLogsOnError"] },
  },
  ["name", "image"],
);
const volume = obj(
  {
    name: dnsLabel,
    emptyDir: obj({ medium: { enum: ["", "Memory"] }, sizeLimit: quantity }),
    configMap: obj({ name: dnsSubdomain, optional: bool, defaultMode: int(0, 511) }, ["name"]),
    secret: obj({ secretName: dnsSubdomain, optional: bool, defaultMode: int(0, 511) }, ["secretName"]),
  },
  ["name"],
  oneOfKeys(["emptyDir", "configMap", "secret"]),
);
const podSpec = obj(
  {
    containers: arr(container, 1),
    initContainers: arr(container),
    volumes: arr(volume),
    restartPolicy: { enum: ["Always", "OnFailure", "Never"] },
    terminationGracePeriodSeconds: int(0),
    serviceAccountName: dnsSubdomain,
    automountServiceAccountToken: bool,
    enableServiceLinks: bool,
    priorityClassName: str,
    nodeSelector: strMap,
    securityContext: obj({
      runAsNonRoot: bool,
      runAsUser: int(0),
      runAsGroup: int(0),
      fsGroup: int(0),
      seccompProfile,
    }),
    topologySpreadConstraints: arr(
      obj(
        {
          maxSkew: int(1),
          topologyKey: nonEmpty,
          whenUnsatisfiable: { enum: ["DoNotSchedule", "ScheduleAnyway"] },
          labelSelector,
          matchLabelKeys: arr(str),
          minDomains: int(1),
        },
        ["maxSkew", "topologyKey", "whenUnsatisfiable"],
      ),
    ),
  },
  ["containers"],
);
const podTemplate = obj({ metadata: templateMetadata, spec: podSpec }, ["metadata", "spec"]);
const top = (apiVersion: string, kind: string, spec: Schema | undefined, extra: Record<string, Schema> = {}, required = ["spec"]): Schema =>
  obj({ apiVersion: { const: apiVersion }, kind: { const: kind }, metadata, ...(spec && { spec }), ...extra }, ["apiVersion", "kind", "metadata", ...required]);
const hpaBehaviorRules = obj({
  stabilizationWindowSeconds: int(0, 3600),
  selectPolicy: { enum: ["Max", "Min", "Disabled"] },
  policies: arr(obj({ type: { enum: ["Pods", "Percent"] }, value: int(1), periodSeconds: int(1, 1800) }, ["type", "value", "periodSeconds"]), 1),
});
const hpaBehavior = obj({ scaleUp: hpaBehaviorRules, scaleDown: hpaBehaviorRules });
const scaleTargetRef = obj({ apiVersion: nonEmpty, kind: nonEmpty, name: dnsSubdomain }, ["kind", "name"]);
const metricTarget = obj(
  { type: { enum: ["Utilization", "Value", "AverageValue"] }, averageUtilization: int(1), averageValue: quantity, value: quantity },
  ["type"],
);
const numericString: Schema = { type: "string", pattern: "^[0-9]+$" };

export const K8S_SCHEMAS: Record<string, Schema> = {
  "v1/Namespace": top("v1", "Namespace", undefined, {}, []),
  "v1/ConfigMap": top("v1", "ConfigMap", undefined, { data: strMap, immutable: bool }, []),
  "v1/Secret": top(
    "v1",
    "Secret",
    undefined,
    { type: str, data: { type: "object", additionalProperties: { type: "string", pattern: "^[A-Za-z0-9+/]*={0,2}$" } }, stringData: strMap, immutable: bool },
    [],
  ),
  "v1/Service": top(
    "v1",
    "Service",
    obj({
      type: { enum: ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"] },
      clusterIP: str,
      selector: labels,
      sessionAffinity: { enum: ["None", "ClientIP"] },
      ports: arr(
        obj(
          {
            name: portName,
            port: portNumber,
            targetPort: { anyOf: [portNumber, portName] },
            protocol: { enum: ["TCP", "UDP", "SCTP"] },
            appProtocol: str,
            nodePort: portNumber,
          },
          ["port"],
        ),
        1,
      ),
    }),
  ),
  "apps/v1/Deployment": top(
    "apps/v1",
    "Deployment",
    obj(
      {
        replicas: int(0),
        revisionHistoryLimit: int(0),
        minReadySeconds: int(0),
        progressDeadlineSeconds: int(1),
        selector: labelSelector,
        strategy: obj({ type: { enum: ["RollingUpdate", "Recreate"] }, rollingUpdate: obj({ maxSurge: percentOrInt, maxUnavailable: percentOrInt }) }),
        template: podTemplate,
      },
      ["selector", "template"],
    ),
  ),
  "batch/v1/Job": top(
    "batch/v1",
    "Job",
    obj(
      {
        backoffLimit: int(0),
        activeDeadlineSeconds: int(1),
        ttlSecondsAfterFinished: int(0),
        completions: int(0),
        parallelism: int(0),
        template: {
          allOf: [
            podTemplate,
            // A Job's pods may not restart "Always".
            { properties: { spec: { required: ["restartPolicy"], properties: { restartPolicy: { enum: ["OnFailure", "Never"] } } } } },
          ],
        },
      },
      ["template"],
    ),
  ),
  "policy/v1/PodDisruptionBudget": top(
    "policy/v1",
    "PodDisruptionBudget",
    obj(
      { selector: labelSelector, minAvailable: percentOrInt, maxUnavailable: percentOrInt, unhealthyPodEvictionPolicy: { enum: ["IfHealthyBudget", "AlwaysAllow"] } },
      ["selector"],
      oneOfKeys(["minAvailable", "maxUnavailable"]),
    ),
  ),
  "autoscaling/v2/HorizontalPodAutoscaler": top(
    "autoscaling/v2",
    "HorizontalPodAutoscaler",
    obj(
      {
        scaleTargetRef,
        minReplicas: int(1),
        maxReplicas: int(1),
        metrics: arr(
          obj(
            {
              type: { enum: ["Resource", "ContainerResource", "Pods", "Object", "External"] },
              resource: obj({ name: { enum: ["cpu", "memory"] }, target: metricTarget }, ["name", "target"]),
            },
            ["type"],
          ),
          1,
        ),
        behavior: hpaBehavior,
      },
      ["scaleTargetRef", "maxReplicas"],
    ),
  ),
  "networking.k8s.io/v1/Ingress": top(
    "networking.k8s.io/v1",
    "Ingress",
    obj({
      ingressClassName: dnsSubdomain,
      tls: arr(obj({ hosts: arr(dnsSubdomain, 1), secretName: dnsSubdomain })),
      rules: arr(
        obj(
          {
            host: dnsSubdomain,
            http: obj(
              {
                paths: arr(
                  obj(
                    {
                      path: { type: "string", pattern: "^/" },
                      pathType: { enum: ["Exact", "Prefix", "ImplementationSpecific"] },
                      backend: obj(
                        { service: obj({ name: dnsLabel, port: obj({ number: portNumber, name: portName }, [], oneOfKeys(["number", "name"])) }, ["name", "port"]) },
                        ["service"],
                      ),
                    },
                    ["path", "pathType", "backend"],
                  ),
                  1,
                ),
              },
              ["paths"],
            ),
          },
          ["http"],
        ),
        1,
      ),
    }),
  ),
  "networking.k8s.io/v1/NetworkPolicy": top(
    "networking.k8s.io/v1",
    "NetworkPolicy",
    obj(
      {
        podSelector: labelSelector,
        policyTypes: arr({ enum: ["Ingress", "Egress"] }),
        ingress: arr(
          obj({
            from: arr(obj({ podSelector: labelSelector, namespaceSelector: labelSelector })),
            ports: arr(obj({ protocol: { enum: ["TCP", "UDP", "SCTP"] }, port: { anyOf: [portNumber, portName] } })),
          }),
        ),
      },
      ["podSelector"],
    ),
  ),
  "keda.sh/v1alpha1/ScaledObject": top(
    "keda.sh/v1alpha1",
    "ScaledObject",
    obj(
      {
        scaleTargetRef: obj({ apiVersion: nonEmpty, kind: nonEmpty, name: dnsSubdomain, envSourceContainerName: str }, ["name"]),
        pollingInterval: int(1),
        cooldownPeriod: int(0),
        initialCooldownPeriod: int(0),
        idleReplicaCount: int(0),
        minReplicaCount: int(0),
        maxReplicaCount: int(1),
        fallback: obj({ failureThreshold: int(1), replicas: int(1) }, ["failureThreshold", "replicas"]),
        advanced: obj({
          restoreToOriginalReplicaCount: bool,
          horizontalPodAutoscalerConfig: obj({ name: dnsSubdomain, behavior: hpaBehavior }),
        }),
        triggers: arr(
          {
            allOf: [
              obj(
                {
                  type: nonEmpty,
                  name: dnsLabel,
                  // KEDA reads trigger metadata as strings only.
                  metadata: strMap,
                  metricType: { enum: ["AverageValue", "Value", "Utilization"] },
                  useCachedMetrics: bool,
                  authenticationRef: obj({ name: dnsSubdomain, kind: { enum: ["TriggerAuthentication", "ClusterTriggerAuthentication"] } }, ["name"]),
                },
                ["type", "metadata"],
              ),
              {
                if: { properties: { type: { const: "nats-jetstream" } } },
                then: {
                  properties: {
                    metadata: obj(
                      {
                        natsServerMonitoringEndpoint: { type: "string", pattern: "^[a-z0-9.-]+:[0-9]+$" },
                        account: nonEmpty,
                        accountID: nonEmpty,
                        stream: nonEmpty,
                        consumer: nonEmpty,
                        lagThreshold: numericString,
                        activationLagThreshold: numericString,
                        useHttps: { enum: ["true", "false"] },
                      },
                      ["natsServerMonitoringEndpoint", "stream", "consumer", "lagThreshold"],
                      { anyOf: [{ required: ["account"] }, { required: ["accountID"] }] },
                    ),
                  },
                },
              },
              {
                if: { properties: { type: { enum: ["cpu", "memory"] } } },
                then: {
                  required: ["metricType"],
                  properties: {
                    metricType: { enum: ["Utilization", "AverageValue"] },
                    metadata: obj({ value: numericString, containerName: str }, ["value"]),
                  },
                },
              },
            ],
          },
          1,
        ),
      },
      ["scaleTargetRef", "triggers"],
    ),
  ),
  "postgresql.cnpg.io/v1/Cluster": top(
    "postgresql.cnpg.io/v1",
    "Cluster",
    obj(
      {
        description: str,
        instances: int(1),
        imageName: nonEmpty,
        primaryUpdateStrategy: { enum: ["unsupervised", "supervised"] },
        primaryUpdateMethod: { enum: ["switchover", "restart"] },
        enableSuperuserAccess: bool,
        bootstrap: obj({
          initdb: obj({ database: dnsLabel, owner: dnsLabel, secret: obj({ name: dnsSubdomain }, ["name"]), dataChecksums: bool, encoding: str }),
        }),
        postgresql: obj({ parameters: strMap, pg_hba: arr(str) }),
        storage: obj({ size: quantity, storageClass: dnsSubdomain }, ["size"]),
        walStorage: obj({ size: quantity, storageClass: dnsSubdomain }, ["size"]),
        resources,
        affinity: obj({
          enablePodAntiAffinity: bool,
          topologyKey: nonEmpty,
          podAntiAffinityType: { enum: ["preferred", "required"] },
          nodeSelector: strMap,
        }),
        monitoring: obj({ enablePodMonitor: bool }),
      },
      ["instances", "storage"],
    ),
  ),
};

let compiled: Map<string, ValidateFunction> | undefined;

/** Problems with one object (empty when it conforms to its kind's schema). */
export function validateObject(o: K8sObject): string[] {
  if (!compiled) {
    // Strict about the schemas' own keywords; the oneOf/if arms carry no "type" by design.
    const ajv = new Ajv({ allErrors: true, strictSchema: true, strictNumbers: true, strictTypes: false, strictRequired: false });
    compiled = new Map(Object.entries(K8S_SCHEMAS).map(([key, schema]) => [key, ajv.compile(schema)]));
  }
  const validate = compiled.get(`${o.apiVersion}/${o.kind}`);
  if (!validate) return [`${o.apiVersion}/${o.kind}: no schema for this kind (add one to tests/deploy-render.ts)`];
  const label = `${o.kind}/${o.metadata.name}`;
  if (validate(o)) return [];
  return (validate.errors ?? []).map((e) => `${label}${e.instancePath}: ${e.message ?? "invalid"}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`);
}
