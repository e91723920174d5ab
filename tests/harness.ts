/**
 * End-to-end harness: a private database and nats-server per test file, every
 * schema migrated, the streams created, the chosen services running in this
 * process, and the gateway answering `inject()`. Nothing is mocked.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  connectNats,
  DURABLES,
  encodeJson,
  STREAMS,
  waitForConsumer,
  watchCatalogWrites,
  createLogger,
  decodeJson,
  ensureStreams,
  respondRpc,
  RpcRequest,
  type NatsConnection,
  type RpcReply,
  type RunningService,
} from "@whereabouts/shared";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { migrateAll } from "../scripts/migrate.ts";
import { buildGateway, type Gateway } from "../services/gateway/src/app.ts";
import { createAuthService } from "../services/gateway/src/identity/auth-service.ts";
import { createIdentityClient, createIdentityStore, type IdentityStore } from "../services/gateway/src/identity/identity-store.ts";
import { createMemoryRateLimiter, type RateLimiter } from "../services/gateway/src/rate-limit/rate-limiter.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";
import { startCatalog, type CatalogDeps } from "../services/catalog/src/app.ts";
import { startTracking } from "../services/tracking/src/app.ts";
import { startReporting, type ReportingDeps } from "../services/reporting/src/app.ts";

export type ServiceKey = "catalog" | "tracking" | "reporting";

export interface StackOptions {
  label: string;
  services?: ServiceKey[];
  rateLimit?: { max: number; windowMs: number };
  rateLimiter?: RateLimiter;
  rpcTimeoutMs?: number;
  /** How long services wait for their read models before answering 503. */
  catchUpTimeoutMs?: number;
  /** Handheld sessions (TTL, Secure cookies). */
  handheld?: { sessionTtlS?: number; cookieSecure?: boolean };
  /** Partner events and webhooks of reporting (loopback receivers need allowPrivateTargets). */
  events?: ReportingDeps["events"];
}

export interface Stack {
  db: TestDatabase;
  nats: TestNats;
  nc: NatsConnection;
  gateway: Gateway;
  identity: IdentityStore;
  services: Partial<Record<ServiceKey, RunningService>>;
  /** `catalog`: extra catalog dependencies for this start (e.g. bulk job hooks). */
  startService(name: ServiceKey, catalog?: Pick<CatalogDeps, "bulkHooks">): Promise<RunningService>;
  stopService(name: ServiceKey): Promise<void>;
  createOrg(name?: string): Promise<{ id: number; name: string; created_at: string }>;
  createKey(options: { org: number | null; scopes?: string; rateLimit?: number; expiresAt?: string }): Promise<{ id: number; key: string }>;
  /** An organization with an all-scopes key: the usual test tenant. */
  tenant(name?: string): Promise<{ orgId: number; key: string; auth: Record<string, string> }>;
  close(): Promise<void>;
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const db = await createTestDatabase(options.label);
  const nats = await startTestNats();
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
  const nc = await connectNats({ url: nats.url, name: "test", logger });
  await ensureStreams(nc);

  // Catch-up waits bounded well above what a loaded 2-core CI machine needs;
  // a test of the 503 path sets its own.
  const catchUpTimeoutMs = options.catchUpTimeoutMs ?? 10_000;
  const connections: NatsConnection[] = [];
  const services: Partial<Record<ServiceKey, RunningService>> = {};
  const startService = async (name: ServiceKey, catalog: Pick<CatalogDeps, "bulkHooks"> = {}) => {
    const serviceNc = await connectNats({ url: nats.url, name, logger });
    connections.push(serviceNc);
    const base = { nc: serviceNc, logger: logger.child({ service: name }), databaseUrl: db.url };
    const running =
      name === "tracking"
        ? await startTracking({ ...base, options: { catchUpTimeoutMs } })
        : name === "reporting"
          ? await startReporting({ ...base, catchUpTimeoutMs, ...(options.events ? { events: options.events } : {}) })
          : await startCatalog({ ...base, ...catalog });
    services[name] = running;
    return running;
  };
  const stopService = async (name: ServiceKey) => {
    await services[name]?.stop();
    delete services[name];
  };
  for (const name of options.services ?? ["catalog", "tracking", "reporting"]) await startService(name);

  const identityDb = createIdentityClient(db.url);
  const identity = createIdentityStore(identityDb);
  const rateLimit = options.rateLimit ?? { max: 100_000, windowMs: 60_000 };
  const rateLimiter = options.rateLimiter ?? createMemoryRateLimiter(rateLimit.windowMs);
  const watermarks = await watchCatalogWrites(nc, await jetstreamManager(nc));
  const gateway = await buildGateway({
    logger,
    nc,
    auth: createAuthService(identity),
    identity,
    rateLimiter,
    rateLimit,
    rpcTimeoutMs: options.rpcTimeoutMs ?? 15_000,
    readyTimeoutMs: 500,
    watermarks,
    ...(options.handheld ? { handheld: options.handheld } : {}),
  });
  await gateway.ready();

  const createOrg = async (name = "Acme") =>
    (await runAdminCommand(["org", "create", "--name", name], identity)) as { id: number; name: string; created_at: string };
  const createKey: Stack["createKey"] = async (o) => {
    const args = ["key", "create", ...(o.org === null ? ["--no-org"] : ["--org", String(o.org)]), "--scopes", o.scopes ?? "all"];
    if (o.rateLimit !== undefined) args.push("--rate-limit", String(o.rateLimit));
    if (o.expiresAt !== undefined) args.push("--expires-at", o.expiresAt);
    return (await runAdminCommand(args, identity)) as { id: number; key: string };
  };

  return {
    db,
    nats,
    nc,
    gateway,
    identity,
    services,
    startService,
    stopService,
    createOrg,
    createKey,
    async tenant(name = "Acme") {
      const org = await createOrg(name);
      const { key } = await createKey({ org: org.id });
      return { orgId: org.id, key, auth: { authorization: `Bearer ${key}` } };
    },
    async close() {
      await gateway.close();
      for (const name of Object.keys(services) as ServiceKey[]) await stopService(name);
      for (const c of connections) if (!c.isClosed()) await c.close();
      await nc.close();
      await rateLimiter.close();
      await identityDb.$disconnect();
      await nats.destroy();
      await db.drop();
    },
  };
}

export interface FakeService {
  /** Every request received (ping excluded), in order. */
  requests: Array<{ operation: string; request: RpcRequest }>;
  stop(): void;
}

/**
 * A stand-in for a domain service on real NATS, for gateway tests: it answers
 * `<service>.ping` and every `<service>.<operation>` with `answer`'s reply
 * (by default an echo `{ data: { operation, request } }`); `answer` returning
 * null never replies (a hung service). Not a mock of NATS: the gateway's
 * requests really travel through the broker.
 */
export function fakeService(
  nc: NatsConnection,
  service: ServiceKey,
  answer: (operation: string, request: RpcRequest) => RpcReply | null | Promise<RpcReply | null> = (operation, request) => ({
    status: 200,
    headers: {},
    body: { data: { operation, request } },
  }),
): FakeService {
  const requests: FakeService["requests"] = [];
  const sub = nc.subscribe(`${service}.>`, {
    queue: service,
    callback: (err, msg) => {
      if (err) return;
      const operation = msg.subject.slice(service.length + 1);
      void (async () => {
        let reply: RpcReply | null;
        try {
          if (operation === "ping") reply = { status: 200, headers: {}, body: { ok: true, service } };
          else {
            const request = RpcRequest.parse(decodeJson(msg.data));
            requests.push({ operation, request });
            reply = await answer(operation, request);
          }
        } catch (err) {
          reply = { status: 500, headers: {}, body: { fake_service_error: String(err) } };
        }
        if (reply && msg.reply) respondRpc(msg, reply, msg.headers?.get("X-Request-ID") ?? "fake");
      })();
    },
  });
  return { requests, stop: () => sub.unsubscribe() };
}

/**
 * Moves an asset as tracking would (an `asset.moved` event on TRACKING) and
 * waits until catalog's position consumer has applied it: positions are
 * eventually visible (ARCHITECTURE.md rule 4), so tests wait for the consumer,
 * never for a fixed time.
 */
export async function placeAsset(
  nc: NatsConnection,
  move: { orgId: number; assetId: number; locationId: number; seq: number; observedAt: string },
): Promise<void> {
  await jetstream(nc).publish(
    `tracking.events.${move.orgId}.asset.moved`,
    encodeJson({
      version: 1,
      event_id: `moved:${move.orgId}:${move.assetId}:${move.seq}`,
      org_id: move.orgId,
      asset_id: move.assetId,
      location_id: move.locationId,
      observed_at: move.observedAt,
      seq: move.seq,
    }),
  );
  await waitForConsumer(await jetstreamManager(nc), STREAMS.TRACKING.name, DURABLES.catalogTracking, 10_000);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ApiBody = Record<string, any>;

/**
 * `api(method, url, body?, auth?)` through the stack's gateway: JSON bodies (merge-patch for
 * PATCH; a string is sent as it is), the tenant's key unless `auth` says otherwise. The stack
 * and tenant are read at call time, so files can build it before their beforeAll ran.
 */
export function apiCaller(stack: () => Stack, defaultAuth: () => Record<string, string>) {
  return async (method: string, url: string, body?: unknown, auth: Record<string, string> = defaultAuth()) => {
    const res = await stack().gateway.inject({
      method: method as "GET",
      url,
      headers: { ...auth, ...(body === undefined ? {} : { "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" }) },
      ...(body === undefined ? {} : { payload: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    return { status: res.statusCode, headers: res.headers, body: (res.body ? res.json() : undefined) as ApiBody };
  };
}
