// The console's charts, SVG drawn by hand: a step line chart of series over a time window,
// a stack of step lanes (one per condition) on a shared time axis, and an object's Events as
// markers on either's time axis. Times are milliseconds since the epoch; a value holds until
// the next sample (the charts are of sampled states, not of rates).

import { s } from "./dom.js";

// When an Event (core/v1, as the events table lists it) last happened, in ms since the epoch:
// its `lastTimestamp`, else its series' last observation, else its `eventTime`, else its
// `firstTimestamp`, else its creation. NaN when it carries no time at all.
export function eventTime(e) {
  const t = e.lastTimestamp || (e.series && e.series.lastObservedTime) || e.eventTime
    || e.firstTimestamp || (e.metadata && e.metadata.creationTimestamp);
  return t ? Date.parse(t) : NaN;
}

// Markers of `events` on the time axis `x` between `top` and `bottom`: one group per Event
// inside [t0, t1] (`.event-marker.event-Normal|.event-Warning`, `data-reason`, `data-type`,
// `data-time`, its reason and message in a `<title>` shown on hover). Events older than t0
// are left out; one a little after t1 (another clock) is drawn at t1.
function eventMarkers(events, t0, t1, x, top, bottom) {
  const g = s("g", { class: "events" });
  for (const e of events || []) {
    const t = eventTime(e);
    if (!Number.isFinite(t) || t < t0) continue;
    const type = e.type === "Warning" ? "Warning" : "Normal";
    const at = x(Math.min(t, t1));
    const count = e.series && e.series.count ? ` ×${e.series.count}` : e.count > 1 ? ` ×${e.count}` : "";
    g.append(s("g", { class: `event-marker event-${type}`, "data-reason": e.reason || "", "data-type": type,
      "data-time": new Date(t).toISOString() },
      s("title", {}, `${e.reason || "Event"} (${type}${count}) at ${new Date(t).toLocaleTimeString()}`
        + `${e.message ? ": " + e.message.trim() : ""}`),
      s("line", { x1: at.toFixed(1), x2: at.toFixed(1), y1: top, y2: bottom }),
      s("path", { d: `M${(at - 5).toFixed(1)},${top} h10 l-5,8 z` })));
  }
  return g;
}

// The `points` attribute of a step line through `points` ([[t, v]]; non-finite values are
// skipped), held to t1.
function stepPoints(points, x, y, t1) {
  const pts = [];
  let lastY = null;
  for (const [t, v] of points) {
    if (!Number.isFinite(v)) continue;
    const px = x(t).toFixed(1), py = y(v).toFixed(1);
    if (lastY !== null) pts.push(`${px},${lastY}`);
    pts.push(`${px},${py}`);
    lastY = py;
  }
  if (lastY !== null) pts.push(`${x(t1).toFixed(1)},${lastY}`);
  return pts.join(" ");
}

function timeAxis(svg, t0, t1, pad, width, height) {
  svg.append(s("line", { class: "axis", x1: pad.l, x2: width - pad.r, y1: height - pad.b, y2: height - pad.b }));
  svg.append(s("text", { x: width - pad.r, y: height - 6, "text-anchor": "end" }, `${Math.round((t1 - t0) / 1000)} s`));
  svg.append(s("text", { x: pad.l, y: height - 6 }, "0 s"));
}

// A step line chart of `series` ([{name, cls, points: [[t, v]]}]) over [t0, t1], from 0 to
// `max` (by default a little above the largest value), with `events` on its time axis.
export function lineChart(series, t0, t1, { width = 640, height = 220, id, events = [], max } = {}) {
  const pad = { l: 40, r: 12, t: 10, b: 24 };
  if (max === undefined) {
    max = 1;
    for (const sr of series) for (const [, v] of sr.points) if (Number.isFinite(v)) max = Math.max(max, v);
    max = Math.ceil(max * 1.15);
  }
  const span = Math.max(t1 - t0, 1);
  const x = (t) => pad.l + ((t - t0) / span) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / max) * (height - pad.t - pad.b);
  const svg = s("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, id: id || "" });
  const ticks = 4;
  for (let i = 0; i <= ticks; i++) {
    const v = (max * i) / ticks;
    svg.append(s("line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v) }));
    svg.append(s("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end" }, Number.isInteger(v) ? v : v.toFixed(1)));
  }
  svg.append(s("line", { class: "axis", x1: pad.l, x2: pad.l, y1: pad.t, y2: height - pad.b }));
  timeAxis(svg, t0, t1, pad, width, height);
  for (const sr of series) {
    const points = stepPoints(sr.points, x, y, t1);
    if (points) svg.append(s("polyline", { class: sr.cls, points, "data-series": sr.name }));
  }
  svg.append(eventMarkers(events, t0, t1, x, pad.t, height - pad.b));
  return svg;
}

// Conditions over [t0, t1], one lane each ([{name, points: [[t, v]], want}], v: 1 True,
// 0 False, 0.5 Unknown; `want` the value the lane should hold, drawn dashed), stacked on one
// time axis, with `events` across all lanes.
export function laneChart(lanes, t0, t1, { width = 640, lane = 36, id, events = [] } = {}) {
  const longest = Math.max(0, ...lanes.map((ln) => ln.name.length));
  const pad = { l: Math.max(80, Math.ceil(longest * 6.6) + 16), r: 12, t: 10, b: 24 };
  const height = pad.t + pad.b + lanes.length * lane;
  const span = Math.max(t1 - t0, 1);
  const x = (t) => pad.l + ((t - t0) / span) * (width - pad.l - pad.r);
  const svg = s("svg", { class: "chart lanes", width, height, viewBox: `0 0 ${width} ${height}`, id: id || "" });
  lanes.forEach((ln, i) => {
    const top = pad.t + i * lane + 8, bottom = pad.t + (i + 1) * lane - 6;
    const y = (v) => bottom - v * (bottom - top);
    if (i % 2 === 0) svg.append(s("rect", { class: "band", x: pad.l, y: pad.t + i * lane, width: width - pad.l - pad.r, height: lane }));
    svg.append(s("text", { x: pad.l - 8, y: (top + bottom) / 2 + 4, "text-anchor": "end" }, ln.name));
    if (ln.want !== undefined) {
      svg.append(s("line", { class: "sp", x1: pad.l, x2: width - pad.r, y1: y(ln.want), y2: y(ln.want), "data-want": ln.name }));
    }
    const points = stepPoints(ln.points, x, y, t1);
    if (points) svg.append(s("polyline", { class: "pv1", points, "data-series": ln.name }));
  });
  svg.append(s("line", { class: "axis", x1: pad.l, x2: pad.l, y1: pad.t, y2: height - pad.b }));
  timeAxis(svg, t0, t1, pad, width, height);
  svg.append(eventMarkers(events, t0, t1, x, pad.t, height - pad.b));
  return svg;
}
