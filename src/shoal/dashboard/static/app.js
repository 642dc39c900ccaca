// shoal dashboard: polls /api/report (the scheduler's last report) and renders it. No libraries;
// every value goes through text nodes; no HTML is ever parsed from data.
"use strict";

const POLL_MS = 2000;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

function fmtNum(v) { return v === null || v === undefined ? "∞" : String(Math.round(v * 100) / 100); }

function duration(s) {
  if (s === null || s === undefined) return "-";
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d" + Math.floor((s % 86400) / 3600) + "h";
}

function hue(name) {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) % 360;
  return h;
}

function queueColor(name, light) { return `hsl(${hue(name)}, 55%, ${light ? 72 : 48}%)`; }

function replaceBody(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
}

function renderQueues(report) {
  const queues = report.queues || [];
  const scale = Math.max(1, ...queues.map(q => Math.max(q.gpu.allocated, q.gpu.fairShare, q.gpu.quota || 0,
    q.gpu.limit || 0, q.gpu.requested)));
  const pct = v => (100 * v / scale).toFixed(2) + "%";
  const rows = queues.map(q => {
    const g = q.gpu;
    const bar = el("div", { class: "bar", title: `${q.name}: ${g.allocated} of fair share ${g.fairShare}` },
      el("div", { class: "alloc", style: `width:${pct(g.allocatedWhole)}` }),
      el("div", { class: "frac", style: `left:${pct(g.allocatedWhole)};width:${pct(g.allocatedFractional)}` }));
    if (g.quota !== null) bar.appendChild(el("div", { class: "m quota", style: `left:${pct(g.quota)}` }));
    bar.appendChild(el("div", { class: "m share", style: `left:${pct(g.fairShare)}` }));
    if (g.limit !== null) bar.appendChild(el("div", { class: "m limit", style: `left:${pct(g.limit)}` }));
    return el("tr", { "data-queue": q.name },
      el("td", { style: `padding-left:${8 + 16 * q.depth}px` }, q.name),
      el("td", {}, bar),
      el("td", { class: "num" }, fmtNum(g.allocated) + (g.allocatedFractional ? ` (${fmtNum(g.allocatedFractional)} frac)` : "")),
      el("td", { class: "num" }, fmtNum(g.fairShare)), el("td", { class: "num" }, fmtNum(g.quota)),
      el("td", { class: "num" }, fmtNum(g.limit)), el("td", { class: "num" }, fmtNum(g.weight)),
      el("td", { class: "num" }, q.runningGangs), el("td", { class: "num" }, q.pendingGangs));
  });
  replaceBody(document.getElementById("queues"), rows);
}

function renderPending(report) {
  const at = report.time;
  const rows = (report.pending || []).map(p => {
    const why = el("td", { class: "why" });
    const blockers = p.blockers && p.blockers.length ? p.blockers : [{ kind: (p.reasons || [])[0] || "", text: p.summary }];
    for (const b of blockers) why.appendChild(el("div", {}, el("span", { class: "kind" }, b.kind || ""), b.text));
    const eta = p.eta === null || p.eta === undefined ? "-" : (p.eta - at < 1 ? "next cycle" : "in " + duration(p.eta - at));
    return el("tr", { "data-gang": `${p.namespace}/${p.name}` },
      el("td", { class: "num" }, p.position), el("td", {}, `${p.namespace}/${p.name}`), el("td", {}, p.queue),
      el("td", { class: "num" }, `${p.pendingPods}/${p.minMember}`), el("td", { class: "num" }, fmtNum(p.request.gpu)),
      el("td", {}, duration(p.waitingSeconds)), el("td", { class: "eta" }, eta), why);
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "8", class: "empty" }, "no pending gangs")));
  replaceBody(document.getElementById("pending"), rows);
}

function renderNodes(report) {
  const box = document.getElementById("nodes");
  const nodes = (report.nodes || []).filter(n => n.gpus > 0);
  box.replaceChildren(...nodes.map(n => {
    const cells = el("div", { class: "cells" });
    for (const c of n.cells) {
      const used = c.pods.reduce((s, p) => s + p.portion, 0);
      const who = c.pods.map(p => `${p.namespace}/${p.pod} (${p.queue}) ${p.portion}`).join("\n") || "free";
      const cell = el("div", { class: "cell" + (c.pods.some(p => p.releasing) ? " releasing" : ""), title: who });
      if (c.pods.length) {
        cell.appendChild(el("div", { class: "fill", style: `height:${Math.min(100, used * 100)}%;background:${queueColor(c.pods[0].queue, c.shared)}` }));
      }
      cells.appendChild(cell);
    }
    return el("div", { class: "node" + (n.ready ? "" : " down"), "data-node": n.name }, el("div", { class: "name", title: n.name }, n.name), cells);
  }));
  if (!nodes.length) box.replaceChildren(el("span", { class: "empty" }, "no GPU nodes"));
}

function renderEvictions(report) {
  const rows = (report.evictions || []).slice(0, 20).map(e =>
    el("tr", {}, el("td", {}, duration(report.time - e.time) + " ago"), el("td", {}, `${e.namespace}/${e.pod}`),
      el("td", {}, e.action), el("td", {}, e.reason)));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "none")));
  replaceBody(document.getElementById("evictions"), rows);
}

function renderLatency(report) {
  const svg = document.getElementById("latency");
  const pts = report.latency || [];
  const w = 420, h = 120, ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  if (!pts.length) return;
  const max = Math.max(...pts.map(p => p[1]), 0.001);
  const d = pts.map((p, i) => `${i ? "L" : "M"}${(i / Math.max(pts.length - 1, 1) * (w - 10) + 5).toFixed(1)},${(h - 5 - p[1] / max * (h - 15)).toFixed(1)}`).join(" ");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", d); path.setAttribute("fill", "none"); path.setAttribute("stroke", "#3b82c4"); path.setAttribute("stroke-width", "1.5");
  svg.appendChild(path);
  const last = pts[pts.length - 1][1];
  document.getElementById("latency-text").textContent =
    `last ${(last * 1000).toFixed(1)} ms, max ${(max * 1000).toFixed(1)} ms over the last ${pts.length} cycles`;
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const resp = await fetch("/api/report", { cache: "no-store" });
    if (!resp.ok) throw new Error(resp.status === 503 ? "waiting for the first cycle" : "HTTP " + resp.status);
    const report = await resp.json();
    renderQueues(report); renderPending(report); renderNodes(report); renderEvictions(report); renderLatency(report);
    const n = (report.pending || []).length;
    status.textContent = `${report.scheduler} · cycle ${report.cycle} · ${n} pending gang${n === 1 ? "" : "s"} · ` +
      `updated ${new Date(report.time * 1000).toLocaleTimeString()}`;
    document.body.dataset.cycle = report.cycle;
  } catch (err) {
    status.textContent = "no report: " + err.message;
  }
}

refresh();
setInterval(refresh, POLL_MS);
