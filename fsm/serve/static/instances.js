// The instances page: every instance of every machine shown, newest first, filtered by machine
// and status, updated live.

import {
  api, badge, clear, el, fillNav, instanceHref, live, machineHref, outcomeBadge, showError,
  statusBadge, when,
} from "./common.js";

const PAGE = 100;
const machineSelect = document.getElementById("filter-machine");
const statusSelect = document.getElementById("filter-status");
const rows = document.getElementById("rows");
const count = document.getElementById("count");
const more = document.getElementById("more");
let shown = PAGE;
let statusesByMachine = {};

function filters() {
  return { machine: machineSelect.value, status: statusSelect.value };
}

function progressText(progress) {
  const entries = Object.entries(progress || {});
  const text = entries.slice(0, 2).map(([key, value]) => `${key} ${value}`).join(" · ");
  const title = entries.map(([key, value]) => `${key}: ${value}`).join("\n");
  return el("span", { class: "progress", title: title || null, text: text || "-" });
}

function row(item) {
  const reason = item.error
    ? el("span", { class: "bad-text", text: item.error })
    : el("span", {}, outcomeBadge(item.outcome), " ", item.reason || "");
  const failed = item.error || item.outcome === "failure";
  return el(
    "tr",
    { class: failed ? "row-failed" : null, "data-id": item.id, "data-machine": item.machine },
    el("td", {}, item.id === "-" ? "-" : el("a", { href: instanceHref(item.machine, item.id), text: item.id })),
    el("td", {}, el("a", { href: machineHref(item.machine), text: item.machine })),
    el("td", {}, badge(item.state, "state")),
    el("td", {}, statusBadge(item.status)),
    el("td", {}, progressText(item.progress)),
    el("td", {}, when(item.updated)),
    el("td", { class: "reason" }, reason),
  );
}

async function reload() {
  const { machine, status } = filters();
  const query = new URLSearchParams({ limit: String(shown) });
  if (machine) query.set("machine", machine);
  if (status) query.set("status", status);
  const listing = await api(`/api/instances?${query}`);
  clear(rows, listing.rows.map(row));
  if (!listing.rows.length) {
    rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No instances." })));
  }
  count.textContent = `${listing.total} instance${listing.total === 1 ? "" : "s"}`;
  more.hidden = listing.total <= listing.rows.length;
}

function fillStatuses() {
  const machine = machineSelect.value;
  const keep = statusSelect.value;
  const statuses = machine
    ? statusesByMachine[machine] || []
    : [...new Set(Object.values(statusesByMachine).flat())].sort();
  clear(statusSelect, el("option", { value: "", text: "all" }), statuses.map((s) => el("option", { value: s, text: s })));
  statusSelect.value = statuses.includes(keep) ? keep : "";
}

function remember() {
  const query = new URLSearchParams(Object.entries(filters()).filter(([, v]) => v));
  history.replaceState(null, "", query.size ? `/?${query}` : "/");
}

async function start() {
  const machines = await fillNav();
  for (const m of machines) machineSelect.append(el("option", { value: m.name, text: m.name }));
  const views = await Promise.all(machines.map((m) => api(`/api/machines/${encodeURIComponent(m.name)}`)));
  statusesByMachine = Object.fromEntries(views.map((v) => [v.name, v.statuses]));
  const params = new URLSearchParams(location.search);
  machineSelect.value = params.get("machine") || "";
  fillStatuses();
  statusSelect.value = params.get("status") || "";
  const feed = live({}, reload, 500);
  machineSelect.addEventListener("change", () => { fillStatuses(); remember(); shown = PAGE; feed.reload(); });
  statusSelect.addEventListener("change", () => { remember(); shown = PAGE; feed.reload(); });
  more.addEventListener("click", () => { shown += PAGE; feed.reload(); });
}

start().catch(showError);
