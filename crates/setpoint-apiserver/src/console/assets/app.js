// The Setpoint web console (docs/console.md): one page, no build step, no dependency. It
// calls the Kubernetes API of the server that serves it, as the logged-in user (the session
// cookie), so RBAC decides what it shows. Views (the URL's hash):
//   #/                          objects of a kind, live (list + watch), filtered
//   #/object/GROUP/VERSION/RESOURCE/NAMESPACE/NAME   one object (NAMESPACE "_" if cluster-scoped)
//   #/loops                     the controllers' work queues and reconciles
// Unsafe requests carry `X-Setpoint-Console: 1` (the server's CSRF check). The set point vs
// process variable panels are in trackers.js, their charts in charts.js.

import { h } from "./dom.js";
import { eventTime } from "./charts.js";
import { trackerFor } from "./trackers.js";

const main = document.getElementById("main");
let session = null;        // {user, groups}
let kinds = null;          // discovered resources
let teardown = [];         // what the current view must stop when left

// ---------------------------------------------------------------- helpers

class ApiError extends Error {
  constructor(code, status, verb, what) {
    super(status && status.message ? status.message : `HTTP ${code}`);
    this.code = code; this.status = status; this.verb = verb; this.what = what;
  }
}

async function api(path, { method = "GET", body, signal, verb, what } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-Setpoint-Console"] = "1";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    signal, credentials: "same-origin" });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (!r.ok) throw new ApiError(r.status, json, verb || method.toLowerCase(), what || path);
  return json;
}

function age(ts) {
  if (!ts) return "";
  const secs = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
  if (secs < 120) return `${secs}s`;
  if (secs < 7200) return `${Math.round(secs / 60)}m`;
  if (secs < 172800) return `${Math.round(secs / 3600)}h`;
  return `${Math.round(secs / 86400)}d`;
}

function basePath(k, ns) {
  const root = k.group ? `/apis/${k.group}/${k.version}` : `/api/${k.version}`;
  return k.namespaced && ns ? `${root}/namespaces/${encodeURIComponent(ns)}/${k.name}` : `${root}/${k.name}`;
}

function objectHash(k, ns, name) {
  return `#/object/${k.group || "core"}/${k.version}/${k.name}/${ns || "_"}/${encodeURIComponent(name)}`;
}

function errorPanel(err, fallbackWhat) {
  if (err instanceof ApiError && err.code === 403) {
    const who = session ? session.user : "you";
    return h("div", { class: "panel forbidden", id: "forbidden", "data-code": "403" },
      h("h2", {}, `403 — you (${who}) may not ${err.verb} ${fallbackWhat || err.what}`),
      h("p", {}, err.message),
      h("p", { class: "muted" }, "Ask an administrator for a Role or ClusterRole granting it (RBAC)."));
  }
  return h("div", { class: "panel error", id: "error", "data-code": err.code || "" },
    h("h2", {}, err.code ? `${err.code} — ${fallbackWhat}` : "Error"), h("p", {}, err.message));
}

// A watch read with fetch streaming; `onEvent` gets each event, `onEnd` is called when the
// stream ends or fails (unless stopped).
function watch(path, params, onEvent, onEnd) {
  const ctl = new AbortController();
  const q = new URLSearchParams({ ...params, watch: "1", allowWatchBookmarks: "true" });
  (async () => {
    try {
      const r = await fetch(`${path}?${q}`, { signal: ctl.signal, credentials: "same-origin",
        headers: { Accept: "application/json" } });
      if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null), "watch", path);
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          // A view that fails on one event must not end the watch (it would freeze silently).
          try { onEvent(JSON.parse(line)); } catch (e) { console.error("applying a watch event", path, e); }
        }
      }
      if (!ctl.signal.aborted) onEnd(null);
    } catch (e) {
      if (!ctl.signal.aborted) onEnd(e);
    }
  })();
  return () => ctl.abort();
}

// What the page's live lists have applied, for scripts and benchmarks (`setpoint bench
// console` reads it): watch events, the batches they came in, and the milliseconds each of the
// last 10,000 batches took to apply.
const stats = { events: 0, batches: 0, applyMs: [] };
window.setpointConsoleStats = stats;

// List then watch, kept live: `onBatch(events)` is called once per animation frame with the
// events queued since the last (batches, so a busy kind does not re-render per event).
function liveList(path, params, { onReset, onBatch, onError }) {
  let stopped = false, stopWatch = () => {}, queue = [], frame = 0, retry = 0;
  const flush = () => {
    frame = 0;
    const batch = queue; queue = [];
    if (!batch.length) return;
    const started = performance.now();
    onBatch(batch);
    stats.events += batch.length; stats.batches += 1;
    stats.applyMs.push(performance.now() - started);
    if (stats.applyMs.length > 10_000) stats.applyMs.splice(0, 5_000);
  };
  const start = async () => {
    if (stopped) return;
    let list;
    try {
      const q = new URLSearchParams(params);
      list = await api(`${path}?${q}`, { verb: "list" });
    } catch (e) { onError(e); if (!(e instanceof ApiError && e.code === 403)) retry = setTimeout(start, 2000); return; }
    if (stopped) return;
    onReset(list.items || []);
    stopWatch = watch(path, { ...params, resourceVersion: list.metadata.resourceVersion }, (ev) => {
      if (ev.type === "BOOKMARK") return;
      if (ev.type === "ERROR") { stopWatch(); start(); return; }
      queue.push(ev);
      if (!frame) frame = requestAnimationFrame(flush);
    }, () => { retry = setTimeout(start, 500); });
  };
  start();
  return () => { stopped = true; stopWatch(); clearTimeout(retry); if (frame) cancelAnimationFrame(frame); };
}

// ---------------------------------------------------------------- discovery

async function discover() {
  if (kinds) return kinds;
  const out = [];
  const add = (group, version, list) => {
    for (const r of list.resources || []) {
      if (r.name.includes("/") || !(r.verbs || []).includes("list")) continue;
      out.push({ group, version, name: r.name, kind: r.kind, namespaced: r.namespaced,
        watch: (r.verbs || []).includes("watch") });
    }
  };
  add("", "v1", await api("/api/v1", { verb: "get", what: "API discovery" }));
  const groups = await api("/apis", { verb: "get", what: "API discovery" });
  await Promise.all((groups.groups || []).map(async (g) => {
    const v = g.preferredVersion ? g.preferredVersion.version : g.versions[0].version;
    try { add(g.name, v, await api(`/apis/${g.name}/${v}`)); } catch { /* an unavailable group */ }
  }));
  out.sort((a, b) => (a.kind.localeCompare(b.kind)) || a.group.localeCompare(b.group));
  kinds = out;
  return kinds;
}

function findKind(group, version, name) {
  return (kinds || []).find((k) => k.group === group && k.name === name && k.version === version)
    || (kinds || []).find((k) => k.group === group && k.name === name);
}

function kindOf(apiVersion, kind) {
  const [g, v] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  return (kinds || []).find((k) => k.group === g && k.version === v && k.kind === kind)
    || (kinds || []).find((k) => k.group === g && k.kind === kind);
}

// ---------------------------------------------------------------- objects view

function summary(o) {
  const st = o.status || {}, sp = o.spec || {};
  if (sp.replicas !== undefined || st.replicas !== undefined) {
    return `${st.readyReplicas || 0}/${sp.replicas ?? st.replicas ?? 0} ready`;
  }
  if (st.phase) return st.phase;
  const ready = (st.conditions || []).find((c) => c.type === "Ready");
  if (ready) return `Ready=${ready.status}`;
  return "";
}

// The rows of a long list are drawn only where the list's box shows them (plus a margin): a
// kind with 10,000 objects costs a few dozen rows in the document, and a batch of watch events
// re-draws only those. Every row has the same height (app.css keeps them on one line; the
// first one drawn is measured), so the position of row i is known without drawing the rows
// before it.
const OVERSCAN = 20;

// Index of the first key in the sorted array `keys` not less than `k` (binary search).
function lowerBound(keys, k) {
  let lo = 0, hi = keys.length;
  while (lo < hi) { const mid = (lo + hi) >>> 1; if (keys[mid] < k) lo = mid + 1; else hi = mid; }
  return lo;
}

async function objectsView(params) {
  await discover();
  const gv = params.get("kind") || "apps/v1/deployments";
  const parts = gv.split("/");
  const name = parts.pop(); const version = parts.pop(); const group = parts.join("/");
  const k = findKind(group === "core" ? "" : group, version, name) || findKind("apps", "v1", "deployments") || kinds[0];
  const ns = params.get("ns") || "";
  const selector = params.get("l") || "";
  const go = (changes) => {
    const p = new URLSearchParams({ kind: `${k.group || "core"}/${k.version}/${k.name}`, ns, l: selector, ...changes });
    location.hash = `#/?${p}`;
  };
  const kindSelect = h("select", { id: "kind-select", onchange: (e) => go({ kind: e.target.value }) },
    kinds.map((x) => h("option", { value: `${x.group || "core"}/${x.version}/${x.name}`,
      selected: x === k }, `${x.kind} (${x.group ? x.group + "/" : ""}${x.version})`)));
  const nsInput = h("input", { id: "ns-filter", placeholder: "all namespaces", value: ns,
    disabled: !k.namespaced, onchange: (e) => go({ ns: e.target.value.trim() }) });
  const selInput = h("input", { id: "label-filter", placeholder: "app=web,tier!=db", value: selector,
    onchange: (e) => go({ l: e.target.value.trim() }) });
  const count = h("span", { class: "muted", id: "object-count" }, "");
  const tbody = h("tbody", { id: "objects" });
  const columns = k.namespaced ? 4 : 3;
  const scroller = h("div", { class: "rows", id: "objects-scroll" }, h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Name"), k.namespaced ? h("th", {}, "Namespace") : null,
      h("th", {}, "Status"), h("th", {}, "Age"))), tbody));
  const body = h("div", {}, scroller);
  main.replaceChildren(h("h1", {}, k.kind, " ", count),
    h("div", { class: "filters" }, h("label", {}, "Kind", kindSelect),
      h("label", {}, "Namespace", nsInput), h("label", {}, "Label selector", selInput)), body);

  const objects = new Map();          // key → object
  let order = [];                     // keys, sorted
  const key = (o) => `${o.metadata.namespace || ""}/${o.metadata.name}`;
  let drawn = new Map();              // key → {tr, rv}: the rows in the document
  const rowOf = (o) => h("tr", { class: "row", "data-name": o.metadata.name, "data-namespace": o.metadata.namespace || "",
    onclick: () => { location.hash = objectHash(k, o.metadata.namespace, o.metadata.name); } },
  h("td", {}, h("a", { href: objectHash(k, o.metadata.namespace, o.metadata.name) }, o.metadata.name)),
  k.namespaced ? h("td", {}, o.metadata.namespace || "") : null,
  h("td", { class: "summary" }, summary(o)), h("td", {}, age(o.metadata.creationTimestamp)));
  const spacer = (rows) => {
    const tr = h("tr", { class: "spacer", "aria-hidden": "true" }, h("td", { colspan: columns }));
    tr.style.height = `${rows * rowHeight}px`;
    return tr;
  };
  let rowHeight = 30, measured = false; // measured on the first row drawn
  let shown = "";                     // the window last drawn, to skip a scroll that moves none
  const render = (force) => {
    const top = Math.max(0, Math.floor(scroller.scrollTop / rowHeight) - OVERSCAN);
    const visible = Math.ceil(window.innerHeight / rowHeight);
    const end = Math.min(order.length, top + visible + 2 * OVERSCAN);
    const span = `${top}:${end}:${order.length}`;
    if (!force && span === shown) return;
    shown = span;
    const next = new Map();
    const frag = document.createDocumentFragment();
    if (top > 0) frag.append(spacer(top));
    for (let i = top; i < end; i++) {
      const id = order[i];
      const o = objects.get(id);
      const prev = drawn.get(id);
      const tr = prev && prev.rv === o.metadata.resourceVersion ? prev.tr : rowOf(o);
      next.set(id, { tr, rv: o.metadata.resourceVersion });
      frag.append(tr);
    }
    if (end < order.length) frag.append(spacer(order.length - end));
    drawn = next;
    tbody.replaceChildren(frag);
    count.textContent = `${objects.size}`;
    if (!measured && drawn.size) {
      measured = true;
      const real = tbody.querySelector("tr.row").getBoundingClientRect().height;
      if (real > 0 && Math.abs(real - rowHeight) > 0.5) { rowHeight = real; render(true); }
    }
  };
  let scrollFrame = 0;
  scroller.addEventListener("scroll", () => {
    if (!scrollFrame) scrollFrame = requestAnimationFrame(() => { scrollFrame = 0; render(false); });
  });
  teardown.push(() => { if (scrollFrame) cancelAnimationFrame(scrollFrame); });
  const params2 = selector ? { labelSelector: selector } : {};
  teardown.push(liveList(basePath(k, k.namespaced ? ns : ""), params2, {
    onReset: (items) => {
      objects.clear();
      for (const o of items) objects.set(key(o), o);
      order = [...objects.keys()].sort();
      drawn = new Map();
      render(true);
    },
    onBatch: (events) => {
      let changed = false;        // a row in the window, or the list's length
      for (const ev of events) {
        const id = key(ev.object);
        if (ev.type === "DELETED") {
          if (!objects.delete(id)) continue;
          order.splice(lowerBound(order, id), 1);
          changed = true;
        } else {
          if (!objects.has(id)) { order.splice(lowerBound(order, id), 0, id); changed = true; }
          objects.set(id, ev.object);
          if (drawn.has(id)) changed = true;
        }
      }
      // Rows outside the window are drawn when scrolled to; inside it, or when rows come or go
      // (which moves the window's rows), draw again.
      if (changed || !shown) render(true);
    },
    onError: (e) => body.replaceChildren(errorPanel(e, `${k.name}${k.namespaced && ns ? ` in namespace ${ns}` : ""}`)),
  }));
}

// ---------------------------------------------------------------- object page

function toYaml(v, indent = "") {
  const scalar = (x) => {
    if (x === null) return "null";
    if (typeof x === "string") {
      return x === "" || /^[\s]|[\s]$|[:#{}[\],&*?|<>=!%@`"'\n]|^[-0-9.]|^(true|false|null|yes|no)$/i.test(x) ? JSON.stringify(x) : x;
    }
    return String(x);
  };
  if (Array.isArray(v)) {
    if (!v.length) return "[]";
    return v.map((x) => {
      if (x !== null && typeof x === "object" && Object.keys(x).length) {
        const inner = toYaml(x, indent + "  ");
        return `${indent}- ${inner.slice(indent.length + 2)}`;
      }
      return `${indent}- ${typeof x === "object" && x !== null ? (Array.isArray(x) ? "[]" : "{}") : scalar(x)}`;
    }).join("\n");
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (!keys.length) return "{}";
    return keys.map((k) => {
      const x = v[k];
      if (x !== null && typeof x === "object" && (Array.isArray(x) ? x.length : Object.keys(x).length)) {
        return `${indent}${scalar(k)}:\n${toYaml(x, Array.isArray(x) ? indent : indent + "  ")}`;
      }
      return `${indent}${scalar(k)}: ${typeof x === "object" && x !== null ? (Array.isArray(x) ? "[]" : "{}") : scalar(x)}`;
    }).join("\n");
  }
  return indent + scalar(v);
}

const OWNED_CANDIDATES = [["apps", "replicasets"], ["", "pods"], ["batch", "jobs"], ["apps", "controllerrevisions"]];

async function objectView(group, version, resource, ns, name) {
  await discover();
  const g = group === "core" ? "" : group;
  const k = findKind(g, version, resource) || { group: g, version, name: resource, kind: resource, namespaced: ns !== "_" };
  const namespace = ns === "_" ? "" : ns;
  const path = `${basePath(k, namespace)}/${encodeURIComponent(name)}`;
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  let o;
  try { o = await api(path, { verb: "get", what: `${k.name} "${name}"` }); } catch (e) {
    main.replaceChildren(h("h1", {}, `${k.kind} ${name}`), errorPanel(e, `${k.name} "${name}"`)); return;
  }
  const chartBox = h("div", { id: "setpoint-panel" });
  const condBox = h("div", {}), ownersBox = h("div", {}), ownedBox = h("div", {}), eventsBox = h("div", {});
  const yamlBox = h("pre", { class: "yaml", id: "yaml" });
  main.replaceChildren(
    h("h1", {}, h("a", { href: `#/?kind=${k.group || "core"}/${k.version}/${k.name}&ns=${namespace}` }, k.kind), " ",
      h("span", { id: "object-name" }, name), namespace ? h("span", { class: "muted" }, ` in ${namespace}`) : null),
    chartBox, h("h2", {}, "Conditions"), condBox, h("h2", {}, "Owners"), ownersBox,
    h("h2", {}, "Owned objects"), ownedBox, h("h2", {}, "Events"), eventsBox, h("h2", {}, "YAML"), yamlBox);

  const kindTracker = trackerFor(k);
  let tracker = null;
  if (kindTracker) {
    const inner = h("div", {});
    chartBox.append(h("h2", {}, kindTracker[0]), inner);
    tracker = kindTracker[1](inner);
  }
  if (tracker) teardown.push(() => tracker.stop());

  const show = (obj) => {
    o = obj;
    if (tracker) tracker.sample(obj);
    const conds = (obj.status && obj.status.conditions) || [];
    condBox.replaceChildren(conds.length ? h("table", { id: "conditions" },
      h("thead", {}, h("tr", {}, ["Type", "Status", "Reason", "Message", "Last transition"].map((c) => h("th", {}, c)))),
      h("tbody", {}, conds.map((c) => h("tr", { "data-type": c.type }, h("td", {}, c.type),
        h("td", { class: `status-${c.status}` }, c.status), h("td", {}, c.reason || ""), h("td", {}, c.message || ""),
        h("td", {}, age(c.lastTransitionTime)))))) : h("p", { class: "muted" }, "None."));
    const owners = obj.metadata.ownerReferences || [];
    ownersBox.replaceChildren(owners.length ? h("ul", { id: "owners" }, owners.map((r) => {
      const ok = kindOf(r.apiVersion, r.kind);
      const label = `${r.kind} ${r.name}${r.controller ? " (controller)" : ""}`;
      return h("li", {}, ok ? h("a", { href: objectHash(ok, ok.namespaced ? namespace : "", r.name) }, label) : label);
    })) : h("p", { class: "muted" }, "None."));
    yamlBox.textContent = toYaml(obj);
  };
  show(o);

  // Kept live: a watch of this one object, started again (after a fresh read) whenever it ends
  // or breaks — a server timeout, or the browser dropping its connections when the machine's
  // network changes (Chromium's ERR_NETWORK_CHANGED, e.g. as pods' interfaces come and go).
  let stopped = false, stopWatch = () => {}, again = 0;
  const follow = () => {
    if (stopped) return;
    stopWatch = watch(basePath(k, namespace), { fieldSelector: `metadata.name=${name}`, resourceVersion: o.metadata.resourceVersion },
      (ev) => { if (ev.type === "MODIFIED" || ev.type === "ADDED") show(ev.object); }, () => {
        if (stopped) return;
        again = setTimeout(async () => {
          try { show(await api(path, { verb: "get", what: `${k.name} "${name}"` })); } catch { /* try again below */ }
          follow();
        }, 1000);
      });
  };
  follow();
  teardown.push(() => { stopped = true; clearTimeout(again); stopWatch(); });

  const refreshRelated = async () => {
    const uid = o.metadata.uid;
    if (namespace) {
      const owned = [];
      await Promise.all(OWNED_CANDIDATES.map(async ([cg, cr]) => {
        const ck = (kinds || []).find((x) => x.group === cg && x.name === cr);
        if (!ck) return;
        try {
          const list = await api(basePath(ck, namespace));
          for (const x of list.items || []) {
            if ((x.metadata.ownerReferences || []).some((r) => r.uid === uid)) owned.push([ck, x]);
          }
        } catch { /* not allowed to list: left out */ }
      }));
      owned.sort((a, b) => a[1].metadata.name.localeCompare(b[1].metadata.name));
      ownedBox.replaceChildren(owned.length ? h("table", { id: "owned" }, h("tbody", {}, owned.map(([ck, x]) =>
        h("tr", { "data-name": x.metadata.name }, h("td", {}, ck.kind),
          h("td", {}, h("a", { href: objectHash(ck, namespace, x.metadata.name) }, x.metadata.name)),
          h("td", {}, summary(x)))))) : h("p", { class: "muted" }, "None."));
    } else {
      ownedBox.replaceChildren(h("p", { class: "muted" }, "Cluster-scoped: not searched."));
    }
  };
  refreshRelated();

  // Its Events, kept live by a watch: the table, and the markers on the tracker's time axis.
  const events = new Map();
  const showEvents = () => {
    const items = [...events.values()].sort((a, b) => (eventTime(b) || 0) - (eventTime(a) || 0));
    if (tracker) tracker.events(items);
    eventsBox.replaceChildren(items.length ? h("table", { id: "events" },
      h("thead", {}, h("tr", {}, ["Type", "Reason", "Age", "From", "Message"].map((c) => h("th", {}, c)))),
      h("tbody", {}, items.map((e) => h("tr", { "data-reason": e.reason || "" }, h("td", {}, e.type || ""),
        h("td", {}, e.reason || ""), h("td", {}, Number.isFinite(eventTime(e)) ? age(new Date(eventTime(e)).toISOString()) : ""),
        h("td", {}, (e.source && e.source.component) || e.reportingComponent || ""), h("td", {}, e.message || "")))))
      : h("p", { class: "muted" }, "None."));
  };
  const evPath = namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}/events` : "/api/v1/events";
  teardown.push(liveList(evPath, { fieldSelector: `involvedObject.uid=${o.metadata.uid}` }, {
    onReset: (items) => { events.clear(); for (const e of items) events.set(e.metadata.uid, e); showEvents(); },
    onBatch: (batch) => {
      for (const ev of batch) {
        if (ev.type === "DELETED") events.delete(ev.object.metadata.uid);
        else events.set(ev.object.metadata.uid, ev.object);
      }
      showEvents();
    },
    onError: (e) => eventsBox.replaceChildren(e instanceof ApiError && e.code === 403
      ? h("p", { class: "muted" }, "Not allowed to list events.") : h("p", { class: "error" }, e.message)),
  }));

  // Owned objects and the events' ages are refreshed every 3 s.
  const timer = setInterval(() => { refreshRelated(); if (events.size) showEvents(); }, 3000);
  teardown.push(() => clearInterval(timer));
}

// ---------------------------------------------------------------- loops view

function p99(buckets, prev) {
  // The 99th percentile from cumulative buckets ([[le|null, count]]): of the change since
  // `prev` when there was any, else of everything so far.
  let counts = buckets.map(([, c], i) => c - (prev && prev[i] ? prev[i][1] : 0));
  if (!counts.length) return NaN;
  if (counts[counts.length - 1] <= 0) counts = buckets.map(([, c]) => c);
  const total = counts[counts.length - 1];
  if (total <= 0) return NaN;
  const want = total * 0.99;
  for (let i = 0; i < buckets.length; i++) {
    if (counts[i] >= want) return buckets[i][0] === null ? Infinity : buckets[i][0];
  }
  return NaN;
}

async function loopsView() {
  main.replaceChildren(h("h1", {}, "Loops"), h("p", { class: "muted" }, "Every controller of the server's process, refreshed every second: work-queue depth, adds and reconciles per second, the 99th percentile reconcile time (histogram bucket bound), retries and errors."));
  const box = h("div", {});
  main.append(box);
  let prev = null, prevAt = 0;
  const tick = async () => {
    let data;
    try { data = await api("/ui/api/loops", { verb: "get", what: "path \"/metrics\"" }); } catch (e) {
      box.replaceChildren(errorPanel(e, "the controllers' metrics")); return;
    }
    const now = Date.now();
    const dt = prev ? (now - prevAt) / 1000 : 0;
    const before = new Map((prev || []).map((c) => [c.name, c]));
    const rate = (c, f) => { const p = before.get(c.name); return p && dt > 0 ? ((c[f] - p[f]) / dt).toFixed(1) : "—"; };
    const fmtSecs = (v) => (!Number.isFinite(v) ? (v === Infinity ? "> max" : "—") : v < 1 ? `${Math.round(v * 1000)} ms` : `${v} s`);
    box.replaceChildren(h("table", { id: "loops" },
      h("thead", {}, h("tr", {}, ["Controller", "Queue depth", "Adds/s", "Reconciles/s", "p99 reconcile", "Retries", "Errors", "Workers"].map((c) => h("th", {}, c)))),
      h("tbody", {}, data.controllers.map((c) => h("tr", { "data-controller": c.name },
        h("td", {}, c.name), h("td", { class: "num", "data-depth": c.depth }, c.depth), h("td", { class: "num" }, rate(c, "adds")),
        h("td", { class: "num" }, rate(c, "reconciles")),
        h("td", { class: "num" }, fmtSecs(p99(c.reconcileBuckets, before.get(c.name) && before.get(c.name).reconcileBuckets))),
        h("td", { class: "num" }, c.retries), h("td", { class: "num" }, c.errors), h("td", { class: "num" }, c.activeWorkers))))));
    prev = data.controllers; prevAt = now;
  };
  await tick();
  const timer = setInterval(tick, 1000);
  teardown.push(() => clearInterval(timer));
}

// ---------------------------------------------------------------- routing

async function route() {
  for (const stop of teardown.splice(0)) stop();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  document.getElementById("nav-objects").classList.toggle("active", !path.startsWith("/loops"));
  document.getElementById("nav-loops").classList.toggle("active", path.startsWith("/loops"));
  try {
    if (path.startsWith("/object/")) {
      const [group, version, resource, ns, name] = path.slice("/object/".length).split("/");
      await objectView(group, version, resource, ns, decodeURIComponent(name || ""));
    } else if (path.startsWith("/loops")) {
      await loopsView();
    } else {
      await objectsView(new URLSearchParams(query || ""));
    }
  } catch (e) {
    main.replaceChildren(errorPanel(e, (e && e.what) || "this page"));
  }
}

async function start() {
  try {
    session = await api("/ui/api/session");
  } catch (e) {
    main.replaceChildren(h("div", { class: "panel", id: "login-needed" }, h("h2", {}, "Not logged in"),
      h("p", {}, "Run ", h("code", {}, "setpoint console-url --data-dir DIR"), " where the server's data directory is, and open the URL it prints (it is good once, for 5 minutes).")));
    return;
  }
  const who = document.getElementById("whoami");
  who.textContent = session.user;
  who.dataset.user = session.user;
  const logout = document.getElementById("logout");
  logout.hidden = false;
  logout.addEventListener("click", async () => {
    try { await api("/ui/api/logout", { method: "POST" }); } finally { location.href = "/ui/"; }
  });
  window.addEventListener("hashchange", route);
  await route();
}

start();
