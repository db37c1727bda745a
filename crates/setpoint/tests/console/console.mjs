// The web console in a real headless Chromium (playwright-core), driven by tests/console.rs,
// which starts the server and passes everything in the environment:
//   CONSOLE_URL         a login URL for the admin (from `setpoint console-url`)
//   CONSOLE_URL_NOBODY  a login URL for the user `nobody`, who has no rights
//   KUBECONFIG          the admin kubeconfig (this script runs `kubectl scale`)
//   CHROMIUM            the browser; PLAYWRIGHT_DIR: the folder holding node_modules/playwright-core
//   SCREENSHOTS         if set, a folder to write PNGs of the main pages to
// Exits non-zero, saying why, at the first failed check.
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";

const env = (name) => {
  const v = process.env[name];
  if (!v) { console.error(`console.mjs: ${name} is not set`); process.exit(2); }
  return v;
};
const require = createRequire(`${env("PLAYWRIGHT_DIR")}/`);
const { chromium } = require("playwright-core");
const shots = process.env.SCREENSHOTS || "";
if (shots) mkdirSync(shots, { recursive: true });

const overall = setTimeout(() => { console.error("console.mjs: took longer than 100 s"); process.exit(1); }, 100_000);
const step = (what) => console.log(`console.mjs: ${what}`);
const check = (ok, what) => { if (!ok) throw new Error(`check failed: ${what}`); };
const kubectl = (...args) => execFileSync("kubectl", ["--kubeconfig", env("KUBECONFIG"), ...args], { encoding: "utf8" });
const shoot = async (page, name) => { if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true }); };

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const admin = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 900 } });
  const page = await admin.newPage();
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));

  step("log in as the admin through the one-time URL");
  const url = env("CONSOLE_URL");
  const origin = new URL(url).origin;
  const landed = await page.goto(url);
  check(new URL(page.url()).pathname === "/ui/", `redirected to /ui/ (at ${page.url()}, ${landed.status()})`);
  await page.waitForSelector('#whoami[data-user="setpoint-admin"]', { timeout: 10_000 });
  const cookies = await admin.cookies();
  const session = cookies.find((c) => c.name === "setpoint-session");
  check(session && session.httpOnly && session.secure && session.sameSite === "Strict" && session.value.length >= 43,
    `a Secure, HttpOnly, SameSite=Strict session cookie (${JSON.stringify(session)})`);

  step("the login URL is good once");
  const again = await browser.newContext({ ignoreHTTPSErrors: true });
  const second = await (await again.newPage()).goto(url);
  check(second.status() === 401, `a second use of the login URL is 401 (got ${second.status()})`);
  await again.close();

  step("the objects view lists the Deployment, live");
  await page.goto(`${origin}/ui/#/?kind=apps/v1/deployments&ns=default`);
  await page.waitForSelector('#objects tr[data-name="web"]', { timeout: 15_000 });
  await shoot(page, "objects");

  step("the Deployment's page: set point and process variables at 1");
  await page.goto(`${origin}/ui/#/object/apps/v1/deployments/default/web`);
  await page.waitForSelector('#sp-value[data-value="1"]', { timeout: 15_000 });
  await page.waitForSelector('#pv-ready[data-value="1"]', { timeout: 15_000 });
  await page.waitForSelector("#replicas-chart polyline", { state: "attached", timeout: 5_000 });
  await page.waitForSelector('#owned tr', { timeout: 10_000 }); // its ReplicaSet

  step("kubectl scale deploy/web --replicas=3; the page follows");
  kubectl("scale", "deployment/web", "--replicas=3");
  await page.waitForSelector('#sp-value[data-value="3"]', { timeout: 15_000 });
  await page.waitForSelector('#pv-ready[data-value="3"]', { timeout: 45_000 });
  await page.waitForSelector('#pv-updated[data-value="3"]', { timeout: 10_000 });
  await page.waitForFunction(() => (document.querySelector("#convergence")?.dataset.convergedMs || "") !== "", null, { timeout: 10_000 });
  const conv = await page.textContent("#convergence");
  check(/converged in [0-9.]+ s/.test(conv), `a convergence time is shown (${conv})`);
  const points = await page.getAttribute('#replicas-chart polyline[data-series="status.readyReplicas"]', "points");
  check(points && points.split(" ").length >= 3, `the ready line has several points (${points})`);
  await shoot(page, "deployment");

  step("cookie-authenticated writes need the CSRF header");
  const write = (withHeader) => page.evaluate(async (withHeader) => {
    const headers = { "Content-Type": "application/json" };
    if (withHeader) headers["X-Setpoint-Console"] = "1";
    const r = await fetch("/api/v1/namespaces/default/configmaps", { method: "POST", headers,
      body: JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `csrf-${withHeader}` } }) });
    return r.status;
  }, withHeader);
  const without = await write(false);
  check(without === 403, `a POST without X-Setpoint-Console is 403 (got ${without})`);
  const withIt = await write(true);
  check(withIt === 201, `a POST with X-Setpoint-Console: 1 is 201 (got ${withIt})`);

  step("the PIDAutoscaler's page shows its terms");
  await page.goto(`${origin}/ui/#/object/autoscaling.setpoint.dev/v1alpha1/pidautoscalers/default/idle`);
  await page.waitForSelector("#pid-terms", { timeout: 20_000 });
  for (const term of ["p", "i", "d", "output"]) {
    const v = await page.getAttribute(`#pid-${term}`, "data-value");
    check(v !== "" && Number.isFinite(Number(v)), `the ${term} term is a number (${v})`);
  }
  const target = await page.getAttribute("#pid-target", "data-value");
  check(target === "50", `the target metric is 50 (${target})`);
  await shoot(page, "pidautoscaler");

  step("the loops view lists the server's controllers");
  await page.goto(`${origin}/ui/#/loops`);
  await page.waitForSelector('#loops tr[data-controller="deployment-controller"]', { timeout: 10_000 });
  await page.waitForTimeout(1500); // a second poll: rates
  await shoot(page, "loops");

  step("a user without rights sees the 403 panel");
  const nobody = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 700 } });
  const np = await nobody.newPage();
  await np.goto(env("CONSOLE_URL_NOBODY"));
  await np.waitForSelector('#whoami[data-user="nobody"]', { timeout: 10_000 });
  await np.goto(`${origin}/ui/#/?kind=apps/v1/deployments&ns=default`);
  await np.waitForSelector("#forbidden", { timeout: 10_000 });
  const text = await np.textContent("#forbidden h2");
  check(text.includes("403 — you (nobody) may not list deployments"), `the 403 panel names the user and the action (${text})`);
  await shoot(np, "forbidden");

  step("logging out ends the session");
  await page.goto(`${origin}/ui/`);
  await page.click("#logout");
  await page.waitForSelector("#login-needed", { timeout: 10_000 });
  const after = await page.evaluate(async () => (await fetch("/api/v1/namespaces")).status);
  check(after === 401, `after logout the API answers 401 (got ${after})`);
  step("ok");
} catch (e) {
  console.error(`console.mjs: ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  clearTimeout(overall);
  await browser.close();
}
