// The instance page: live diagram, status, outcome, legal control commands, journal, document.

import {
  ApiError, api, apiInstance, badge, clear, el, fillNav, live, machineHref, outcomeBadge, pathParts,
  post, session, showError, statusBadge, svgElement, when,
} from "./common.js";
import { JsonTree } from "./json.js";

const COMMANDS = ["start", "pause", "resume", "stop"];
const [machine, id] = pathParts();
const base = apiInstance(machine, id);
const tree = new JsonTree(document.getElementById("document"), { openDepth: 1 });
let events = {}; // transition index -> event name, for the journal's guards
let mayControl = false;
let serverDrives = false;

function byId(name) {
  return document.getElementById(name);
}

function showStatus(info) {
  byId("state").textContent = info.state;
  byId("state-description").textContent = info.state_description;
  clear(byId("status"), statusBadge(info.status));
  const outcome = info.outcome || info.reason
    ? [outcomeBadge(info.outcome), " ", el("span", { class: info.outcome === "success" ? "" : "bad-text", text: info.reason || "" })]
    : [el("span", { class: "muted", text: info.final ? "-" : "not ended yet" })];
  clear(byId("outcome"), outcome);
  clear(byId("progress"), Object.entries(info.summary).flatMap(([key, value]) => [
    el("dt", { text: key }), el("dd", { text: value }),
  ]));
  clear(byId("agent"), info.last_agent
    ? agentRun(info.last_agent)
    : el("span", { class: "muted", text: "none ran" }));
  const enabled = info.events.filter((e) => e.enabled);
  clear(byId("events"), enabled.length
    ? enabled.map((e) => badge(e.auto ? e.event : `${e.event} (manual)`, "event"))
    : el("span", { class: "muted", text: "none" }));
  byId("document-path").textContent = info.document;
  showVersion(info.definition);
  shownInfo = info;
  showDriver(info);
  showControls(info.control);
  document.title = `${id} · ${info.state} · fsm serve`;
}

// The version of its machine the instance runs under, flagged when the installed one differs.
function showVersion(definition) {
  const line = byId("version");
  if (!definition) {
    clear(line, el("span", { class: "muted", text: "-" }));
    return;
  }
  const installed = `${definition.installed_version} (graph ${definition.installed_graph.slice(0, 8)})`;
  if (definition.graph === null) {
    clear(line, el("span", { class: "muted", text: `not recorded; installed ${installed}` }));
    return;
  }
  const runs = `${definition.version} (graph ${definition.graph.slice(0, 8)})`;
  if (definition.graph === definition.installed_graph) {
    clear(line, runs);
  } else if (definition.problem) {
    clear(line, el("span", { class: "bad-text", text: `${runs}: ${definition.problem}` }));
  } else if (definition.migrates) {
    clear(line, `${runs}; its next run migrates it to ${installed}`);
  } else {
    clear(line, `${runs}; the installed ${installed} runs it`);
  }
}

// Who drives the instance: the run's heartbeat, or the command that would drive it.
function showDriver(info) {
  const driver = info.driver;
  const line = byId("driver");
  if (driver) {
    const doing = driver.action && driver.action_started
      ? `, action ${driver.action} for ${Math.max(0, Math.round(Date.now() / 1000 - driver.action_started))} s`
      : "";
    line.dataset.since = driver.action_started || "";
    clear(line, `driven by ${driver.driver} (pid ${driver.pid} on ${driver.host})${doing}`);
  } else if (info.final) {
    clear(line, el("span", { class: "muted", text: "ended: nothing to drive" }));
  } else if (serverDrives) {
    clear(line, el("span", { class: "muted", text: "nobody is driving this instance now: this server (fsm serve --drive) drives it whenever it is runnable" }));
  } else {
    clear(line, el("span", { class: info.status === "running" ? "bad-text" : "muted", text: "nobody is driving this instance: " }),
      el("code", { text: info.run_command }), " would");
  }
}

let shownInfo = null;

// A heartbeat changes without the document changing (an action starts, a run is killed), so
// the change feed does not tell it: while the instance has not ended its status is asked again
// every few seconds (not while the tab is hidden), and the action's age counts up every second.
const DRIVER_POLL_MS = 2000;
function watchDriver() {
  setInterval(() => { if (shownInfo && shownInfo.driver) showDriver(shownInfo); }, 1000);
  setInterval(async () => {
    if (!shownInfo || shownInfo.final || document.hidden) return;
    try {
      showStatus(await api(base));
    } catch {
      // the live feed's next reload shows the error
    }
  }, DRIVER_POLL_MS);
}
// The action's duration counts up between updates.
setInterval(() => { if (shownInfo && shownInfo.driver) showDriver(shownInfo); }, 1000);

function showControls(legal) {
  const buttons = COMMANDS.filter((c) => legal.includes(c)).map((command) =>
    el("button", {
      type: "button",
      id: `control-${command}`,
      class: command === "stop" ? "danger" : null,
      disabled: !mayControl,
      onclick: () => control(command),
      text: command[0].toUpperCase() + command.slice(1),
    }));
  clear(byId("control-buttons"), buttons.length ? buttons : el("span", { class: "muted", text: "no control command is legal now" }));
  byId("control-note").textContent = mayControl || !buttons.length
    ? ""
    : "Open the address fsm serve printed (with its token) to use these.";
}

async function control(command) {
  if (command === "stop" && !confirm(`Stop ${id} for good?`)) return;
  const reason = byId("control-reason").value.trim() || null;
  for (const button of byId("control-buttons").querySelectorAll("button")) button.disabled = true;
  try {
    showStatus(await post(`${base}/${command}`, { reason }));
    byId("control-reason").value = "";
    showError(null);
  } catch (error) {
    showError(error instanceof ApiError ? `${command}: ${error.message}` : error);
    await reload();
  }
}

// One agent run of a step (the record's "agents" entries): who, how it ended, what it changed,
// what it cost, and its final message behind a toggle.
function agentRun(run) {
  const ended = run.ok
    ? (run.exit_reason && run.exit_reason !== "completed" ? run.exit_reason : "completed")
    : `failed: ${run.exit_reason || run.reason || `exit ${run.exit_code}`}`;
  const facts = [`${run.tool}${run.version ? " " + run.version : ""} (${run.mode}) ${ended}`];
  if (Array.isArray(run.files_changed) && run.files_changed.length) facts.push(`changed ${run.files_changed.join(", ")}`);
  const usage = run.usage || {};
  const tokens = [];
  if (usage.input_tokens !== undefined) tokens.push(`${usage.input_tokens} tokens in${usage.cached_input_tokens ? ` (${usage.cached_input_tokens} cached)` : ""}`);
  if (usage.output_tokens !== undefined) tokens.push(`${usage.output_tokens} out`);
  if (typeof usage.cost_usd === "number") tokens.push(`$${usage.cost_usd.toFixed(4)}`);
  if (usage.turns !== undefined) tokens.push(`${usage.turns} turns`);
  if (tokens.length) facts.push(tokens.join(", "));
  const parts = [el("span", { class: `agent-run ${run.ok ? "" : "bad-text"}`, text: facts.join("; ") })];
  if (run.warning) parts.push(el("span", { class: "muted", text: ` (${run.warning})` }));
  if (run.final_message) parts.push(el("details", {}, el("summary", { text: "final message" }), el("pre", { text: run.final_message })));
  return el("div", { class: "agent" }, parts);
}

function guardChips(record) {
  const guards = record.guards || [];
  if (!guards.length) return [];
  const chips = guards.map((g) => el("span", {
    class: `chip ${g.result === true ? "good" : ""}`,
    title: `transition ${g.transition} (${events[g.transition] || "?"}): ${g.result}`,
    text: `${g.result === true ? "✓" : g.result === false ? "✗" : "?"} ${g.guard}`,
  }));
  // Guards are collapsed: the summary says how many held.
  const held = guards.filter((g) => g.result === true).length;
  return [el("details", { class: "guards" }, el("summary", { text: `${held}/${guards.length} guards held` }), chips)];
}

// JSON Patch operations as lines: "+ /path = value", "− /path", "~ /path = value".
function opsList(ops) {
  return el("ul", { class: "changes" }, ops.map((op) => {
    const shown = op.value === undefined || op.op === "remove" ? "" : JSON.stringify(op.value);
    const kind = op.op === "add" ? "added" : op.op === "remove" ? "removed" : "replaced";
    return el("li", { class: kind, title: shown }, `${op.op === "add" ? "+" : op.op === "remove" ? "−" : "~"} ${op.path || "/"}`,
      shown ? el("span", { class: "muted", text: ` = ${shown.length > 60 ? shown.slice(0, 57) + "..." : shown}` }) : null);
  }));
}

// What the step changed: its patch (or the paths alone when it was large).
function changeList(record) {
  const ops = Array.isArray(record.changes) ? record.changes : null;
  const paths = ops ? ops.map((op) => op.path) : Array.isArray(record.changed) ? record.changed : [];
  if (!paths.length) return el("span", { class: "muted", text: ops ? "nothing" : "" });
  if (ops && ops.length === 1 && ops[0].path === "") return el("span", { class: "muted", text: "the whole document" });
  return opsList(ops || paths.map((path) => ({ op: "changed", path })));
}

function moveOf(record) {
  return record.kind === "control" && record.status_from
    ? `${record.status_from} → ${record.status_to}`
    : `${record.source ?? "-"} → ${record.dest ?? "-"}`;
}

function journalRow(record, line) {
  const kind = record.kind || "?";
  const move = moveOf(record);
  const notes = [];
  if (record.error) {
    notes.push(el("span", { class: "bad-text", text: `${record.action ? record.action + ": " : ""}${record.error}` }));
    if (record.traceback) notes.push(el("details", {}, el("summary", { text: "traceback" }), el("pre", { text: record.traceback })));
  }
  if (record.reason) notes.push(el("span", { text: record.reason }));
  if (Array.isArray(record.agents)) notes.push(...record.agents.filter((r) => r && typeof r === "object").map(agentRun));
  const actions = Array.isArray(record.actions) ? record.actions.join(", ") : record.action || "";
  const marks = [];
  if (record.merged) marks.push(badge("merged with another writer", "merged"));
  if (record.actor === "external") marks.push(badge("another program", "external"));
  const classes = [`kind-${kind.replace(/[^a-z]/g, "")}`];
  if (travel && line === travel.line) classes.push("selected");
  if (travel && line === travel.from) classes.push("compared");
  const pick = (event) => {
    if (line === undefined || event.target.closest("details, a")) return;
    // Shift: the changes between the step shown and this one, the later of the two shown.
    const shown = event.shiftKey && travel && travel.line !== line
      ? travelTo(Math.max(travel.line, line), Math.min(travel.line, line))
      : travelTo(line, previousLine(line));
    shown.catch(showError);
  };
  return el("tr", {
    class: classes.join(" "),
    "data-line": line ?? null,
    tabindex: 0,
    title: "the document and the diagram as of this step (shift-click: the changes since the selected one)",
    onclick: pick,
    onmousedown: (event) => { if (event.shiftKey) event.preventDefault(); }, // no text selected
    onkeydown: (event) => { if (event.key === "Enter") pick(event); },
  },
    el("td", {}, when(record.time)),
    el("td", {}, badge(kind, `kind-${kind.replace(/[^a-z]/g, "")}`), marks),
    el("td", { text: record.event || "" }),
    el("td", { text: move }),
    el("td", {}, changeList(record), guardChips(record)),
    el("td", { text: actions }),
    el("td", { text: record.actor || "" }),
    el("td", { class: "number", text: record.duration_ms !== undefined ? `${record.duration_ms} ms` : "" }),
    el("td", { class: "notes" }, notes));
}

function showJournal(history) {
  const lines = history.lines || [];
  journal = history.records.map((record, index) => [lines[index], record]).filter(([line]) => line !== undefined);
  const newest = history.records.map((record, index) => [record, lines[index]]).reverse();
  clear(byId("journal"), newest.map(([record, line]) => journalRow(record, line)));
  fillCompare();
  byId("journal-count").textContent = `(${history.more ? "latest " : ""}${history.records.length} records, newest first${history.more ? "; fsm history shows all" : ""})`;
}

// Time travel: the document and the diagram as of one journal record (rebuilt by the server
// from the journal's changes), and the changes between two records. Kept in the address
// (?line=N&from=M), so that a link opens the same view; live updates leave it as it is.
let travel = null; // { line, from } while the page shows an earlier version
let journal = []; // [line, record] of the records shown, oldest first

function previousLine(line) {
  const index = journal.findIndex(([shown]) => shown === line);
  return index > 0 ? journal[index - 1][0] : null;
}

function recordLabel(line, record) {
  return `${line}: ${record.kind}${record.event ? " " + record.event : ""} (${moveOf(record)})`;
}

function fillCompare() {
  const options = (selected) => journal.map(([line, record]) =>
    el("option", { value: String(line), selected: line === selected, text: recordLabel(line, record) }));
  clear(byId("travel-from"), el("option", { value: "", text: "-" }), options(travel ? travel.from : null));
  clear(byId("travel-to"), options(travel ? travel.line : null));
}

function remember() {
  const query = new URLSearchParams();
  if (travel) {
    query.set("line", String(travel.line));
    if (travel.from !== null) query.set("from", String(travel.from));
  }
  history.replaceState(null, "", query.size ? `?${query}` : location.pathname);
}

async function travelTo(line, from) {
  travel = { line, from: from ?? null };
  remember();
  const requests = [api(`${base}/versions/${line}`), api(`${base}/versions/${line}/diagram.svg`)];
  if (travel.from !== null) requests.push(api(`${base}/changes?from=${travel.from}&to=${line}`));
  const [version, svg, changes] = await Promise.all(requests);
  if (!travel || travel.line !== line) return; // another row was picked meanwhile
  byId("travel").hidden = false;
  byId("travel-line").textContent = String(line);
  const record = version.record;
  clear(byId("travel-step"), when(record.time), ` ${record.kind}${record.event ? " " + record.event : ""} `,
    el("span", { text: moveOf(record) }), record.actor ? ` by ${record.actor}` : "");
  const check = version.check;
  byId("travel-check").textContent = check.verdict === "exact"
    ? "rebuilt from the journal's changes; it has the recorded hash"
    : `rebuilt: ${check.verdict}${check.reason ? ` (${check.reason})` : ""}`;
  byId("diagram-when").textContent = `as of line ${line}`;
  byId("document-when").textContent = `as of line ${line}`;
  clear(byId("diagram"), svgElement(svg));
  byId("diagram").dataset.state = record.state || record.dest || "";
  if (version.document === null) clear(byId("document"), el("p", { class: "muted", text: check.reason || "not known" }));
  else tree.show(version.document);
  showChanges(changes);
  fillCompare();
  for (const row of byId("journal").querySelectorAll("tr")) {
    const shown = Number(row.dataset.line);
    row.classList.toggle("selected", shown === line);
    row.classList.toggle("compared", shown === travel.from);
  }
}

function showChanges(changes) {
  const target = byId("travel-changes");
  if (!changes) {
    clear(target);
    return;
  }
  const heading = el("h3", { text: `Changes from line ${changes.from} to line ${changes.to}` });
  if (!changes.known) clear(target, heading, el("p", { class: "muted", text: `not known: ${changes.reason}` }));
  else if (!changes.changes.length) clear(target, heading, el("p", { class: "muted", text: "none: the two versions are the same" }));
  else clear(target, heading, opsList(changes.changes));
}

async function backToNow() {
  travel = null;
  remember();
  byId("travel").hidden = true;
  byId("diagram-when").textContent = "now";
  byId("document-when").textContent = "now";
  for (const row of byId("journal").querySelectorAll("tr")) row.classList.remove("selected", "compared");
  await reload();
}

async function reload() {
  const now = travel === null;
  const [info, history, documentData, svg] = await Promise.all([
    api(base),
    api(`${base}/history?limit=200`),
    now ? api(`${base}/document`) : null,
    now ? api(`${base}/diagram.svg`) : null,
  ]);
  showStatus(info);
  showJournal(history);
  if (!now) return; // the page shows an earlier version: the document and diagram stay
  tree.show(documentData);
  const diagram = byId("diagram");
  clear(diagram, svgElement(svg));
  diagram.dataset.state = info.state;
}

async function start() {
  const link = byId("machine-link");
  link.href = machineHref(machine);
  link.textContent = machine;
  byId("instance-id").textContent = id;
  fillNav().catch(showError);
  const granted = await session();
  mayControl = granted.control;
  serverDrives = granted.drives > 0;
  const view = await api(`/api/machines/${encodeURIComponent(machine)}`);
  events = Object.fromEntries(view.transitions.map((t) => [t.index, t.event]));
  byId("travel-back").addEventListener("click", () => backToNow().catch(showError));
  const compare = () => {
    const to = Number(byId("travel-to").value);
    const from = byId("travel-from").value;
    travelTo(to, from === "" ? null : Number(from)).catch(showError);
  };
  byId("travel-from").addEventListener("change", compare);
  byId("travel-to").addEventListener("change", compare);
  const params = new URLSearchParams(location.search);
  if (params.get("line")) {
    const from = params.get("from");
    travel = { line: Number(params.get("line")), from: from ? Number(from) : null };
  }
  watchDriver();
  live({ machine, instance: id }, async () => {
    await reload();
    if (travel && byId("travel").hidden) await travelTo(travel.line, travel.from); // opened with ?line=
  });
}

start().catch(showError);
