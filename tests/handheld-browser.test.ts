/**
 * The handheld page in a real browser (Debian's Chromium through
 * playwright-core) against a real stack: sign in, scan with the keyboard
 * (type + Enter, as a keyboard-wedge scanner does), submit, read the status;
 * an unknown tag; offline submissions queued and delivered once each; a wrong
 * password. Screenshots at 360 px and desktop width go to tests/artifacts/.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";

/** How long the page may take to show a change (a loaded CI machine: sign-in hashes with scrypt). */
const UI_MS = 15_000;

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const ARTIFACTS = path.join(repoRoot, "tests", "artifacts");
const PASSWORD = "a long enough password";

let stack: Stack;
let sql: pg.Client;
let baseUrl: string;
let tenant: Awaited<ReturnType<Stack["tenant"]>>;
let profile: string;
let context: BrowserContext;
let browser: Browser | undefined;

async function api(method: string, url: string, payload?: unknown) {
  const res = await stack.gateway.inject({ method: method as "GET", url, headers: tenant.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  return res.json();
}

beforeAll(async () => {
  stack = await startStack({ label: "handheld_browser" });
  sql = new pg.Client({ connectionString: stack.db.url });
  await sql.connect();
  tenant = await stack.tenant("Browser Org");
  await runAdminCommand(["user", "create", "--org", String(tenant.orgId), "--email", "picker@example.com", "--scopes", "all", "--password-stdin"], stack.identity, `${PASSWORD}\n`);
  await stack.gateway.listen({ host: "127.0.0.1", port: 0 });
  const address = stack.gateway.server.address() as { port: number };
  baseUrl = `http://127.0.0.1:${address.port}`;
  await api("POST", "/api/v1/locations", { name: "Dock 7", external_key: "DOCK-7" });
  for (const n of [1, 2, 3, 4, 5]) {
    await api("POST", "/api/v1/assets", { name: `Forklift ${n}`, external_key: `FL-${n}`, tags: [{ tag_type: "rfid", value: `TAG-${n}` }] });
  }
  mkdirSync(ARTIFACTS, { recursive: true });
}, 120_000);

afterAll(async () => {
  await sql?.end();
  await stack?.close();
});

async function newContext(width = 390, height = 800): Promise<Page> {
  profile = mkdtempSync(path.join(os.tmpdir(), "wa-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    // A fresh profile each time: playwright passes it as --user-data-dir.
    args: FLAGS,
    viewport: { width, height },
  });
  browser = context.browser() ?? undefined;
  return context.pages()[0] ?? (await context.newPage());
}

afterEach(async () => {
  await context?.close();
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function signIn(page: Page) {
  await page.goto(`${baseUrl}/handheld/`);
  await page.getByLabel("Email").fill("picker@example.com");
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expectFocused(page);
}

async function expectFocused(page: Page) {
  await page.getByLabel("Scan").waitFor();
  await eventually(async () => ((await page.evaluate(() => document.activeElement?.id)) === "scan" ? true : undefined), 5_000);
}

/** What a keyboard-wedge scanner does: types the value and Enter into the focused field. */
async function scanValue(page: Page, value: string) {
  await page.keyboard.type(value);
  await page.keyboard.press("Enter");
}

const statusText = (page: Page) => page.getByRole("status").innerText();

async function historyRows(assetKey: string): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM tracking.history h JOIN catalog.assets a ON a.id = h.asset_id WHERE a.org_id = $1 AND a.external_key = $2`,
    [tenant.orgId, assetKey],
  );
  return rows[0]!.n;
}

/** Distinct colours of a PNG, read back through a canvas in a blank page (no decoder package needed). */
async function distinctColours(page: Page, png: Buffer): Promise<number> {
  const blank = await page.context().newPage();
  try {
    return await blank.evaluate(async (b64) => {
      const img = new Image();
      img.src = `data:image/png;base64,${b64}`;
      await img.decode();
      const canvas = document.createElement("canvas");
      canvas.width = img.width;
      canvas.height = img.height;
      const ctx = canvas.getContext("2d")!;
      ctx.drawImage(img, 0, 0);
      const data = ctx.getImageData(0, 0, img.width, img.height).data;
      const seen = new Set<number>();
      for (let i = 0; i < data.length; i += 4 * 7) seen.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
      return seen.size;
    }, png.toString("base64"));
  } finally {
    await blank.close();
  }
}

describe("handheld page in Chromium", () => {
  it("sign in, scan a location and three tags, see each asset, submit: 3 assets recorded; the API shows them", async () => {
    const page = await newContext(360, 740);
    await signIn(page);
    await scanValue(page, "DOCK-7");
    await expect.poll(() => page.locator("#location").innerText(), { timeout: UI_MS }).toContain("Dock 7");
    for (const n of [1, 2, 3]) {
      await scanValue(page, `TAG-${n}`);
      await expect.poll(() => page.locator("#items").innerText(), { timeout: UI_MS }).toContain(`Forklift ${n}`);
      await expectFocused(page);
    }
    // The same tag twice counts once.
    await scanValue(page, "TAG-3");
    await expect.poll(() => page.locator("#count").innerText(), { timeout: UI_MS }).toBe("3");

    const shot = await page.screenshot({ fullPage: true });
    writeFileSync(path.join(ARTIFACTS, "handheld-360.png"), shot);
    expect(await distinctColours(page, shot)).toBeGreaterThan(8);
    // Touch targets of at least 44 px.
    for (const name of ["Submit", "Start over"]) {
      const box = await page.getByRole("button", { name }).boundingBox();
      expect(box!.height, name).toBeGreaterThanOrEqual(44);
    }
    // Nothing wider than the 360 px screen.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);

    await page.getByRole("button", { name: "Submit" }).click();
    await expect.poll(() => statusText(page), { timeout: 30_000 }).toMatch(/3 assets recorded at Dock 7/);
    for (const n of [1, 2, 3]) expect(await historyRows(`FL-${n}`)).toBe(1);
    // Positions are scan data (eventually visible): the location filter finds the three.
    const here = await eventually(async () => {
      const now = await api("GET", "/api/v1/assets?location_external_key=DOCK-7");
      return now.data.length === 3 ? now.data : undefined;
    }, 10_000);
    expect(here.map((a: { external_key: string }) => a.external_key).sort()).toEqual(["FL-1", "FL-2", "FL-3"]);
  });

  it("marks an unknown tag, and a scan can be removed before submit", async () => {
    const page = await newContext(1280, 800);
    await signIn(page);
    await scanValue(page, "DOCK-7");
    await expect.poll(() => page.locator("#location").innerText(), { timeout: UI_MS }).toContain("Dock 7");
    await scanValue(page, "NOT-A-TAG");
    await expect.poll(() => page.locator("#items li.unknown").innerText(), { timeout: UI_MS }).toContain("Unknown tag NOT-A-TAG");
    await scanValue(page, "TAG-4");
    await expect.poll(() => page.locator("#items").innerText(), { timeout: UI_MS }).toContain("Forklift 4");
    const shot = await page.screenshot({ fullPage: true });
    writeFileSync(path.join(ARTIFACTS, "handheld-desktop.png"), shot);
    expect(await distinctColours(page, shot)).toBeGreaterThan(8);
    await page.getByRole("button", { name: "Remove NOT-A-TAG" }).click();
    await expect.poll(() => page.locator("#count").innerText(), { timeout: UI_MS }).toBe("1");
    expect(await page.locator("#items li.unknown").count()).toBe(0);
  });

  it("offline: two submissions wait in the browser, then each is delivered once when the connection returns", async () => {
    const page = await newContext();
    await signIn(page);
    const outcomes = async () =>
      (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM tracking.scan_outcomes WHERE org_id = $1`, [tenant.orgId])).rows[0]!.n;
    const before = await outcomes();
    await context.setOffline(true);
    await scanValue(page, "DOCK-7");
    await expect.poll(() => page.locator("#location").innerText(), { timeout: UI_MS }).toContain("DOCK-7 (offline, not checked)");
    for (const n of [4, 5]) {
      await scanValue(page, `TAG-${n}`);
      await expect.poll(() => page.locator("#items").innerText(), { timeout: UI_MS }).toContain(`TAG-${n} (offline, not checked)`);
      await page.getByRole("button", { name: "Submit" }).click();
      await expect.poll(() => page.locator("#queue").innerText(), { timeout: UI_MS }).toBe(`${n - 3} submission${n === 4 ? "" : "s"} waiting to be sent`);
    }
    expect(await outcomes()).toBe(before);
    await context.setOffline(false);
    await expect.poll(() => page.locator("#queue").innerText(), { timeout: 30_000 }).toBe("");
    await expect.poll(() => statusText(page), { timeout: 30_000 }).toMatch(/1 asset recorded at DOCK-7/);
    await eventually(async () => ((await outcomes()) - before === 2 ? true : undefined), 30_000);
    expect(await historyRows("FL-4")).toBe(1);
    expect(await historyRows("FL-5")).toBe(1);
  });

  it("a wrong password shows an error and leaves no session", async () => {
    const page = await newContext();
    await page.goto(`${baseUrl}/handheld/`);
    await page.getByLabel("Email").fill("picker@example.com");
    await page.getByLabel("Password").fill("wrong password!!");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").innerText(), { timeout: UI_MS }).toMatch(/Wrong email or password/);
    expect(await page.getByLabel("Scan").isVisible()).toBe(false);
    expect((await context.cookies()).filter((c) => c.name === "wa_session")).toEqual([]);
  });
});
