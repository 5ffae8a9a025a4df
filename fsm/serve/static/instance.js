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
  shownInfo = info;
  showDriver(info);
  showControls(info.control);
  document.title = `${id} · ${info.state} · fsm serve`;
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
  } else {
    clear(line, el("span", { class: info.status === "running" ? "bad-text" : "muted", text: "nobody is driving this instance: " }),
      el("code", { text: info.run_command }), " would");
  }
}

let shownInfo = null;
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

// What the step changed: its patch (or the paths alone when it was large).
function changeList(record) {
  const ops = Array.isArray(record.changes) ? record.changes : null;
  const paths = ops ? ops.map((op) => op.path) : Array.isArray(record.changed) ? record.changed : [];
  if (!paths.length) return el("span", { class: "muted", text: ops ? "nothing" : "" });
  if (ops && ops.length === 1 && ops[0].path === "") return el("span", { class: "muted", text: "the whole document" });
  return el("ul", { class: "changes" }, (ops || paths.map((path) => ({ op: "changed", path }))).map((op) => {
    const shown = op.value === undefined ? "" : JSON.stringify(op.value);
    return el("li", { title: shown }, `${op.op === "add" ? "+" : op.op === "remove" ? "−" : "~"} ${op.path || "/"}`,
      shown ? el("span", { class: "muted", text: ` = ${shown.length > 60 ? shown.slice(0, 57) + "..." : shown}` }) : null);
  }));
}

function journalRow(record, line) {
  const kind = record.kind || "?";
  const move = record.kind === "control" && record.status_from
    ? `${record.status_from} → ${record.status_to}`
    : `${record.source ?? "-"} → ${record.dest ?? "-"}`;
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
  return el("tr", { class: `kind-${kind.replace(/[^a-z]/g, "")}`, "data-line": line ?? null },
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
  const newest = history.records.map((record, index) => [record, lines[index]]).reverse();
  clear(byId("journal"), newest.map(([record, line]) => journalRow(record, line)));
  byId("journal-count").textContent = `(${history.more ? "latest " : ""}${history.records.length} records, newest first${history.more ? "; fsm history shows all" : ""})`;
}

async function reload() {
  const [info, history, documentData, svg] = await Promise.all([
    api(base),
    api(`${base}/history?limit=200`),
    api(`${base}/document`),
    api(`${base}/diagram.svg`),
  ]);
  showStatus(info);
  showJournal(history);
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
  mayControl = (await session()).control;
  const view = await api(`/api/machines/${encodeURIComponent(machine)}`);
  events = Object.fromEntries(view.transitions.map((t) => [t.index, t.event]));
  live({ machine, instance: id }, reload);
}

start().catch(showError);
