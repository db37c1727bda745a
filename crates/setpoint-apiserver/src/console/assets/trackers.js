// Set point vs process variable, per kind: each tracker samples an object from its watch (from
// the moment its page opens), takes the object's Events, and redraws every second (the time
// axis moves): current values as elements with stable ids and `data-value` attributes (for
// tests and scripts), charts with the Events on their time axis, and where the kind has one a
// convergence time (the last set-point change → error zero). `trackerFor(kind)` says which
// tracker a kind has, if any.

import { h } from "./dom.js";
import { lineChart, laneChart } from "./charts.js";

export function valueBox(id, label, value) {
  return h("div", {}, h("span", { class: "v", id, "data-value": value ?? "" }, value ?? "—"), h("span", { class: "k" }, label));
}

// A chart's legend, with the event markers' meaning after the series'.
function legend(...items) {
  return h("div", { class: "legend" }, items, h("span", { class: "ev-Normal" }, "▼ event"),
    h("span", { class: "ev-Warning" }, "▼ warning event"));
}

const fmt = (v) => (Number.isFinite(v) ? Math.round(v * 1000) / 1000 : "—");

// What every tracker shares: `take(state, object, t)` records a sample, `render(state, now,
// t1)` gives the panel's children, nulls left out (t1: the time axis' end, at least 10 s after
// the page opened). `state` holds `opened`, `samples`, `events` and `last` (the newest object).
function tracker(container, take, render) {
  const state = { opened: Date.now(), samples: [], events: [], last: null };
  const draw = () => {
    if (!state.last) return;
    const now = Date.now();
    container.replaceChildren(...render(state, now, Math.max(now, state.opened + 10000)).filter(Boolean));
  };
  const timer = setInterval(draw, 1000);
  return {
    sample(o) { state.last = o; take(state, o, Date.now()); draw(); },
    events(list) { state.events = list; draw(); },
    stop() { clearInterval(timer); },
  };
}

// `#convergence`: "converged in N s" from `since` (a set-point change, or the first sample when
// it was not at the set point) to `converged`, `data-converged-ms` holding the duration.
function convergenceBox(since, converged, atSetPoint, error, now) {
  let text;
  if (since === null) text = atSetPoint ? "at set point since the page opened" : `converging (error ${error})`;
  else if (converged !== null) text = `converged in ${((converged - since) / 1000).toFixed(1)} s`;
  else text = `converging for ${((now - since) / 1000).toFixed(1)} s (error ${error})`;
  return h("div", {}, h("span", { class: "v", id: "convergence",
    "data-converged-ms": converged !== null && since !== null ? converged - since : "" }, text),
    h("span", { class: "k" }, "convergence time (last set-point change → error zero)"));
}

const column = (samples, i) => samples.map((r) => [r[0], r[i]]);

// ---------------------------------------------------------------- replicas

// Deployment, ReplicaSet, StatefulSet: spec.replicas against ready and updated replicas, and the
// replicas not available (a Deployment's status.unavailableReplicas; for the others the set
// point less status.availableReplicas) — a rollout or a scale drawn as it happens.
function replicasTracker(container) {
  let since = null, converged = null, prevSp = null;
  return tracker(container, (st, o, t) => {
    const sp = (o.spec && o.spec.replicas) ?? 1;
    const status = o.status || {};
    const ready = status.readyReplicas || 0, updated = status.updatedReplicas ?? (status.currentReplicas || 0);
    const unavailable = status.unavailableReplicas
      ?? Math.max(0, sp - (status.availableReplicas ?? ready));
    if (prevSp !== null && sp !== prevSp) { since = t; converged = null; }
    prevSp = sp;
    if (since !== null && converged === null && ready === sp && updated === sp) converged = t;
    st.samples.push([t, sp, ready, updated, unavailable]);
  }, (st, now, t1) => {
    const [, sp, ready, updated, unavailable] = st.samples[st.samples.length - 1];
    const error = sp - ready;
    return [
      h("div", { class: "values" },
        valueBox("sp-value", "set point: spec.replicas", sp),
        valueBox("pv-ready", "process variable: status.readyReplicas", ready),
        valueBox("pv-updated", "process variable: status.updatedReplicas", updated),
        valueBox("pv-unavailable", "unavailable replicas", unavailable),
        valueBox("error-value", "error (set point − ready)", error),
        convergenceBox(since, converged, error === 0 && updated === sp, error, now)),
      legend(h("span", { class: "sp" }, "— — spec.replicas"), h("span", { class: "pv1" }, "—— readyReplicas"),
        h("span", { class: "pv2" }, "—— updatedReplicas"), h("span", { class: "pv3" }, "··· unavailable")),
      lineChart([{ name: "spec.replicas", cls: "sp", points: column(st.samples, 1) },
        { name: "status.readyReplicas", cls: "pv1", points: column(st.samples, 2) },
        { name: "status.updatedReplicas", cls: "pv2", points: column(st.samples, 3) },
        { name: "unavailableReplicas", cls: "pv3", points: column(st.samples, 4) }],
      st.opened, t1, { id: "replicas-chart", events: st.events })];
  });
}

// ---------------------------------------------------------------- Job

// A Job's set point: spec.completions, 1 when unset (a work-queue Job with only parallelism set
// is done at its first success, as Kubernetes treats it).
function jobCompletions(spec) {
  return (spec && spec.completions) ?? 1;
}

// Job: spec.completions against status.succeeded, with active and failed pods. The convergence
// clock starts at the first sample when the Job is not done yet, and again at each change of
// completions or resumption of a suspended Job.
function jobTracker(container) {
  let since = null, converged = null, prev = null;
  return tracker(container, (st, o, t) => {
    const sp = jobCompletions(o.spec);
    const suspended = !!(o.spec && o.spec.suspend);
    const status = o.status || {};
    const succeeded = status.succeeded || 0, active = status.active || 0, failed = status.failed || 0;
    if (prev === null) { if (succeeded < sp) since = t; }
    else if (sp !== prev.sp || (prev.suspended && !suspended)) { since = t; converged = null; }
    prev = { sp, suspended };
    if (since !== null && converged === null && succeeded >= sp) converged = t;
    st.samples.push([t, sp, succeeded, active, failed]);
  }, (st, now, t1) => {
    const [, sp, succeeded, active, failed] = st.samples[st.samples.length - 1];
    const status = st.last.status || {};
    const secs = status.startTime && status.completionTime
      ? Math.round((Date.parse(status.completionTime) - Date.parse(status.startTime)) / 1000) : NaN;
    const ran = Number.isFinite(secs) ? (secs < 1 ? "< 1 s" : `${secs} s`) : null;
    return [
      h("div", { class: "values" },
        valueBox("sp-value", "set point: spec.completions", sp),
        valueBox("pv-succeeded", "process variable: status.succeeded", succeeded),
        valueBox("pv-active", "status.active", active),
        valueBox("pv-failed", "status.failed", failed),
        valueBox("error-value", "error (completions − succeeded)", sp - succeeded),
        convergenceBox(since, converged, succeeded >= sp, sp - succeeded, now),
        ran ? valueBox("job-duration", "ran (status.startTime → completionTime, whole seconds)", ran) : null,
        st.last.spec && st.last.spec.suspend ? valueBox("job-suspended", "spec.suspend", "suspended") : null),
      legend(h("span", { class: "sp" }, "— — completions"), h("span", { class: "pv1" }, "—— succeeded"),
        h("span", { class: "pv2" }, "—— active"), h("span", { class: "pv3" }, "—— failed")),
      lineChart([{ name: "spec.completions", cls: "sp", points: column(st.samples, 1) },
        { name: "status.succeeded", cls: "pv1", points: column(st.samples, 2) },
        { name: "status.active", cls: "pv2", points: column(st.samples, 3) },
        { name: "status.failed", cls: "pv3", points: column(st.samples, 4) }],
      st.opened, t1, { id: "job-chart", events: st.events })];
  });
}

// ---------------------------------------------------------------- autoscalers

// A Kubernetes quantity ("250m", "2Gi", "1.5e3") as a number; NaN when it is not one.
export function parseQuantity(q) {
  if (q === undefined || q === null) return NaN;
  const m = String(q).match(/^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/);
  if (!m) return NaN;
  const mult = { n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 }[m[2]] || 1;
  return Number(m[1]) * mult;
}

const METRIC_SOURCES = { Resource: "resource", ContainerResource: "containerResource", Pods: "pods",
  Object: "object", External: "external" };
const FIELD_LABELS = { averageUtilization: "utilization", averageValue: "average value", value: "value" };

// One metric of an autoscaler (an `autoscaling/v2` MetricSpec, the form PIDAutoscalers share)
// with its MetricStatus (`status.currentMetrics` lists them in the spec's order): its name, the
// target's field (averageUtilization, averageValue or value), the target and the current value
// of that field (NaN when the status has none).
function metricPair(spec, status) {
  const key = METRIC_SOURCES[spec.type] || Object.values(METRIC_SOURCES).find((f) => spec[f]);
  const src = (key && spec[key]) || {};
  const target = src.target || {};
  const field = target.type === "Utilization" || target.averageUtilization !== undefined ? "averageUtilization"
    : target.type === "AverageValue" || target.averageValue !== undefined ? "averageValue" : "value";
  const number = (v) => (field === "averageUtilization" ? (v === undefined ? NaN : Number(v)) : parseQuantity(v));
  const current = status && key && status[key] && status[key].current;
  let name = src.name || (src.metric && src.metric.name) || spec.type || "metric";
  if (key === "containerResource") name = `${src.name} (container ${src.container})`;
  if (key === "object" && src.describedObject) name += ` of ${src.describedObject.kind}/${src.describedObject.name}`;
  return { name, field, unit: field === "averageUtilization" ? "%" : "", target: number(target[field]),
    current: current ? number(current[field]) : NaN };
}

// An autoscaler's metrics: `autoscaling/v2` (and PIDAutoscaler) `spec.metrics`, or the
// `autoscaling/v1` CPU target.
function autoscalerMetrics(o) {
  const spec = o.spec || {}, status = o.status || {};
  if (spec.targetCPUUtilizationPercentage !== undefined) {
    return [{ name: "cpu", field: "averageUtilization", unit: "%", target: Number(spec.targetCPUUtilizationPercentage),
      current: status.currentCPUUtilizationPercentage ?? NaN }];
  }
  return (spec.metrics || []).map((m, i) => metricPair(m, (status.currentMetrics || [])[i]));
}

const metricLabel = (m) => `${m.name} ${FIELD_LABELS[m.field]}${m.unit ? " (" + m.unit + ")" : ""}`;

// HorizontalPodAutoscaler: each metric's target against its current value, and
// status.desiredReplicas against status.currentReplicas.
function hpaTracker(container) {
  return tracker(container, (st, o, t) => {
    const status = o.status || {};
    st.samples.push([t, status.desiredReplicas ?? NaN, status.currentReplicas ?? NaN, autoscalerMetrics(o)]);
  }, (st, now, t1) => {
    const [, desired, current, metrics] = st.samples[st.samples.length - 1];
    const out = [h("div", { class: "values" },
      valueBox("hpa-desired", "set point: status.desiredReplicas", fmt(desired)),
      valueBox("hpa-current", "process variable: status.currentReplicas", fmt(current)),
      valueBox("error-value", "error (desired − current)", fmt(desired - current))),
    legend(h("span", { class: "sp" }, "— — desiredReplicas"), h("span", { class: "pv1" }, "—— currentReplicas")),
    lineChart([{ name: "status.desiredReplicas", cls: "sp", points: column(st.samples, 1) },
      { name: "status.currentReplicas", cls: "pv1", points: column(st.samples, 2) }],
    st.opened, t1, { id: "hpa-replicas-chart", height: 160, events: st.events })];
    metrics.forEach((m, i) => {
      const pts = (f) => st.samples.map((r) => [r[0], r[3][i] ? r[3][i][f] : NaN]);
      out.push(h("h3", {}, `Metric ${i + 1}: ${metricLabel(m)}`),
        h("div", { class: "values" },
          valueBox(`hpa-target-${i}`, `set point: target ${FIELD_LABELS[m.field]}`, fmt(m.target)),
          valueBox(`hpa-current-${i}`, `process variable: current ${FIELD_LABELS[m.field]}`, fmt(m.current))),
        Number.isFinite(m.current) ? null
          : h("p", { class: "muted", id: `hpa-no-current-${i}` }, "No current value for it in status.currentMetrics."),
        legend(h("span", { class: "sp" }, "— — target"), h("span", { class: "pv1" }, "—— current")),
        lineChart([{ name: "target", cls: "sp", points: pts("target") }, { name: "current", cls: "pv1", points: pts("current") }],
          st.opened, t1, { id: `metric-chart-${i}`, height: 160, events: st.events }));
    });
    if (!metrics.length) out.push(h("p", { class: "muted" }, "No metrics in its spec."));
    return out;
  });
}

// PIDAutoscaler: the target metric against the current one, current and desired replicas, and
// the P, I and D terms and the output from its status.terms.
function pidTracker(container) {
  return tracker(container, (st, o, t) => {
    const status = o.status || {};
    const m = autoscalerMetrics(o)[0] || { target: NaN, current: NaN };
    st.samples.push([t, m.target, m.current, status.desiredReplicas ?? NaN, status.currentReplicas ?? NaN]);
  }, (st, now, t1) => {
    const status = st.last.status || {};
    const terms = status.terms || null;
    const m = autoscalerMetrics(st.last)[0] || { target: NaN, current: NaN, unit: "" };
    return [
      h("div", { class: "values" },
        valueBox("pid-target", `set point: target metric${m.unit ? " (" + m.unit + ")" : ""}`, fmt(m.target)),
        valueBox("pid-current", "process variable: current metric", fmt(m.current)),
        valueBox("pid-replicas", "replicas (current → desired)", `${status.currentReplicas ?? "—"} → ${status.desiredReplicas ?? "—"}`)),
      terms ? h("div", { class: "values", id: "pid-terms" },
        valueBox("pid-p", "P term", fmt(terms.p)), valueBox("pid-i", "I term", fmt(terms.i)),
        valueBox("pid-d", "D term", fmt(terms.d)), valueBox("pid-output", "output", fmt(terms.output)))
        : h("p", { class: "muted", id: "pid-no-terms" }, "No P, I, D terms in its status yet."),
      legend(h("span", { class: "sp" }, "— — target"), h("span", { class: "pv1" }, "—— current")),
      lineChart([{ name: "target", cls: "sp", points: column(st.samples, 1) }, { name: "current", cls: "pv1", points: column(st.samples, 2) }],
        st.opened, t1, { id: "metric-chart", events: st.events }),
      legend(h("span", { class: "sp" }, "— — desired replicas"), h("span", { class: "pv1" }, "—— current replicas")),
      lineChart([{ name: "desiredReplicas", cls: "sp", points: column(st.samples, 3) }, { name: "currentReplicas", cls: "pv1", points: column(st.samples, 4) }],
        st.opened, t1, { id: "pid-replicas-chart", height: 160, events: st.events })];
  });
}

// ---------------------------------------------------------------- Node

const NODE_CONDITIONS = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];
const LEVELS = { True: 1, False: 0, Unknown: 0.5 };

// Node: its conditions over time as step lanes (True 1, False 0, Unknown ½); the set point is
// Ready=True (and False for the pressure conditions). `#node-TYPE` holds each one's status.
function nodeTracker(container) {
  return tracker(container, (st, o, t) => {
    const conds = (o.status && o.status.conditions) || [];
    st.samples.push([t, Object.fromEntries(conds.map((c) => [c.type, c.status]))]);
  }, (st, now, t1) => {
    const current = st.samples[st.samples.length - 1][1];
    const types = [...NODE_CONDITIONS, ...Object.keys(current).filter((c) => !NODE_CONDITIONS.includes(c))];
    const want = (type) => (type === "Ready" ? 1 : type.endsWith("Pressure") ? 0 : undefined);
    return [
      h("div", { class: "values" },
        valueBox("sp-value", "set point: Ready", "True"),
        types.map((type) => valueBox(`node-${type}`, type === "Ready" ? "process variable: Ready" : type, current[type]))),
      legend(h("span", { class: "sp" }, "— — wanted (Ready True, pressure False)"),
        h("span", { class: "pv1" }, "—— status (high True, low False, half way Unknown)")),
      laneChart(types.map((type) => ({ name: type, want: want(type),
        points: st.samples.map(([t, c]) => [t, LEVELS[c[type]] ?? NaN]) })),
      st.opened, t1, { id: "conditions-chart", events: st.events })];
  });
}

// ---------------------------------------------------------------- by kind

// The tracker of a kind ([heading, make(container)]), or null when it has none.
export function trackerFor(k) {
  if (k.group === "apps" && ["deployments", "replicasets", "statefulsets"].includes(k.name)) {
    return ["Set point vs process variable", replicasTracker];
  }
  if (k.group === "batch" && k.name === "jobs") return ["Set point vs process variable (completions)", jobTracker];
  if (k.group === "autoscaling" && k.name === "horizontalpodautoscalers") {
    return ["Set point vs process variable (HorizontalPodAutoscaler)", hpaTracker];
  }
  if (k.kind === "PIDAutoscaler") return ["Set point vs process variable (PID)", pidTracker];
  if (k.group === "" && k.name === "nodes") return ["Conditions over time", nodeTracker];
  return null;
}
