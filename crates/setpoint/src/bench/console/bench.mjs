// `setpoint bench console`'s browser side (crates/setpoint/src/bench/console/mod.rs starts it,
// with the server already holding the pods): headless Chromium through playwright-core.
// Environment:
//   CONSOLE_URL     a one-time login URL (from `setpoint console-url`)
//   CHROMIUM        the browser; PLAYWRIGHT_DIR: the folder holding node_modules/playwright-core
//   PODS            how many pods the objects page must show
//   LOADS           how many times to time the page's load
// Protocol, one line each way: this script prints `LOADED <json>` once the loads are timed and
// the page is left open on the pods list; on `blank` or `list` it leaves the page or opens the
// list again and prints `OK`; on the line `churn` from its stdin (the page on the list) it starts recording
// and prints `RECORDING`; on `stop N` (N = the changes the benchmark made) it waits until the
// page has applied them, prints `RESULT <json>` and exits.
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

const env = (name) => {
  const v = process.env[name];
  if (!v) { console.error(`bench.mjs: ${name} is not set`); process.exit(2); }
  return v;
};
const require = createRequire(`${env("PLAYWRIGHT_DIR")}/`);
const { chromium } = require("playwright-core");
const pods = Number(env("PODS"));
const loads = Number(env("LOADS"));

const lines = createInterface({ input: process.stdin });
const waiting = [];
lines.on("line", (l) => { const w = waiting.shift(); if (w) w(l.trim()); });
const nextLine = () => new Promise((resolve) => waiting.push(resolve));

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") console.error(`page console: ${m.text()}`); });
  // Lists and watches the page starts (a watch that ends is started again after a fresh list).
  const requests = { lists: 0, watches: 0 };
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (!u.pathname.startsWith("/api")) return;
    if (u.searchParams.get("watch") === "1") requests.watches += 1; else requests.lists += 1;
  });
  const url = env("CONSOLE_URL");
  const origin = new URL(url).origin;
  await page.goto(url);
  await page.waitForSelector("#whoami[data-user]", { timeout: 30_000 });

  // A load: a fresh document at the pods list, until the count says every pod is there and
  // the first rows are drawn (what a user sees), timed from the navigation's start.
  const list = `${origin}/ui/#/?kind=core/v1/pods&ns=`;
  const loadTimes = [];
  for (let i = 0; i < loads; i++) {
    await page.goto("about:blank");
    const started = Date.now();
    await page.goto(list);
    await page.waitForFunction((n) => document.querySelector("#object-count")?.textContent === String(n)
      && document.querySelectorAll("#objects tr.row").length > 0, pods, { timeout: 60_000, polling: "raf" });
    loadTimes.push(Date.now() - started);
  }
  const rowsInDom = await page.$$eval("#objects tr.row", (rs) => rs.length);
  console.log(`LOADED ${JSON.stringify({ loadTimes, rowsInDom })}`);

  // Paired CPU phases: the benchmark asks for the page to be blank or on the list (loaded,
  // every pod counted) and measures the server while pods change.
  for (;;) {
    const command = await nextLine();
    if (command === "churn") break;
    if (command === "blank") {
      await page.goto("about:blank");
    } else if (command === "list") {
      await page.goto(list);
      await page.waitForFunction((n) => document.querySelector("#object-count")?.textContent === String(n),
        pods, { timeout: 60_000, polling: 100 });
    } else {
      throw new Error(`unknown command ${command}`);
    }
    console.log("OK");
  }
  // Recording: the gap between animation frames, long tasks, and a probe of the main thread
  // every 100 ms (a round trip into the page: it waits behind whatever the page is doing).
  await page.evaluate(() => {
    const w = window;
    w.__bench = { frames: [], longTasks: [] };
    let last = performance.now();
    const frame = (t) => { w.__bench.frames.push(t - last); last = t; if (!w.__bench.done) requestAnimationFrame(frame); };
    requestAnimationFrame(frame);
    new PerformanceObserver((l) => { for (const e of l.getEntries()) w.__bench.longTasks.push(e.duration); })
      .observe({ type: "longtask", buffered: false });
  });
  const before = await page.evaluate(() => ({ ...window.setpointConsoleStats }));
  const requestsBefore = { ...requests };
  const probes = [];
  let probing = true;
  const probe = (async () => {
    while (probing) {
      const t = Date.now();
      try { await page.evaluate(() => 0); } catch { return; }
      probes.push(Date.now() - t);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  console.log("RECORDING");
  const stop = await nextLine();
  const m = /^stop (\d+)$/.exec(stop);
  if (!m) throw new Error(`expected \`stop N\`, got ${stop}`);
  const changes = Number(m[1]);
  // Caught up: the page has applied at least as many watch events as changes were made.
  const stopped = Date.now();
  try {
    await page.waitForFunction(({ before, changes }) => window.setpointConsoleStats.events - before >= changes,
      { before: before.events, changes }, { timeout: 60_000, polling: 50 });
  } catch (e) {
    const seen = await page.evaluate(() => window.setpointConsoleStats.events);
    throw new Error(`the page applied ${seen - before.events} of ${changes} changes within 60 s `
      + `(${requests.watches - requestsBefore.watches} watches and ${requests.lists - requestsBefore.lists} lists started meanwhile): ${e.message}`);
  }
  const catchUpMs = Date.now() - stopped;
  probing = false;
  await probe;
  const page_ = await page.evaluate(() => { window.__bench.done = true; return window.__bench; });
  const after = await page.evaluate(() => ({ ...window.setpointConsoleStats }));
  const count = await page.textContent("#object-count");
  console.log(`RESULT ${JSON.stringify({
    frames: page_.frames, longTasks: page_.longTasks, probes, catchUpMs, count,
    watchesStarted: requests.watches - requestsBefore.watches,
    events: after.events - before.events, batches: after.batches - before.batches,
    applyMs: after.applyMs.slice(-(after.batches - before.batches)),
  })}`);
} finally {
  await browser.close();
  lines.close();
}
