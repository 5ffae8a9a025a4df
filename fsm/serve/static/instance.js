// The instance page: live diagram, status, outcome, legal control commands, journal, document.

import {
  ApiError, api, apiInstance, badge, clear, duration, el, fillNav, live, machineHref, outcomeBadge,
  pathParts, post, session, showError, statusBadge, svgElement, when,
} from "./common.js";
import { JsonTree } from "./json.js";

const COMMANDS = ["start", "pause", "resume", "stop"];
const [machine, id] = pathParts();
const base = apiInstance(machine, id);
const tree = new JsonTree(document.getElementById("document"), { openDepth: 1 });
let events = {}; // transition index -> event name, for the journal's guards
let stateDescriptions = {}; // state -> its description, for the summary as of a journal line
let mayControl = false;
let serverDrives = false;

function byId(name) {
  return document.getElementById(name);
}

// The summary card's facts: the instance now, or as of the journal line time travel shows.
function showFacts(facts) {
  byId("state").textContent = facts.state;
  byId("state-description").textContent = facts.state_description || "";
  clear(byId("status"), statusBadge(facts.status));
  const outcome = facts.outcome || facts.reason
    ? [outcomeBadge(facts.outcome), " ", el("span", { class: facts.outcome === "success" ? "" : "bad-text", text: facts.reason || "" })]
    : [el("span", { class: "muted", text: facts.final ? "-" : "not ended yet" })];
  clear(byId("outcome"), outcome);
  clear(byId("progress"), Object.entries(facts.summary || {}).flatMap(([key, value]) => [
    el("dt", { text: key }), el("dd", { text: value }),
  ]));
}

function showStatus(info) {
  if (travelFacts === null) showFacts(info);
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
  showActions(info);
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
  const wanted = COMMANDS.filter((c) => legal.includes(c));
  const current = [...byId("control-buttons").querySelectorAll("button")].map((b) => b.id.replace("control-", ""));
  if (wanted.length && current.join(" ") === wanted.join(" ")) {
    // The same commands: the buttons stay (one being clicked is not replaced under the pointer).
    for (const button of byId("control-buttons").querySelectorAll("button")) button.disabled = !mayControl;
    return;
  }
  const buttons = wanted.map((command) =>
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
  await send(command, `${base}/${command}`, {});
}

// What the last change asked for came to, when it was refused or failed: beside the controls,
// kept until the next one (the page's error line is cleared by every live reload).
function actionError(text) {
  const line = byId("action-error");
  line.textContent = text || "";
  line.hidden = !text;
}

// Every change the page asks for goes through here: the reason field rides along (the journal
// keeps it beside the actor, serve), the buttons wait for the answer, a refusal is shown.
async function send(what, path, body) {
  const reason = byId("control-reason").value.trim() || null;
  const buttons = byId("summary").querySelectorAll(".controls button");
  for (const button of buttons) button.disabled = true;
  try {
    const answer = await post(path, { ...body, reason });
    byId("control-reason").value = "";
    if (answer.instance) { // a fired event: its outcome, and the instance now
      showStatus(answer.instance);
      actionError(answer.outcome === "failed" ? `${what}: the step failed: ${answer.error}` : null);
    } else {
      showStatus(answer);
      actionError(null);
    }
    return answer;
  } catch (error) {
    actionError(error instanceof ApiError ? `${what}: ${error.message}` : String(error.message || error));
    await reload();
    return null;
  }
}

// Retry of an instance that ended failed, the machine's manual events, and its own commands
// (a form per command, its fields from the inputs' JSON Schema).
function showActions(info) {
  byId("retry").hidden = !info.retry;
  byId("control-retry").disabled = !mayControl;
  const manual = info.final ? [] : info.events.filter((e) => !e.auto);
  byId("fire").hidden = !manual.length;
  clear(byId("fire-buttons"), manual.map((e) => el("button", {
    type: "button",
    id: `fire-${e.event}`,
    class: "secondary",
    disabled: !mayControl || !e.enabled,
    title: `${e.description}${e.enabled ? "" : " (its guards do not hold now)"}`,
    onclick: () => fire(e.event),
    text: `Fire ${e.event}`,
  })));
  const commands = byId("commands");
  const shown = [...commands.children].map((form) => form.dataset.command).join(" ");
  if (shown === info.commands.map((c) => c.name).join(" ")) { // keep what is being typed
    for (const button of commands.querySelectorAll("button")) button.disabled = !mayControl;
    return;
  }
  clear(commands, info.commands.map(commandForm));
}

async function fire(event) {
  await send(`fire ${event}`, `${base}/events/${encodeURIComponent(event)}`, {});
}

async function retry() {
  const items = byId("retry-items").value.split(/[\s,]+/).filter(Boolean);
  if (await send("retry", `${base}/retry`, { items })) byId("retry-items").value = "";
}

function commandField(name, property, required) {
  const choices = property.enum || (property.anyOf || []).flatMap((p) => p.enum || []);
  const label = `${property.title || name}${required ? "" : " (optional)"}`;
  const input = choices.length
    ? el("select", { name }, required ? null : el("option", { value: "", text: "-" }),
      choices.map((c) => el("option", { value: String(c), selected: c === property.default, text: String(c) })))
    : el("input", { name, type: "text", required, placeholder: property.description || "" });
  return el("label", { title: property.description || "" }, label, input);
}

function commandForm(command) {
  const schema = command.input_schema || { properties: {} };
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {}).map(([name, property]) => commandField(name, property, required.has(name)));
  const form = el("form", { class: "action-form", "data-command": command.name, id: `command-${command.name}` },
    el("h3", { text: command.name.replaceAll("_", " "), title: command.description }),
    el("p", { class: "muted", text: command.description }),
    fields,
    el("button", { type: "submit", disabled: !mayControl, text: command.name.replaceAll("_", " ") }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const inputs = {};
    for (const [name, value] of new FormData(form)) if (String(value).trim() !== "") inputs[name] = String(value);
    if (await send(command.name, `${base}/commands/${encodeURIComponent(command.name)}`, { inputs })) form.reset();
  });
  return form;
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

// The value at a JSON Pointer (RFC 6901) in ``doc``; undefined when there is none.
function valueAt(doc, pointer) {
  if (pointer === "") return doc;
  let value = doc;
  for (const part of pointer.slice(1).split("/").map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"))) {
    if (value === null || typeof value !== "object" || !(part in value)) return undefined;
    value = value[part];
  }
  return value;
}

function cut(text) {
  return text.length > 60 ? text.slice(0, 57) + "..." : text;
}

// JSON Patch operations as lines: "+ /path = value", "− /path (was value)", "~ /path: before →
// after" when ``before`` (the document the patch applies to) is known.
function opsList(ops, before) {
  return el("ul", { class: "changes" }, ops.map((op) => {
    const after = op.value === undefined || op.op === "remove" ? "" : JSON.stringify(op.value);
    const old = before === undefined || op.op === "add" ? undefined : valueAt(before, op.path);
    const was = old === undefined ? "" : JSON.stringify(old);
    const kind = op.op === "add" ? "added" : op.op === "remove" ? "removed" : "replaced";
    const sign = op.op === "add" ? "+" : op.op === "remove" ? "−" : "~";
    const parts = [`${sign} ${op.path || "/"}`];
    if (op.op === "remove" && was) parts.push(el("span", { class: "muted", text: " (was " }), el("del", { text: cut(was) }), el("span", { class: "muted", text: ")" }));
    else if (was && after) parts.push(": ", el("del", { class: "before", text: cut(was) }), " → ", el("ins", { class: "after", text: cut(after) }));
    else if (after) parts.push(el("span", { class: "muted", text: ` = ${cut(after)}` }));
    return el("li", { class: kind, title: was ? `before: ${was}\nafter: ${after || "(removed)"}` : after }, parts);
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
      ? travelTo(Math.max(travel.line, line), Math.min(travel.line, line), { scroll: true })
      : travelTo(line, previousLine(line), { scroll: true });
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
    el("td", { class: "number", title: record.duration_ms !== undefined ? `${record.duration_ms} ms` : null, text: duration(record.duration_ms) }),
    el("td", { class: "notes" }, notes));
}

// The steps as a timeline, oldest first: each a bar as long as its share of the longest step,
// its duration as a person reads it, and what its agents said (their output is kept per step in
// the journal record; a step still running shows in the driver line until it is journaled).
function bar(percent) {
  const filled = el("span");
  filled.style.width = `${Math.max(1, percent).toFixed(1)}%`; // CSSOM: allowed by the page's CSP
  return el("span", { class: "step-bar" }, filled);
}

function showTimeline() {
  const steps = journal.filter(([, record]) => typeof record.duration_ms === "number");
  const longest = Math.max(1, ...steps.map(([, record]) => record.duration_ms));
  clear(byId("timeline"), steps.length ? steps.map(([line, record]) => {
    const agents = Array.isArray(record.agents) ? record.agents.filter((r) => r && typeof r === "object") : [];
    return el("li", {
      class: `step kind-${String(record.kind).replace(/[^a-z]/g, "")}${travel && travel.line === line ? " selected" : ""}`,
      "data-line": line,
      tabindex: 0,
      title: `line ${line}: ${record.kind} ${record.event || ""} (${moveOf(record)}), ${record.duration_ms} ms`,
      onclick: (event) => { if (!event.target.closest("details")) travelTo(line, previousLine(line), { scroll: true }).catch(showError); },
      onkeydown: (event) => { if (event.key === "Enter") travelTo(line, previousLine(line), { scroll: true }).catch(showError); },
    },
      el("span", { class: "step-name", text: `${record.event || record.kind} ` }),
      bar((100 * record.duration_ms) / longest),
      el("span", { class: "step-time", text: duration(record.duration_ms) }),
      agents.length ? el("details", { class: "step-output" }, el("summary", { text: `agent output (${agents.length})` }),
        agents.map((run) => el("pre", { text: [run.final_message, run.output && run.output !== run.final_message ? run.output : null].filter(Boolean).join("\n\n") || "(no output kept)" }))) : null);
  }) : el("li", { class: "muted", text: "no step yet" }));
}

function showJournal(history) {
  const lines = history.lines || [];
  journal = history.records.map((record, index) => [lines[index], record]).filter(([line]) => line !== undefined);
  const newest = history.records.map((record, index) => [record, lines[index]]).reverse();
  clear(byId("journal"), newest.map(([record, line]) => journalRow(record, line)));
  showTimeline();
  fillCompare();
  byId("journal-count").textContent = `(${history.more ? "latest " : ""}${history.records.length} records, newest first${history.more ? "; fsm history shows all" : ""})`;
}

// Time travel: the document and the diagram as of one journal record (rebuilt by the server
// from the journal's changes), and the changes between two records. Kept in the address
// (?line=N&from=M), so that a link opens the same view; live updates leave it as it is.
let travel = null; // { line, from } while the page shows an earlier version
let travelFacts = null; // the summary card's facts as of that version
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

async function travelTo(line, from, { scroll = false } = {}) {
  travel = { line, from: from ?? null };
  remember();
  const requests = [api(`${base}/versions/${line}`), api(`${base}/versions/${line}/diagram.svg`)];
  if (travel.from !== null) {
    requests.push(api(`${base}/changes?from=${travel.from}&to=${line}`));
    requests.push(api(`${base}/versions/${travel.from}`).catch(() => null)); // for the before values
  }
  const [version, svg, changes, earlier] = await Promise.all(requests);
  if (!travel || travel.line !== line) return; // another row was picked meanwhile
  travelFacts = {
    state: version.record.state || version.record.dest || "?",
    state_description: stateDescriptions[version.record.state || version.record.dest] || "",
    status: version.record.status,
    summary: version.summary || {},
    final: false,
  };
  showFacts(travelFacts);
  const note = byId("summary-when");
  note.hidden = false;
  note.textContent = `As of journal line ${line}; the controls act on the instance now.`;
  byId("summary").classList.add("travelling");
  byId("travel").hidden = false;
  byId("travel-line").textContent = String(line);
  const record = version.record;
  clear(byId("travel-step"), when(record.time), ` ${record.kind}${record.event ? " " + record.event : ""} `,
    el("span", { text: moveOf(record) }), record.actor ? ` by ${record.actor}` : "");
  const check = version.check;
  const shown = byId("travel-check");
  shown.textContent = check.verdict === "exact"
    ? "rebuilt from the journal's changes; it has the recorded hash"
    : check.verdict === "mismatch"
      ? `Warning: the journal does not rebuild this version (${check.reason}): fsm replay reports it as an error; what is shown may not be what was written`
      : `rebuilt: ${check.verdict}${check.reason ? ` (${check.reason})` : ""}`;
  // A rebuild that does not give the recorded version is the problem it is, not a footnote.
  shown.className = check.verdict === "mismatch" ? "error" : check.verdict === "exact" || check.verdict === "foreign" ? "muted" : "warning";
  byId("diagram-when").textContent = `as of line ${line}`;
  byId("document-when").textContent = `as of line ${line}`;
  clear(byId("diagram"), svgElement(svg));
  byId("diagram").dataset.state = record.state || record.dest || "";
  if (version.document === null) clear(byId("document"), el("p", { class: "muted", text: check.reason || "not known" }));
  else tree.show(version.document);
  showChanges(changes, earlier && earlier.document ? earlier.document : undefined);
  fillCompare();
  for (const row of byId("journal").querySelectorAll("tr")) {
    const shown = Number(row.dataset.line);
    row.classList.toggle("selected", shown === line);
    row.classList.toggle("compared", shown === travel.from);
  }
  for (const step of byId("timeline").querySelectorAll("li")) step.classList.toggle("selected", Number(step.dataset.line) === line);
  // What was clicked is shown where the eye is: the summary card, moved with it, then the diff.
  if (scroll) byId("summary").scrollIntoView({ block: "start", behavior: "smooth" });
}

function showChanges(changes, before) {
  const target = byId("travel-changes");
  if (!changes) {
    clear(target);
    return;
  }
  const heading = el("h3", { text: `Changes from line ${changes.from} to line ${changes.to}` });
  if (!changes.known) clear(target, heading, el("p", { class: "muted", text: `not known: ${changes.reason}` }));
  else if (!changes.changes.length) clear(target, heading, el("p", { class: "muted", text: "none: the two versions are the same" }));
  else clear(target, heading, opsList(changes.changes, before));
}

async function backToNow() {
  travel = null;
  travelFacts = null;
  byId("summary-when").hidden = true;
  byId("summary").classList.remove("travelling");
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
  stateDescriptions = Object.fromEntries(view.states.map((s) => [s.name, s.description]));
  byId("control-retry").addEventListener("click", () => retry().catch(showError));
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
