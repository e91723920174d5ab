/**
 * Where webhooks may send (SSRF guard, EXTENSIONS.md section 4): never to
 * private, loopback, link-local, unique-local, carrier-grade NAT or metadata
 * addresses, unless WEBHOOK_ALLOW_PRIVATE=true (tests, closed networks).
 * Checked when a webhook is saved (a clear 400) and again on every connection
 * (the address actually dialled, so DNS that changes its answer cannot slip
 * past the first check).
 */
import { BlockList, isIP, type LookupFunction } from "node:net";
import { lookup as dnsLookup } from "node:dns";
import { promisify } from "node:util";

const blocked = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  blocked.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(network, prefix, "ipv6");
}
/** Cloud metadata names that resolve to link-local or internal addresses. */
const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"]);

/** Why an address may not be a webhook target, or undefined. */
export function refusedAddress(address: string): string | undefined {
  const family = isIP(address);
  if (family === 0) return `${address} is not an IP address`;
  if (family === 6) {
    // IPv4-mapped (::ffff:a.b.c.d) answers for its IPv4 address.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return refusedAddress(mapped[1]!);
  }
  if (blocked.check(address, family === 4 ? "ipv4" : "ipv6")) {
    return `${address} is a private, loopback, link-local or reserved address`;
  }
  return undefined;
}

export class TargetRefusedError extends Error {
  override readonly name = "TargetRefusedError";
}

const lookupAll = promisify(dnsLookup);

export interface TargetGuard {
  /** Resolves the URL's host and refuses it when any address is off limits. */
  check(url: string): Promise<void>;
  /** Without DNS: refuses an IP literal or a local/metadata name (names are checked as they are dialled). */
  checkLiteral(url: string): void;
  /** For http(s).request: dials only allowed addresses. */
  lookup: LookupFunction | undefined;
}

export function createTargetGuard(allowPrivate: boolean): TargetGuard {
  if (allowPrivate) return { check: async () => undefined, checkLiteral: () => undefined, lookup: undefined };
  /** The host when it is an IP literal (checked), undefined for a name to resolve. */
  const literal = (url: string): string | undefined => {
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
    if (METADATA_HOSTS.has(host) || host === "localhost" || host.endsWith(".localhost")) {
      throw new TargetRefusedError(`${host} is a local or metadata host`);
    }
    if (!isIP(host)) return undefined;
    const refused = refusedAddress(host);
    if (refused) throw new TargetRefusedError(refused);
    return host;
  };
  const lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const list = addresses as unknown as Array<{ address: string; family: number }>;
      const refused = list.map((a) => refusedAddress(a.address)).find(Boolean);
      if (refused || !list.length) return callback(new TargetRefusedError(refused ?? `${hostname} has no address`), "", 0);
      if (options.all) return (callback as unknown as (e: null, a: typeof list) => void)(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
  return {
    lookup,
    checkLiteral(url: string) {
      literal(url);
    },
    async check(url: string) {
      if (literal(url) !== undefined) return;
      const host = new URL(url).hostname;
      let addresses: Array<{ address: string }>;
      try {
        addresses = (await lookupAll(host, { all: true })) as unknown as Array<{ address: string }>;
      } catch {
        throw new TargetRefusedError(`${host} does not resolve`);
      }
      const refused = addresses.map((a) => refusedAddress(a.address)).find(Boolean);
      if (refused) throw new TargetRefusedError(`${host} resolves to ${refused}`);
    },
  };
}
