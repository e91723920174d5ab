/**
 * deploy/k8s: every overlay rendered (tests/deploy-render.ts, checked against
 * `kubectl kustomize` where kubectl is installed), every object validated
 * against compact Kubernetes schemas, and the house rules: probes, resources,
 * non-root and read-only pods, selectors that select, autoscalers that target,
 * the env wiring against the real config modules' zod schemas, and images and
 * ports against the Dockerfile.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments } from "yaml";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { DURABLES, STREAMS } from "@whereabouts/shared";
import { CatalogEnv } from "../services/catalog/src/config.ts";
import { GatewayEnv } from "../services/gateway/src/config.ts";
import { ReportingEnv } from "../services/reporting/src/config.ts";
import { TrackingEnv } from "../services/tracking/src/config.ts";
import { SCHEMAS as MIGRATED_SCHEMAS } from "../scripts/migrate.ts";
import {
  isObject,
  loadYamlDocuments,
  objectId,
  parseDockerfile,
  podTemplateOf,
  renderKustomization,
  repoRoot,
  selectorMatches,
  splitImage,
  stageChain,
  validateObject,
  type Json,
  type JsonObject,
  type K8sObject,
} from "./deploy-render.ts";

const OVERLAYS = { dev: "whereabouts-dev", prod: "whereabouts" } as const;
type Overlay = keyof typeof OVERLAYS;
const rendered = Object.fromEntries(
  Object.keys(OVERLAYS).map((o) => [o, renderKustomization(path.join(repoRoot, "deploy/k8s/overlays", o))]),
) as Record<Overlay, K8sObject[]>;

/** The config module of each service process (its zod env schema). */
const CONFIG_SCHEMAS: Record<string, z.ZodObject> = {
  gateway: GatewayEnv,
  catalog: CatalogEnv,
  tracking: TrackingEnv,
  reporting: ReportingEnv,
};
const SERVICES = Object.keys(CONFIG_SCHEMAS);
/**
 * Wired ahead of the config modules that will read them; each must be read by
 * a config module (or be listed here with its reason) — nothing else may be set.
 * - OPS_PORT: the ops server (/healthz, /readyz, /metrics) being added to every service.
 * - NATS_USER, NATS_PASSWORD: the services' NATS credentials (deploy/nats/values.yaml
 *   turns authorization on); the config modules and connectNats must read them.
 */
const PENDING_ENV: string[] = [];
/** What scripts/migrate.ts reads: DATABASE_URL and each schema's <SERVICE>_DATABASE_URL. */
const MIGRATE_ENV = ["DATABASE_URL", ...MIGRATED_SCHEMAS.map((s) => `${s.service.toUpperCase()}_DATABASE_URL`)];
/** Secrets created outside the manifests (docs/operations.md), with their keys. */
const EXTERNAL_SECRETS: Record<string, string[]> = { "whereabouts-nats": ["user", "password"] };
/** Keys of the app Secret CloudNativePG generates for a Cluster (`<cluster>-app`). */
const CNPG_APP_SECRET_KEYS = ["username", "user", "password", "host", "port", "dbname", "uri", "jdbc-uri", "pgpass"];
const OPS_PORT = 9464;
const GATEWAY_PORT = 8080;

const dockerStages = parseDockerfile(readFileSync(path.join(repoRoot, "Dockerfile"), "utf8"));
const dockerTargets = new Set(dockerStages.map((s) => s.name));
const exposedBy = (target: string) =>
  stageChain(dockerStages, target)
    .flatMap((s) => s.instructions.filter((i) => i.keyword === "EXPOSE"))
    .flatMap((i) => i.args.split(/\s+/).map((p) => Number(p.replace(/\/tcp$/, ""))));

// ------------------------------------------------------------------ helpers

type Container = JsonObject & { name: string; image: string };
const ofKind = (objs: K8sObject[], kind: string) => objs.filter((o) => o.kind === kind);
const spec = (o: K8sObject) => o.spec as JsonObject;
const podSpec = (o: K8sObject) => podTemplateOf(o)!.spec as JsonObject;
const podLabels = (o: K8sObject) => (podTemplateOf(o)!.metadata as JsonObject).labels as Record<string, string>;
const containersOf = (o: K8sObject) => [...((podSpec(o).initContainers as Container[]) ?? []), ...(podSpec(o).containers as Container[])];
const matchLabels = (selector: Json | undefined) => (isObject(selector) ? (selector.matchLabels as Record<string, string>) : undefined);
const workloads = (objs: K8sObject[]) => objs.filter((o) => podTemplateOf(o));
/** The Docker target an image was built from, when it is one of ours. */
const targetOf = (image: string) => /(?:^|\/)whereabouts\/([a-z0-9-]+)$/.exec(splitImage(image).name)?.[1];

function quantity(value: Json | undefined): number {
  if (typeof value === "number") return value;
  const m = /^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(value));
  if (!m) throw new Error(`bad quantity ${String(value)}`);
  const factor = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2] ?? ""] ?? 1;
  return Number(m[1]) * factor;
}

/** Env of a container: name -> where it comes from. */
function envOf(objs: K8sObject[], container: Container): Map<string, { value?: string; secret?: { name: string; key: string } }> {
  const env = new Map<string, { value?: string; secret?: { name: string; key: string } }>();
  for (const source of (container.envFrom as JsonObject[] | undefined) ?? []) {
    const ref = (source.configMapRef ?? source.secretRef) as { name: string };
    const kind = source.configMapRef ? "ConfigMap" : "Secret";
    const found = objs.find((o) => o.kind === kind && o.metadata.name === ref.name);
    if (!found) throw new Error(`${container.name}: envFrom ${kind} ${ref.name} is not in the render, so its keys are unknown`);
    const data = (kind === "ConfigMap" ? found.data : { ...(found.stringData as JsonObject), ...(found.data as JsonObject) }) as Record<string, string>;
    for (const [key, value] of Object.entries(data ?? {})) {
      env.set(`${(source.prefix as string) ?? ""}${key}`, kind === "ConfigMap" ? { value } : { secret: { name: ref.name, key } });
    }
  }
  for (const e of (container.env as JsonObject[] | undefined) ?? []) {
    const from = e.valueFrom as JsonObject | undefined;
    if (from?.secretKeyRef) env.set(e.name as string, { secret: from.secretKeyRef as { name: string; key: string } });
    else if (from?.configMapKeyRef) {
      const ref = from.configMapKeyRef as { name: string; key: string };
      const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === ref.name);
      env.set(e.name as string, { value: (cm?.data as Record<string, string> | undefined)?.[ref.key] });
    } else env.set(e.name as string, { value: e.value as string });
  }
  return env;
}

/** Keys a schema needs in a deployment: required ones and those with a default (made explicit). */
function neededKeys(schema: z.ZodObject): string[] {
  return Object.entries(schema.shape)
    .filter(([, field]) => {
      const result = (field as z.ZodType).safeParse(undefined);
      return !result.success || result.data !== undefined;
    })
    .map(([key]) => key);
}

function secretExists(objs: K8sObject[], name: string, key: string): boolean {
  const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === name);
  if (secret) return key in ((secret.data as JsonObject) ?? {}) || key in ((secret.stringData as JsonObject) ?? {});
  const cluster = ofKind(objs, "Cluster").find((c) => `${c.metadata.name}-app` === name);
  if (cluster) return CNPG_APP_SECRET_KEYS.includes(key);
  return EXTERNAL_SECRETS[name]?.includes(key) ?? false;
}

// -------------------------------------------------------------------- tests

const kubectl = (() => {
  try {
    execFileSync("kubectl", ["version", "--client"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

describe("the renderer", () => {
  it.skipIf(!kubectl)("renders every overlay exactly as kubectl kustomize does", () => {
    for (const overlay of Object.keys(OVERLAYS) as Overlay[]) {
      const out = execFileSync("kubectl", ["kustomize", path.join(repoRoot, "deploy/k8s/overlays", overlay)], { encoding: "utf8" });
      const theirs = new Map(parseAllDocuments(out).map((d) => d.toJS() as K8sObject).map((o) => [objectId(o), o]));
      const ours = new Map(rendered[overlay].map((o) => [objectId(o), o]));
      expect([...ours.keys()].sort(), overlay).toEqual([...theirs.keys()].sort());
      for (const [id, o] of ours) expect(isDeepStrictEqual(o, theirs.get(id)), `${overlay} ${id}`).toBe(true);
    }
  });

  it("applies strategic-merge patches by merge key and replaces custom resources' lists", () => {
    const base = renderKustomization(path.join(repoRoot, "deploy/k8s/base"));
    const dev = rendered.dev;
    const find = (objs: K8sObject[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!;
    const c = (o: K8sObject) => containersOf(o)[0]!;
    // The dev patch lowered requests and kept everything else of the container.
    expect((c(find(dev, "Deployment", "tracking")).resources as JsonObject).requests).toEqual({ cpu: "50m", memory: "128Mi" });
    expect((c(find(dev, "Deployment", "tracking")).resources as JsonObject).limits).toEqual((c(find(base, "Deployment", "tracking")).resources as JsonObject).limits);
    expect(c(find(dev, "Deployment", "tracking")).env).toEqual(c(find(base, "Deployment", "tracking")).env);
    expect(spec(find(dev, "ScaledObject", "tracking")).triggers).toEqual(spec(find(base, "ScaledObject", "tracking")).triggers);
  });

  it("keeps the schemas strict enough to catch the usual mistakes", () => {
    const deployment = rendered.prod.find((o) => o.kind === "Deployment" && o.metadata.name === "gateway")!;
    expect(validateObject(deployment)).toEqual([]);
    const broken = (mutate: (o: K8sObject) => void) => {
      const copy = structuredClone(deployment);
      mutate(copy);
      return validateObject(copy);
    };
    expect(broken((o) => ((podSpec(o).containers as Container[])[0]!.readinessProbes = {}))).not.toEqual([]);
    expect(broken((o) => ((podSpec(o).containers as Container[])[0]!.env = [{ name: "PORT", value: 8080 }]))).not.toEqual([]);
    expect(broken((o) => ((podSpec(o).containers as Container[])[0]!.livenessProbe = { periodSeconds: 5 }))).not.toEqual([]);
    expect(broken((o) => ((podSpec(o).containers as Container[])[0]!.ports = [{ name: "Ops", containerPort: 9464 }]))).not.toEqual([]);
    expect(broken((o) => (spec(o).selector = { matchlabels: {} }))).not.toEqual([]);
    const scaled = structuredClone(rendered.prod.find((o) => o.kind === "ScaledObject")!);
    ((spec(scaled).triggers as JsonObject[])[0]!.metadata as JsonObject).lagThreshold = 2000;
    expect(validateObject(scaled)).not.toEqual([]);
    const hpa = structuredClone(rendered.prod.find((o) => o.kind === "HorizontalPodAutoscaler")!);
    (spec(hpa).metrics as JsonObject[])[0]!.type = "Cpu";
    expect(validateObject(hpa)).not.toEqual([]);
    const cm = structuredClone(rendered.prod.find((o) => o.kind === "ConfigMap")!);
    (cm.data as JsonObject).RPC_TIMEOUT_MS = 5000;
    expect(validateObject(cm)).not.toEqual([]);
  });
});

describe.each(Object.keys(OVERLAYS) as Overlay[])("overlay %s", (overlay) => {
  const objs = rendered[overlay];
  const deployments = ofKind(objs, "Deployment");
  const serviceDeployment = (svc: string) => deployments.find((d) => d.metadata.name === svc)!;

  it("validates every object against its kind's schema", () => {
    expect(objs.length).toBeGreaterThan(20);
    expect(objs.flatMap(validateObject)).toEqual([]);
  });

  it("puts everything in the overlay's namespace, which it creates", () => {
    const ns = OVERLAYS[overlay];
    expect(ofKind(objs, "Namespace").map((n) => n.metadata.name)).toEqual([ns]);
    for (const o of objs.filter((x) => x.kind !== "Namespace")) expect(o.metadata.namespace, objectId(o)).toBe(ns);
    for (const o of objs) expect(o.metadata.labels?.["app.kubernetes.io/part-of"], objectId(o)).toBe("whereabouts");
  });

  it("runs a Deployment per service, plus Redis, and the migration Job", () => {
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual([...SERVICES, "redis"].sort());
    expect(ofKind(objs, "Job").map((j) => targetOf(containersOf(j)[0]!.image))).toEqual(["migrate"]);
  });

  it("gives every Deployment probes, requests and limits, and a non-root read-only pod", () => {
    for (const d of deployments) {
      for (const c of containersOf(d)) {
        const where = `${d.metadata.name}/${c.name}`;
        expect(c.readinessProbe, `${where} readinessProbe`).toBeDefined();
        expect(c.livenessProbe, `${where} livenessProbe`).toBeDefined();
        const portNames = ((c.ports as JsonObject[]) ?? []).map((p) => p.name);
        for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe].filter(isObject)) {
          const port = ((probe.httpGet ?? probe.tcpSocket) as JsonObject | undefined)?.port;
          if (typeof port === "string") expect(portNames, `${where} probe port ${port}`).toContain(port);
        }
      }
    }
    for (const w of workloads(objs)) {
      const pod = podSpec(w);
      const podSecurity = (pod.securityContext ?? {}) as JsonObject;
      expect(podSecurity.runAsNonRoot, `${w.metadata.name} runAsNonRoot`).toBe(true);
      expect((podSecurity.seccompProfile as JsonObject | undefined)?.type, `${w.metadata.name} seccomp`).toBe("RuntimeDefault");
      expect(pod.automountServiceAccountToken, `${w.metadata.name} token`).toBe(false);
      for (const c of containersOf(w)) {
        const where = `${w.metadata.name}/${c.name}`;
        const resources = c.resources as { requests?: JsonObject; limits?: JsonObject };
        for (const r of ["cpu", "memory"]) {
          expect(resources?.requests?.[r], `${where} requests.${r}`).toBeDefined();
          expect(resources?.limits?.[r], `${where} limits.${r}`).toBeDefined();
          expect(quantity(resources.requests![r]), `${where} ${r} request <= limit`).toBeLessThanOrEqual(quantity(resources.limits![r]));
        }
        const sc = (c.securityContext ?? {}) as JsonObject;
        expect(sc.readOnlyRootFilesystem, `${where} readOnlyRootFilesystem`).toBe(true);
        expect(sc.allowPrivilegeEscalation, `${where} allowPrivilegeEscalation`).toBe(false);
        expect((sc.capabilities as JsonObject | undefined)?.drop, `${where} drops ALL`).toEqual(["ALL"]);
        expect((sc.capabilities as JsonObject | undefined)?.add, `${where} adds nothing`).toBeUndefined();
        const uid = (sc.runAsUser ?? podSecurity.runAsUser) as number | undefined;
        expect(uid, `${where} runAsUser`).toBeGreaterThan(0);
        if (targetOf(c.image)) {
          // Our images run as the image's node user; tsx needs a writable /tmp.
          expect(uid, `${where} node user`).toBe(1000);
          const tmp = ((c.volumeMounts as JsonObject[]) ?? []).find((m) => m.mountPath === "/tmp");
          expect(tmp, `${where} /tmp mount`).toBeDefined();
          const volume = ((pod.volumes as JsonObject[]) ?? []).find((v) => v.name === tmp!.name);
          expect(volume?.emptyDir, `${where} /tmp is an emptyDir`).toBeDefined();
        }
      }
    }
  });

  it("probes every service on its ops port (9464): /readyz and /healthz", () => {
    for (const svc of SERVICES) {
      const [c] = containersOf(serviceDeployment(svc));
      const ports = Object.fromEntries(((c!.ports as JsonObject[]) ?? []).map((p) => [p.name, p.containerPort]));
      expect(ports.ops, svc).toBe(OPS_PORT);
      expect(((c!.readinessProbe as JsonObject).httpGet as JsonObject)).toMatchObject({ path: "/readyz", port: "ops" });
      expect(((c!.livenessProbe as JsonObject).httpGet as JsonObject)).toMatchObject({ path: "/healthz", port: "ops" });
      expect(ports, svc).toEqual(svc === "gateway" ? { http: GATEWAY_PORT, ops: OPS_PORT } : { ops: OPS_PORT });
    }
  });

  it("uses the Dockerfile's targets as images, pinned, with the ports they expose", () => {
    for (const w of workloads(objs)) {
      for (const c of containersOf(w)) {
        const { tag, digest } = splitImage(c.image);
        expect(tag ?? digest, `${c.image} is pinned`).toBeDefined();
        expect(tag, c.image).not.toBe("latest");
        const target = targetOf(c.image);
        if (!target) continue;
        expect(dockerTargets.has(target), `${c.image}: Dockerfile target ${target}`).toBe(true);
        expect(target, w.metadata.name).toBe(w.kind === "Job" ? "migrate" : w.metadata.name);
        expect(c.command, `${w.metadata.name} keeps the image's entry point`).toBeUndefined();
        expect(c.args, `${w.metadata.name} keeps the image's CMD`).toBeUndefined();
        for (const p of (c.ports as JsonObject[]) ?? []) expect(exposedBy(target), `${target} EXPOSEs ${String(p.containerPort)}`).toContain(p.containerPort);
        if (overlay === "prod") {
          expect(splitImage(c.image).name, c.image).toMatch(/^[a-z0-9.-]+\.[a-z]+(:\d+)?\/whereabouts\//);
          expect(tag, c.image).toMatch(/^\d+\.\d+\.\d+/);
        }
      }
    }
  });

  it("wires every variable the config modules need, and none they do not read", () => {
    for (const svc of SERVICES) {
      const schema = CONFIG_SCHEMAS[svc]!;
      const [c] = containersOf(serviceDeployment(svc));
      const env = envOf(objs, c!);
      const provided = [...env.keys()];
      for (const key of neededKeys(schema)) expect(provided, `${svc} needs ${key}`).toContain(key);
      // serviceDatabaseUrl() also reads <SERVICE>_DATABASE_URL beside the schema.
      const readable = [...Object.keys(schema.shape), `${svc.toUpperCase()}_DATABASE_URL`, ...PENDING_ENV];
      for (const key of provided) expect(readable, `${svc} gets ${key}, which its config module does not read`).toContain(key);
      // The values parse with the real schema (secrets stand in as placeholders).
      const values = Object.fromEntries([...env].map(([k, v]) => [k, v.value ?? `placeholder-for-${v.secret!.name}`]));
      const parsed = schema.safeParse(values);
      expect(parsed.success, `${svc}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
      // DATABASE_URL is a Secret; the ports agree with the container's.
      expect(env.get("DATABASE_URL")?.secret, `${svc} DATABASE_URL from a Secret`).toBeDefined();
      expect(env.get("OPS_PORT")?.value, svc).toBe(String(OPS_PORT));
    }
    const gateway = envOf(objs, containersOf(serviceDeployment("gateway"))[0]!);
    expect(gateway.get("PORT")?.value).toBe(String(GATEWAY_PORT));
    expect(gateway.get("HOST")?.value).toBe("0.0.0.0");
    expect(gateway.get("REDIS_URL")?.value).toMatch(/^redis:\/\/redis:6379$/);
    const redis = ofKind(objs, "Service").find((s) => s.metadata.name === "redis");
    expect((spec(redis!).ports as JsonObject[]).map((p) => p.port)).toContain(6379);

    for (const job of ofKind(objs, "Job")) {
      const env = envOf(objs, containersOf(job)[0]!);
      expect([...env.keys()]).toContain("DATABASE_URL");
      for (const key of env.keys()) expect(MIGRATE_ENV, `migrate gets ${key}`).toContain(key);
    }
  });

  it("feeds DATABASE_URL from the CloudNativePG cluster's app Secret", () => {
    const [cluster] = ofKind(objs, "Cluster");
    expect(cluster, "a postgresql.cnpg.io Cluster").toBeDefined();
    for (const w of workloads(objs).filter((x) => containersOf(x).some((c) => targetOf(c.image)))) {
      const env = envOf(objs, containersOf(w)[0]!);
      expect(env.get("DATABASE_URL")?.secret, w.metadata.name).toEqual({ name: `${cluster!.metadata.name}-app`, key: "uri" });
    }
    if (overlay === "prod") expect(spec(cluster!).instances).toBeGreaterThanOrEqual(3);
  });

  it("references only ConfigMaps and Secrets that exist (or are documented as external)", () => {
    const usedConfigMaps = new Set<string>();
    for (const w of workloads(objs)) {
      for (const c of containersOf(w)) {
        for (const source of (c.envFrom as JsonObject[] | undefined) ?? []) {
          if (source.configMapRef) usedConfigMaps.add((source.configMapRef as JsonObject).name as string);
          expect(source.secretRef, `${w.metadata.name}: secrets by key only`).toBeUndefined();
        }
        for (const e of (c.env as JsonObject[] | undefined) ?? []) {
          const ref = (e.valueFrom as JsonObject | undefined)?.secretKeyRef as { name: string; key: string } | undefined;
          if (ref) expect(secretExists(objs, ref.name, ref.key), `${w.metadata.name}: Secret ${ref.name} key ${ref.key}`).toBe(true);
        }
        envOf(objs, c); // throws on a missing envFrom ConfigMap
      }
    }
    expect(ofKind(objs, "ConfigMap").map((c) => c.metadata.name).sort()).toEqual([...usedConfigMaps].sort());
  });

  it("has selectors that select: Deployments, Services, PDBs, spread constraints, policies", () => {
    for (const d of deployments) {
      const selector = matchLabels(spec(d).selector);
      expect(selectorMatches(selector, podLabels(d)), `${d.metadata.name} selector`).toBe(true);
      for (const t of (podSpec(d).topologySpreadConstraints as JsonObject[]) ?? []) {
        expect(selectorMatches(matchLabels(t.labelSelector), podLabels(d)), `${d.metadata.name} spread`).toBe(true);
      }
    }
    const selected = (selector: Record<string, string> | undefined) => deployments.filter((d) => selectorMatches(selector, podLabels(d)));
    for (const s of ofKind(objs, "Service")) {
      const targets = selected(spec(s).selector as Record<string, string>);
      expect(targets.map((d) => d.metadata.name), `Service ${s.metadata.name}`).toHaveLength(1);
      const portNames = containersOf(targets[0]!).flatMap((c) => ((c.ports as JsonObject[]) ?? []).map((p) => p.name));
      for (const p of spec(s).ports as JsonObject[]) {
        if (typeof p.targetPort === "string") expect(portNames, `Service ${s.metadata.name} port ${p.targetPort}`).toContain(p.targetPort);
      }
    }
    for (const pdb of ofKind(objs, "PodDisruptionBudget")) {
      expect(selected(matchLabels(spec(pdb).selector)), `PDB ${pdb.metadata.name}`).toHaveLength(1);
    }
    for (const np of ofKind(objs, "NetworkPolicy")) {
      expect(selected(matchLabels(spec(np).podSelector)), `NetworkPolicy ${np.metadata.name}`).toHaveLength(1);
      for (const rule of (spec(np).ingress as JsonObject[]) ?? []) {
        for (const from of (rule.from as JsonObject[]) ?? []) {
          expect(selected(matchLabels(from.podSelector)), `NetworkPolicy ${np.metadata.name} from`).toHaveLength(1);
        }
      }
    }
    for (const service of SERVICES) {
      const pods = podLabels(serviceDeployment(service));
      const pdbs = ofKind(objs, "PodDisruptionBudget").filter((p) => selectorMatches(matchLabels(spec(p).selector), pods));
      expect(pdbs, `${service} PDB`).toHaveLength(1);
    }
  });

  it("sends the Ingress to the gateway Service's http port", () => {
    const [ingress] = ofKind(objs, "Ingress");
    const backends = ((spec(ingress!).rules as JsonObject[]) ?? [])
      .flatMap((r) => (r.http as JsonObject).paths as JsonObject[])
      .map((p) => (p.backend as JsonObject).service as JsonObject);
    expect(backends.length).toBeGreaterThan(0);
    for (const b of backends) {
      const service = ofKind(objs, "Service").find((s) => s.metadata.name === b.name);
      expect(service, `Service ${String(b.name)}`).toBeDefined();
      expect((spec(service!).ports as JsonObject[]).map((p) => p.name)).toContain((b.port as JsonObject).name);
      expect(selectorMatches(spec(service!).selector as Record<string, string>, podLabels(serviceDeployment("gateway")))).toBe(true);
    }
    if (overlay === "prod") expect(spec(ingress!).tls).toBeDefined();
  });

  it("scales each service with exactly one autoscaler: an HPA on CPU, or a KEDA ScaledObject that owns its HPA", () => {
    const hpas = ofKind(objs, "HorizontalPodAutoscaler");
    const scaled = ofKind(objs, "ScaledObject");
    const refName = (o: K8sObject) => (spec(o).scaleTargetRef as JsonObject).name as string;
    for (const o of [...hpas, ...scaled]) {
      const ref = spec(o).scaleTargetRef as JsonObject;
      expect(deployments.map((d) => d.metadata.name), `${o.kind} ${o.metadata.name} target`).toContain(ref.name);
      expect(ref.kind ?? "Deployment").toBe("Deployment");
    }
    for (const svc of SERVICES) {
      const owners = [...hpas, ...scaled].filter((o) => refName(o) === svc);
      expect(owners.map((o) => o.kind), svc).toHaveLength(1);
      expect(spec(serviceDeployment(svc)).replicas, `${svc}: the autoscaler owns replicas`).toBeUndefined();
    }
    expect(scaled.map(refName).sort()).toEqual(["reporting", "tracking"]);
    for (const h of hpas) {
      const s = spec(h);
      expect(s.minReplicas as number).toBeLessThanOrEqual(s.maxReplicas as number);
      expect((s.metrics as JsonObject[]).some((m) => (m.resource as JsonObject | undefined)?.name === "cpu")).toBe(true);
      if (overlay === "prod") expect(s.minReplicas as number, h.metadata.name).toBeGreaterThanOrEqual(2);
    }
    for (const so of scaled) {
      const s = spec(so);
      expect(s.minReplicaCount as number).toBeLessThanOrEqual(s.maxReplicaCount as number);
      expect(s.minReplicaCount as number, "never scaled to zero: the services answer RPCs").toBeGreaterThanOrEqual(1);
      if (overlay === "prod") expect(s.minReplicaCount as number, so.metadata.name).toBeGreaterThanOrEqual(2);
      expect((s.triggers as JsonObject[]).some((t) => t.type === "cpu")).toBe(true);
    }
  });

  it("scales tracking and reporting on their JetStream consumers' lag", () => {
    const lagOf = (name: string) =>
      (spec(ofKind(objs, "ScaledObject").find((s) => s.metadata.name === name)!).triggers as JsonObject[])
        .filter((t) => t.type === "nats-jetstream")
        .map((t) => t.metadata as Record<string, string>);
    const pairs = (name: string) => lagOf(name).map((m) => `${m.stream}/${m.consumer}`);
    expect(pairs("tracking")).toContain(`${STREAMS.SCANS.name}/${DURABLES.trackingScans}`);
    expect(pairs("reporting")).toEqual(
      expect.arrayContaining([`${STREAMS.CATALOG.name}/${DURABLES.reportingCatalog}`, `${STREAMS.TRACKING.name}/${DURABLES.reportingTracking}`]),
    );
    // Every trigger names a real stream and durable, and the NATS release's account and monitoring port.
    const natsValues = loadYamlDocuments(path.join(repoRoot, "deploy/nats/values.yaml"))[0] as JsonObject;
    const natsConfig = natsValues.config as JsonObject;
    const accounts = (natsConfig.merge as JsonObject).accounts as JsonObject;
    const natsUrl = (objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === "whereabouts-common")!.data as JsonObject).NATS_URL as string;
    const natsHost = new URL(natsUrl).hostname; // <release>.<namespace>.svc.cluster.local
    const [release, namespace] = natsHost.split(".");
    for (const m of [...lagOf("tracking"), ...lagOf("reporting")]) {
      expect(Object.values(STREAMS).map((s) => s.name)).toContain(m.stream);
      expect(Object.values(DURABLES)).toContain(m.consumer);
      expect((accounts[m.account!] as JsonObject | undefined)?.jetstream, `account ${m.account}`).toBe("enabled");
      expect(m.natsServerMonitoringEndpoint).toBe(`${release}-headless.${namespace}.svc.cluster.local:${String((natsConfig.monitor as JsonObject).port)}`);
    }
  });
});
