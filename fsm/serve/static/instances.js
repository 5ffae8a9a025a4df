// The instances page: every instance of every machine shown, newest first, searched (words in
// the id, title or reason) and filtered by machine, status, outcome and last update, the
// filters kept in the address; updated live.

import {
  api, badge, clear, el, fillNav, instanceHref, live, machineHref, outcomeBadge, showError,
  statusBadge, when,
} from "./common.js";

const PAGE = 100;
const machineSelect = document.getElementById("filter-machine");
const statusSelect = document.getElementById("filter-status");
const outcomeSelect = document.getElementById("filter-outcome");
const searchInput = document.getElementById("filter-q");
const sinceInput = document.getElementById("filter-since");
const rows = document.getElementById("rows");
const count = document.getElementById("count");
const more = document.getElementById("more");
let shown = PAGE;
let statusesByMachine = {};

function filters() {
  return {
    q: searchInput.value.trim(),
    machine: machineSelect.value,
    status: statusSelect.value,
    outcome: outcomeSelect.value,
    since: sinceInput.value,
  };
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
  const query = new URLSearchParams({ limit: String(shown) });
  for (const [key, value] of Object.entries(filters())) if (value) query.set(key, value);
  const listing = await api(`/api/instances?${query}`);
  clear(rows, listing.rows.map(row));
  if (!listing.rows.length) {
    const filtered = Object.values(filters()).some(Boolean);
    rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: filtered ? "No instance matches." : "No instances." })));
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
  outcomeSelect.value = params.get("outcome") || "";
  searchInput.value = params.get("q") || "";
  sinceInput.value = params.get("since") || "";
  const feed = live({}, reload, 500);
  const changed = () => { remember(); shown = PAGE; feed.reload(); };
  machineSelect.addEventListener("change", () => { fillStatuses(); changed(); });
  for (const control of [statusSelect, outcomeSelect, sinceInput]) control.addEventListener("change", changed);
  let typing = null; // a search runs once typing pauses
  searchInput.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(changed, 250); });
  document.getElementById("filters").addEventListener("submit", (event) => { event.preventDefault(); changed(); });
  document.getElementById("filter-clear").addEventListener("click", () => {
    for (const control of [searchInput, sinceInput]) control.value = "";
    for (const control of [machineSelect, statusSelect, outcomeSelect]) control.value = "";
    fillStatuses();
    changed();
  });
  more.addEventListener("click", () => { shown += PAGE; feed.reload(); });
}

start().catch(showError);
