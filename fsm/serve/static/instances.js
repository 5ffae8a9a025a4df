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
let sort = ""; // a column ("title"), "-" first for descending; "" newest first

function filters() {
  return {
    q: searchInput.value.trim(),
    machine: machineSelect.value,
    status: statusSelect.value,
    outcome: outcomeSelect.value,
    since: sinceInput.value,
    sort,
  };
}

// A value from the address that the select does not offer (?status=bogus) is kept as an option
// of its own, so that the server's refusal is what the page shows, not every instance.
function choose(select, value) {
  if (value && ![...select.options].some((o) => o.value === value)) {
    select.append(el("option", { value, class: "unknown", text: `${value} (unknown)` }));
  }
  select.value = value || "";
}

function progressText(progress) {
  const entries = Object.entries(progress || {});
  const text = entries.slice(0, 2).map(([key, value]) => `${key} ${value}`).join(" · ");
  const title = entries.map(([key, value]) => `${key}: ${value}`).join("\n");
  return el("span", { class: "progress", title: title || null, text: text || "-" });
}

// The version an instance runs under, when it is not the installed one: flagged (it migrates at
// its next run, or the installed definition cannot run it), with the whole text as the tooltip.
function versionNote(item) {
  if (!item.runs) return null;
  const migrates = item.runs.includes("migrates");
  return el("span", {
    class: migrates ? "muted version-note" : "bad-text version-note",
    title: item.runs,
    text: ` v${item.version}${migrates ? " (migrates)" : " (cannot run)"}`,
  });
}

function row(item) {
  const text = item.error || item.reason || "";
  // Long reasons are cut to a few lines; the whole text is the cell's tooltip.
  const reason = item.error
    ? el("span", { class: "bad-text clamp", text: item.error })
    : el("span", { class: "clamp" }, outcomeBadge(item.outcome), " ", item.reason || "");
  const failed = item.error || item.outcome === "failure";
  return el(
    "tr",
    { class: failed ? "row-failed" : null, "data-id": item.id, "data-machine": item.machine },
    el("td", { class: "col-id" }, item.id === "-" ? "-" : el("a", { href: instanceHref(item.machine, item.id), text: item.id })),
    el("td", { class: "col-title", title: item.title || null, text: item.title || "" }),
    el("td", { class: "col-machine" }, el("a", { href: machineHref(item.machine), text: item.machine }), versionNote(item)),
    el("td", { class: "col-state" }, badge(item.state, "state")),
    el("td", { class: "col-status" }, statusBadge(item.status)),
    el("td", { class: "col-progress" }, progressText(item.progress)),
    el("td", { class: "col-updated" }, when(item.updated)),
    el("td", { class: "reason col-outcome", title: text || null }, reason),
  );
}

function showCounts(counts) {
  const entries = Object.entries(counts || {}).sort(([a], [b]) => a.localeCompare(b));
  clear(document.getElementById("counts"), entries.map(([status, n]) => el("button", {
    type: "button",
    class: `count-chip${statusSelect.value === status ? " active" : ""}`,
    "data-status": status,
    title: statusSelect.value === status ? "show every status" : `show only ${status}`,
    onclick: () => {
      if (status === "-") return;
      choose(statusSelect, statusSelect.value === status ? "" : status);
      statusSelect.dispatchEvent(new Event("change"));
    },
  }, statusBadge(status === "-" ? "unreadable" : status), ` ${n}`)));
}

function showSort() {
  const column = sort.replace(/^-/, "") || "updated";
  const descending = sort ? sort.startsWith("-") : true;
  for (const th of document.querySelectorAll("#columns th[data-sort]")) {
    const active = th.dataset.sort === column;
    th.setAttribute("aria-sort", active ? (descending ? "descending" : "ascending") : "none");
  }
}

async function reload() {
  const query = new URLSearchParams({ limit: String(shown) });
  for (const [key, value] of Object.entries(filters())) if (value) query.set(key, value);
  let listing;
  try {
    listing = await api(`/api/instances?${query}`);
  } catch (error) { // a refused filter: say so, and list nothing rather than everything
    clear(rows, el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No list: the filter was refused (above)." })));
    clear(document.getElementById("counts"));
    count.textContent = "";
    more.hidden = true;
    throw error;
  }
  showCounts(listing.counts);
  showSort();
  clear(rows, listing.rows.map(row));
  if (!listing.rows.length) {
    const filtered = Object.values(filters()).some(Boolean);
    rows.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: filtered ? "No instance matches." : "No instances." })));
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
  choose(machineSelect, params.get("machine"));
  fillStatuses();
  choose(statusSelect, params.get("status"));
  choose(outcomeSelect, params.get("outcome"));
  sort = params.get("sort") || "";
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
  for (const th of document.querySelectorAll("#columns th[data-sort]")) {
    // Click: sort by the column; again: the other way round.
    const button = el("button", { type: "button", class: "sort", title: `sort by ${th.textContent.toLowerCase()}` }, th.textContent);
    th.replaceChildren(button);
    button.addEventListener("click", () => {
      const column = th.dataset.sort;
      const current = sort.replace(/^-/, "") || "updated";
      const descending = sort ? sort.startsWith("-") : true;
      const first = column === "updated" ? "-" : ""; // newest first, other columns A to Z
      sort = current === column ? (descending ? column : `-${column}`) : `${first}${column}`;
      if (sort === "-updated") sort = "";
      changed();
    });
  }
}

start().catch(showError);
