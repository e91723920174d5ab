// The handheld scanning page (EXTENSIONS.md section 2). Plain JavaScript, no
// dependencies: the gateway serves it as is, under a same-origin-only CSP.
// Flow: sign in; the first scan names the location; each later scan is an
// asset tag; Submit sends one scan event; offline submissions wait in
// IndexedDB and go out (with the same event_id) when the connection returns.

const $ = (id) => document.getElementById(id);
const api = "/handheld/api";
const state = { csrf: sessionStorage.getItem("wa_csrf"), user: JSON.parse(sessionStorage.getItem("wa_user") || "null"), location: null, items: [], firstAt: null };

// ---- offline queue (IndexedDB) ----
function db() {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open("whereabouts-handheld", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("queue", { keyPath: "event_id" });
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
}
async function queueOp(mode, fn) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const tx = d.transaction("queue", mode);
    const req = fn(tx.objectStore("queue"));
    tx.oncomplete = () => resolve(req && req.result);
    tx.onerror = () => reject(tx.error);
  });
}
const enqueue = (scan) => queueOp("readwrite", (s) => s.put(scan));
const dequeue = (eventId) => queueOp("readwrite", (s) => s.delete(eventId));
const queued = () => queueOp("readonly", (s) => s.getAll());

async function showQueue() {
  const waiting = (await queued()).length;
  $("queue").textContent = waiting ? `${waiting} submission${waiting === 1 ? "" : "s"} waiting to be sent` : "";
}

// ---- HTTP ----
async function call(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && state.csrf) headers["x-whereabouts-csrf"] = state.csrf;
  const res = await fetch(api + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (res.status === 401 && path !== "/login") signedOut("Your session has ended. Sign in again.");
  return { status: res.status, data };
}

function say(text, tone) {
  const status = $("status");
  status.textContent = text;
  status.className = `status ${tone || ""}`;
}

// ---- sign-in ----
function signedOut(message) {
  state.csrf = null;
  state.user = null;
  sessionStorage.removeItem("wa_csrf");
  sessionStorage.removeItem("wa_user");
  $("scanner").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  $("login").hidden = false;
  if (message) say(message, "bad");
  $("email").focus();
}
function signedIn() {
  $("login").hidden = true;
  $("scanner").hidden = false;
  $("logout").hidden = false;
  $("who").textContent = state.user ? state.user.email : "";
  focusScan();
  showQueue();
  flush();
}

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const { status, data } = await call("POST", "/login", { email: $("email").value, password: $("password").value });
    if (status !== 200) {
      $("login-error").textContent = status === 429 ? "Too many attempts. Try again later." : "Wrong email or password.";
      return;
    }
    state.csrf = data.data.csrf_token;
    state.user = data.data.user;
    sessionStorage.setItem("wa_csrf", state.csrf);
    sessionStorage.setItem("wa_user", JSON.stringify(state.user));
    $("password").value = "";
    say("");
    signedIn();
  } catch {
    $("login-error").textContent = "Cannot reach the server.";
  }
});

$("logout").addEventListener("click", async () => {
  await call("POST", "/logout").catch(() => undefined);
  signedOut("Signed out.");
});

// ---- scanning ----
const focusScan = () => setTimeout(() => $("scan").focus(), 0);

function render() {
  $("location").textContent = state.location
    ? state.location.offline
      ? `${state.location.external_key} (offline, not checked)`
      : `${state.location.name} (${state.location.external_key})`
    : "Scan a location first.";
  $("location").className = state.location ? "" : "muted";
  const list = $("items");
  list.replaceChildren(
    ...state.items.map((item, index) => {
      const li = document.createElement("li");
      li.className = item.asset ? "known" : item.offline ? "offline" : "unknown";
      const text = document.createElement("span");
      text.className = "text";
      text.textContent = item.asset
        ? `${item.asset.name} (${item.asset.external_key})${item.asset.location_external_key ? `, was at ${item.asset.location_external_key}` : ""}`
        : item.offline
          ? `${item.value} (offline, not checked)`
          : `Unknown tag ${item.value}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "secondary";
      remove.textContent = "Remove";
      remove.setAttribute("aria-label", `Remove ${item.value}`);
      remove.addEventListener("click", () => {
        state.items.splice(index, 1);
        if (!state.items.length) state.firstAt = null;
        render();
        focusScan();
      });
      li.append(text, remove);
      return li;
    }),
  );
  $("count").textContent = String(state.items.length);
  $("submit").disabled = !state.location || !state.items.length;
}

async function lookup(value) {
  const { status, data } = await call("GET", `/lookup?value=${encodeURIComponent(value)}`);
  return status === 200 ? data.data.matches : null;
}

// undefined: the network is down (offline scans are taken as scanned, unchecked).
const lookupOrOffline = (value) => lookup(value).catch(() => undefined);

async function scanned(value) {
  const tagType = $("tag-type").value;
  if (!state.location) {
    const matches = await lookupOrOffline(value);
    if (matches === undefined) {
      state.location = { id: null, external_key: value, name: value, offline: true };
      say(`Offline: location ${value} taken as scanned (not checked).`);
      render();
      return;
    }
    const location = matches && matches.find((m) => m.kind === "location");
    if (!location) {
      say(matches ? `${value} is not a known location.` : "Cannot look it up right now.", "bad");
      return;
    }
    state.location = location;
    say(`Location: ${location.name}`);
    render();
    return;
  }
  if (state.items.some((item) => item.value === value && item.tag_type === tagType)) {
    say(`${value} is already scanned.`);
    return;
  }
  const item = { tag_type: tagType, value, asset: null };
  state.items.push(item);
  if (!state.firstAt) state.firstAt = new Date().toISOString();
  render();
  const matches = await lookupOrOffline(value);
  if (matches === undefined) {
    item.offline = true;
    say(`Offline: ${value} taken as scanned (not checked).`);
    render();
    return;
  }
  const asset = matches && matches.find((m) => m.kind === "asset" && (m.tag_type === null || m.tag_type === tagType));
  if (asset) {
    item.asset = asset;
    if (asset.tag_type) item.tag_type = asset.tag_type;
    say(`${asset.name}`);
  } else {
    say(`Unknown tag ${value}`, "bad");
  }
  render();
}

$("scan-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("scan").value.trim();
  $("scan").value = "";
  focusScan();
  if (value) scanned(value);
});

$("clear").addEventListener("click", () => {
  state.location = null;
  state.items = [];
  state.firstAt = null;
  say("");
  render();
  focusScan();
});

// ---- submitting ----
async function send(scan) {
  const { status, data } = await call("POST", "/scans", scan);
  if (status === 202) return "stored";
  if (status >= 500 || status === 429) return "retry";
  return { error: (data && data.error && data.error.detail) || `refused (${status})` };
}

async function follow(scan) {
  for (let i = 0; i < 60; i++) {
    const { status, data } = await call("GET", `/scans/${encodeURIComponent(scan.event_id)}`).catch(() => ({ status: 0 }));
    if (status === 200 && data.data.status === "processed") {
      const n = data.data.assets.length;
      const unknown = data.data.unresolved_tags.length;
      say(`${n} asset${n === 1 ? "" : "s"} recorded at ${scan.location_name}${unknown ? `; ${unknown} unknown tag${unknown === 1 ? "" : "s"}` : ""}`, "good");
      return;
    }
    if (status === 200 && data.data.status === "dead_lettered") {
      say(`Not recorded: ${data.data.reason}`, "bad");
      return;
    }
    await new Promise((r) => setTimeout(r, 250 + i * 50));
  }
  say("Submitted; still being processed.");
}

async function flush() {
  if (!navigator.onLine || flush.running) return;
  flush.running = true;
  try {
    for (const scan of await queued()) {
      const outcome = await send(strip(scan)).catch(() => "retry");
      if (outcome === "retry") break;
      await dequeue(scan.event_id);
      if (outcome === "stored") follow(scan);
      else say(`A queued submission was refused: ${outcome.error}`, "bad");
    }
  } finally {
    flush.running = false;
    showQueue();
  }
}
const strip = ({ location_name: _name, ...scan }) => scan;

$("submit").addEventListener("click", async () => {
  if (!state.location || !state.items.length) return;
  const scan = {
    event_id: crypto.randomUUID(),
    observed_at: state.firstAt || new Date().toISOString(),
    location: state.location.id ? { id: state.location.id } : { external_key: state.location.external_key },
    tags: state.items.map((item) => ({ tag_type: item.tag_type, value: item.value })),
    location_name: state.location.name,
  };
  state.items = [];
  state.firstAt = null;
  render();
  focusScan();
  // Queued first: a crash or a lost connection never loses it, and a retry reuses its event_id.
  await enqueue(scan);
  if (!navigator.onLine) {
    say("Offline: the submission will be sent when the connection returns.");
    showQueue();
    return;
  }
  say("Submitting...");
  const outcome = await send(strip(scan)).catch(() => "retry");
  if (outcome === "retry") {
    say("Could not send now: the submission will be retried.");
    showQueue();
    return;
  }
  await dequeue(scan.event_id);
  showQueue();
  if (outcome === "stored") follow(scan);
  else say(`Not accepted: ${outcome.error}`, "bad");
});

window.addEventListener("online", () => flush());
setInterval(() => flush(), 5000);

// Camera scanning where the browser has BarcodeDetector.
if ("BarcodeDetector" in window && navigator.mediaDevices) {
  $("camera").hidden = false;
  $("camera").addEventListener("click", async () => {
    const stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment" } }).catch(() => null);
    if (!stream) return say("No camera available.", "bad");
    const video = document.createElement("video");
    video.srcObject = stream;
    await video.play();
    const detector = new window.BarcodeDetector();
    for (let i = 0; i < 100; i++) {
      const codes = await detector.detect(video).catch(() => []);
      if (codes.length) {
        $("tag-type").value = "barcode";
        scanned(codes[0].rawValue);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    stream.getTracks().forEach((t) => t.stop());
    focusScan();
  });
}

// Keep the Scan field focused: a keyboard-wedge scanner types into whatever has focus.
document.addEventListener("click", (event) => {
  if (!$("scanner").hidden && !(event.target instanceof HTMLInputElement) && !(event.target instanceof HTMLSelectElement)) focusScan();
});

if (state.csrf) signedIn();
else signedOut();
render();
