/**
 * Tag resolution with memory. Resolving a batch's tags in SQL (a tag lookup
 * and an owner probe per distinct tag) was a quarter of a scan batch's time,
 * and the same tags are read again and again. What a tag resolved to stays
 * good while nothing changes it:
 * - a catalog batch writing the organization's assets or tags replaces its
 *   replica token (replica-store.ts), read with the organizations each batch
 *   (after the catch-up, so every catalog write before the scan is in it);
 *   a changed token forgets the organization's tags;
 * - validity passing changes it with no event: each answer is kept until the
 *   next instant it could change (resolveAssetTags), on the database's clock.
 * Bounded: past `memory` answers it forgets them all and starts again.
 */
import type { Db } from "../db/tracking-db.ts";
import { resolveAssetTags, type KnownOrgs, type TagRef, type TagResolution } from "./replica-store.ts";

/** Tag answers remembered (about 100 bytes each). */
export const TAG_MEMORY = 200_000;

interface OrgMemory {
  version: string;
  /** By tag type, then value: the scan's own strings are the keys (no key is built per read). */
  tags: Map<string, Map<string, TagResolution>>;
}

export function createTagResolver(options: { memory?: number } = {}) {
  const memory = options.memory ?? TAG_MEMORY;
  const byOrg = new Map<number, OrgMemory>();
  let size = 0;
  let lookups = 0;

  function orgMemory(orgId: number, version: string): OrgMemory {
    let org = byOrg.get(orgId);
    if (org?.version === version) return org;
    if (org) for (const values of org.tags.values()) size -= values.size;
    org = { version, tags: new Map() };
    byOrg.set(orgId, org);
    return org;
  }

  /** The asset each reference resolves to now (null when none), in input order; `orgs` as read after the catch-up. */
  async function resolve(db: Db, refs: TagRef[], orgs: KnownOrgs): Promise<Array<number | null>> {
    const out: Array<number | null> = new Array(refs.length).fill(null);
    const missed: number[] = [];
    let org: OrgMemory | undefined;
    let orgId: number | undefined;
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i]!;
      if (ref.orgId !== orgId) {
        orgId = ref.orgId;
        const version = orgs.versions.get(ref.orgId);
        org = version === undefined ? undefined : orgMemory(ref.orgId, version);
      }
      if (!org) continue;
      const known = org.tags.get(ref.tagType)?.get(ref.value);
      if (known && (known.untilMs === null || orgs.nowMs < known.untilMs)) out[i] = known.assetId;
      else missed.push(i);
    }
    if (!missed.length) return out;
    lookups += missed.length;
    const answers = await resolveAssetTags(db, missed.map((i) => refs[i]!));
    missed.forEach((i, n) => {
      const ref = refs[i]!;
      const answer = answers[n]!;
      out[i] = answer.assetId;
      // Under the token read before the lookup: a catalog write since then changes it, so this is forgotten next batch.
      const tags = orgMemory(ref.orgId, orgs.versions.get(ref.orgId)!).tags;
      let values = tags.get(ref.tagType);
      if (!values) tags.set(ref.tagType, (values = new Map()));
      if (!values.has(ref.value)) size++;
      values.set(ref.value, answer);
    });
    if (size > memory) {
      byOrg.clear();
      size = 0;
    }
    return out;
  }

  return {
    resolve,
    /** References answered from the database so far (the rest from memory). */
    lookups: () => lookups,
    remembered: () => size,
  };
}
export type TagResolver = ReturnType<typeof createTagResolver>;
