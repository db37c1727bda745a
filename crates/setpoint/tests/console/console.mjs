// The web console in a real headless Chromium (playwright-core), driven by tests/console.rs,
// which starts the server and passes everything in the environment:
//   CONSOLE_URL         a login URL for the admin (from `setpoint console-url`)
//   CONSOLE_URL_NOBODY  a login URL for the user `nobody`, who has no rights
//   KUBECONFIG          the admin kubeconfig (this script runs `kubectl scale`, `apply`, `patch`)
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

const overall = setTimeout(() => { console.error("console.mjs: took longer than 180 s"); process.exit(1); }, 180_000);
const step = (what) => console.log(`console.mjs: ${what}`);
const check = (ok, what) => { if (!ok) throw new Error(`check failed: ${what}`); };
const kubectl = (...args) => execFileSync("kubectl", ["--kubeconfig", env("KUBECONFIG"), ...args], { encoding: "utf8" });
const kubectlApply = (yaml) => execFileSync("kubectl", ["--kubeconfig", env("KUBECONFIG"), "apply", "-f", "-"],
  { encoding: "utf8", input: yaml });
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

  step("a long list draws only the rows in view; scrolling brings the others in");
  const many = Array.from({ length: 300 }, (_, i) =>
    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-${String(i).padStart(3, "0")}","namespace":"default","labels":{"set":"many"}}}`);
  kubectlApply(`{"apiVersion":"v1","kind":"List","items":[${many.join(",")}]}`);
  await page.goto(`${origin}/ui/#/?kind=core/v1/configmaps&ns=default&l=set%3Dmany`);
  await page.waitForFunction(() => document.querySelector("#object-count")?.textContent === "300", null, { timeout: 15_000 });
  const drawn = await page.$$eval("#objects tr.row", (rs) => rs.map((r) => r.dataset.name));
  check(drawn[0] === "cm-000" && drawn.length < 120, `the first rows only are drawn (${drawn.length}: ${drawn[0]} … ${drawn.at(-1)})`);
  await page.$eval("#objects-scroll", (el) => { el.scrollTop = el.scrollHeight; });
  await page.waitForSelector('#objects tr[data-name="cm-299"]', { timeout: 5_000 });
  check(!(await page.$('#objects tr[data-name="cm-000"]')), "scrolled to the end, the first row is no longer drawn");
  kubectl("delete", "configmap", "-n", "default", "cm-299");
  await page.waitForFunction(() => document.querySelector("#object-count")?.textContent === "299", null, { timeout: 15_000 });
  await page.waitForSelector('#objects tr[data-name="cm-299"]', { state: "detached", timeout: 5_000 });

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
  await page.waitForSelector('#pv-unavailable[data-value="0"]', { timeout: 10_000 });
  const unavailable = await page.getAttribute('#replicas-chart polyline[data-series="unavailableReplicas"]', "points");
  check(unavailable && unavailable.split(" ").some((p) => Number(p.split(",")[1]) !== Number(unavailable.split(" ").at(-1).split(",")[1])),
    `the unavailable line rose during the scale and came back (${unavailable})`);
  await page.waitForFunction(() => (document.querySelector("#convergence")?.dataset.convergedMs || "") !== "", null, { timeout: 10_000 });
  const conv = await page.textContent("#convergence");
  check(/converged in [0-9.]+ s/.test(conv), `a convergence time is shown (${conv})`);
  const points = await page.getAttribute('#replicas-chart polyline[data-series="status.readyReplicas"]', "points");
  check(points && points.split(" ").length >= 3, `the ready line has several points (${points})`);

  step("the scale's ScalingReplicaSet event is a marker on the chart's time axis");
  const marker = '#replicas-chart .event-marker.event-Normal[data-reason="ScalingReplicaSet"]';
  await page.waitForSelector(marker, { state: "attached", timeout: 15_000 });
  const title = await page.textContent(`${marker} title`);
  check(/ScalingReplicaSet .*Scaled up replica set web-.* from 1 to 3/.test(title), `the marker's title says what happened (${title})`);
  const markers = await page.$$eval("#replicas-chart .event-marker", (ms) => ms.map((m) => m.dataset.reason));
  check(markers.filter((r) => r === "ScalingReplicaSet").length === 1,
    `only the scale's event is drawn, not the one from before the page opened (${markers})`);
  await page.waitForSelector('#events tr[data-reason="ScalingReplicaSet"]', { timeout: 5_000 });
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

  step("an HPA's page: each metric's target, desired against current replicas");
  kubectlApply(`
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 3
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
`);
  await page.goto(`${origin}/ui/#/object/autoscaling/v2/horizontalpodautoscalers/default/web`);
  await page.waitForSelector('#hpa-target-0[data-value="50"]', { timeout: 30_000 });
  await page.waitForSelector('#hpa-desired[data-value="3"]', { timeout: 30_000 });
  await page.waitForSelector('#hpa-current[data-value="3"]', { timeout: 10_000 });
  await page.waitForFunction(() => Number.isFinite(Number(document.querySelector("#hpa-current-0")?.dataset.value || "x")),
    null, { timeout: 30_000 });
  await page.waitForSelector("#metric-chart-0 polyline", { state: "attached", timeout: 5_000 });
  await shoot(page, "hpa");

  step("a suspended Job's page; resumed, status.succeeded reaches spec.completions");
  await page.goto(`${origin}/ui/#/object/batch/v1/jobs/default/count`);
  await page.waitForSelector('#sp-value[data-value="3"]', { timeout: 15_000 });
  await page.waitForSelector('#pv-succeeded[data-value="0"]', { timeout: 5_000 });
  await page.waitForTimeout(1000); // a second of the suspended Job on the chart
  kubectl("patch", "job/count", "--type=merge", "-p", '{"spec":{"suspend":false}}');
  await page.waitForSelector('#pv-succeeded[data-value="3"]', { timeout: 60_000 });
  await page.waitForSelector('#error-value[data-value="0"]', { timeout: 5_000 });
  await page.waitForFunction(() => (document.querySelector("#convergence")?.dataset.convergedMs || "") !== "", null, { timeout: 10_000 });
  const jobConv = await page.textContent("#convergence");
  check(/converged in [0-9.]+ s/.test(jobConv), `the Job's convergence time is shown (${jobConv})`);
  await page.waitForSelector('#job-chart polyline[data-series="status.succeeded"]', { state: "attached", timeout: 5_000 });
  await page.waitForSelector('#job-chart .event-marker[data-reason="Completed"]', { state: "attached", timeout: 15_000 });
  await shoot(page, "job");

  step("the node's page: its conditions over time, Ready");
  const node = kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").trim();
  check(node !== "", "the server has a node");
  await page.goto(`${origin}/ui/#/object/core/v1/nodes/_/${encodeURIComponent(node)}`);
  await page.waitForSelector('#node-Ready[data-value="True"]', { timeout: 15_000 });
  await page.waitForSelector('#conditions-chart polyline[data-series="Ready"]', { state: "attached", timeout: 5_000 });
  for (const type of ["MemoryPressure", "DiskPressure", "PIDPressure"]) {
    const v = await page.getAttribute(`#node-${type}`, "data-value");
    check(v === "False", `the node's ${type} is False (${v})`);
  }
  await page.waitForTimeout(2000); // a little time on the axis for the picture
  await shoot(page, "node");

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
