import { describe, expect, it } from "vitest";
import { latch } from "@whereabouts/shared/testing";
import { createPageCache, type RenderedPage } from "./page-cache.ts";

function renderer(expiresIn = Number.POSITIVE_INFINITY, at: () => number = () => 0) {
  let calls = 0;
  return {
    calls: () => calls,
    render: async (): Promise<RenderedPage> => {
      calls++;
      return { data: `[page ${calls}]`, total: calls, expiresAt: at() + expiresIn };
    },
  };
}

describe("page cache", () => {
  it("serves a page while no newer catalog write is known, renders again at a newer watermark", async () => {
    const cache = createPageCache({ now: () => 0 });
    const r = renderer();
    expect((await cache.page(1, "k", 10, r.render)).data).toBe("[page 1]");
    expect((await cache.page(1, "k", 10, r.render)).data).toBe("[page 1]");
    expect((await cache.page(1, "k", 9, r.render)).data).toBe("[page 1]");
    expect(r.calls()).toBe(1);
    expect(await cache.page(1, "k", 11, r.render)).toEqual({ data: "[page 2]", total: 2, expiresAt: Number.POSITIVE_INFINITY });
    expect(r.calls()).toBe(2);
  });

  it("renders again once a position of the organization moved, not for another organization's", async () => {
    const cache = createPageCache({ now: () => 0 });
    const r = renderer();
    await cache.page(1, "k1", 5, r.render);
    await cache.page(2, "k2", 5, r.render);
    cache.positionsMoved([2]);
    expect((await cache.page(1, "k1", 5, r.render)).data).toBe("[page 1]");
    expect((await cache.page(2, "k2", 5, r.render)).data).toBe("[page 3]");
    expect((await cache.page(2, "k2", 5, r.render)).data).toBe("[page 3]");
    expect(r.calls()).toBe(3);
  });

  it("keeps a page rendered while positions moved only until the next read", async () => {
    const cache = createPageCache({ now: () => 0 });
    let calls = 0;
    const render = async (): Promise<RenderedPage> => {
      calls++;
      // A move committed while this page was rendered: the page may predate it.
      if (calls === 1) cache.positionsMoved([1]);
      return { data: `[page ${calls}]`, total: 0, expiresAt: Number.POSITIVE_INFINITY };
    };
    expect((await cache.page(1, "k", 1, render)).data).toBe("[page 1]");
    expect((await cache.page(1, "k", 1, render)).data).toBe("[page 2]");
    expect((await cache.page(1, "k", 1, render)).data).toBe("[page 2]");
  });

  it("expires at the page's own boundary, and after the maximum age at the latest", async () => {
    let t = 1_000;
    const cache = createPageCache({ now: () => t, maxAgeMs: 250 });
    const soon = renderer(100, () => t);
    await cache.page(1, "k", 1, soon.render);
    t += 99;
    await cache.page(1, "k", 1, soon.render);
    expect(soon.calls()).toBe(1);
    t += 1;
    await cache.page(1, "k", 1, soon.render);
    expect(soon.calls()).toBe(2);

    const never = renderer(Number.POSITIVE_INFINITY, () => t);
    await cache.page(1, "other", 1, never.render);
    t += 249;
    await cache.page(1, "other", 1, never.render);
    expect(never.calls()).toBe(1);
    t += 1;
    await cache.page(1, "other", 1, never.render);
    expect(never.calls()).toBe(2);
  });

  it("caches nothing for a caller without a watermark", async () => {
    const cache = createPageCache({ now: () => 0 });
    const r = renderer();
    await cache.page(1, "k", undefined, r.render);
    await cache.page(1, "k", undefined, r.render);
    await cache.page(1, "k", 1, r.render);
    expect(r.calls()).toBe(3);
  });

  it("lets reads that arrive during a render share it, unless they need a newer watermark", async () => {
    const cache = createPageCache({ now: () => 0 });
    const gate = latch();
    let calls = 0;
    const render = async (): Promise<RenderedPage> => {
      const n = ++calls;
      await gate.opened;
      return { data: `[page ${n}]`, total: n, expiresAt: Number.POSITIVE_INFINITY };
    };
    const reads = [cache.page(1, "k", 3, render), cache.page(1, "k", 2, render), cache.page(1, "k", 4, render)];
    gate.open();
    expect((await Promise.all(reads)).map((p) => p.data)).toEqual(["[page 1]", "[page 1]", "[page 2]"]);
    expect(calls).toBe(2);
    // The later watermark's page is the one kept.
    expect((await cache.page(1, "k", 4, render)).data).toBe("[page 2]");
  });

  it("does not hand a read a shared render whose page expired while it waited", async () => {
    let t = 0;
    const cache = createPageCache({ now: () => t });
    const gate = latch();
    let calls = 0;
    const render = async (): Promise<RenderedPage> => {
      const n = ++calls;
      if (n === 1) await gate.opened;
      // A tag's window opens at t = 100: the first render (begun before it) shows the page as it was.
      return { data: `[page ${n}]`, total: n, expiresAt: n === 1 ? 100 : Number.POSITIVE_INFINITY };
    };
    const first = cache.page(1, "k", 1, render);
    const joined = cache.page(1, "k", 1, render);
    t = 150;
    gate.open();
    expect((await first).data).toBe("[page 1]");
    expect((await joined).data).toBe("[page 2]");
    expect(calls).toBe(2);
  });

  it("holds at most its byte bound, dropping the oldest pages first", async () => {
    const cache = createPageCache({ now: () => 0, maxBytes: 20 });
    const r = renderer();
    await cache.page(1, "a", 1, r.render); // 8 bytes and a 1-byte key
    await cache.page(1, "b", 1, r.render); // 9
    await cache.page(1, "c", 1, r.render); // 9: "a" goes
    expect(r.calls()).toBe(3);
    await cache.page(1, "c", 1, r.render);
    await cache.page(1, "b", 1, r.render);
    expect(r.calls()).toBe(3);
    await cache.page(1, "a", 1, r.render);
    expect(r.calls()).toBe(4);
  });

  it("counts the keys in its bound: searches that find nothing cannot pile up", async () => {
    const cache = createPageCache({ now: () => 0, maxBytes: 100 });
    let calls = 0;
    const empty = async (): Promise<RenderedPage> => {
      calls++;
      return { data: "[]", total: 0, expiresAt: Number.POSITIVE_INFINITY };
    };
    const key = (q: string) => `search ${q}`.padEnd(40, ".");
    for (const q of ["a", "b", "c"]) await cache.page(1, key(q), 1, empty); // 42 bytes each: "a" goes
    await cache.page(1, key("c"), 1, empty);
    await cache.page(1, key("b"), 1, empty);
    expect(calls).toBe(3);
    await cache.page(1, key("a"), 1, empty);
    expect(calls).toBe(4);
  });
});
