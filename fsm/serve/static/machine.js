// The machine page: diagram, states, transitions with guards and actions, control commands,
// options with defaults, creation inputs, and the JSON Schema of the document.

import {
  api, badge, clear, el, fillNav, instanceHref, pathParts, post, session, showError, svgElement,
} from "./common.js";
import { JsonTree } from "./json.js";

const [name] = pathParts();

function byId(id) {
  return document.getElementById(id);
}

function rowsOf(items, columns) {
  return items.map((item) => el("tr", {}, columns.map((column) => el("td", {}, column(item)))));
}

function named(items) {
  return items.flatMap((item, index) => [
    index ? ", " : "",
    el("span", { title: item.doc || null, class: "named", text: item.label || item.name }),
  ]);
}

function kind(state) {
  if (state.outcome) return badge(`final: ${state.outcome}`, state.outcome === "success" ? "good" : "bad");
  return state.name === byId("name").dataset.initial ? badge("initial", "event") : "";
}

function settingsRows(settings) {
  if (!settings || !settings.length) return [el("tr", {}, el("td", { colspan: 4, class: "muted", text: settings ? "none" : "any field of the document (see the schema)" }))];
  return rowsOf(settings, [
    (s) => el("code", { text: s.name }),
    (s) => s.type,
    (s) => (s.required ? badge("required", "bad") : el("code", { text: s.default })),
    (s) => s.help,
  ]);
}

function show(view) {
  document.title = `${view.name} · fsm serve`;
  byId("name").textContent = view.name;
  byId("name").dataset.initial = view.initial;
  byId("description").textContent = view.description;
  byId("version").textContent = `version ${view.version}`;
  byId("source").textContent = view.source;
  byId("instances-link").href = `/?machine=${encodeURIComponent(view.name)}`;
  for (const span of document.querySelectorAll(".machine-name")) span.textContent = view.name;
  clear(byId("states"), rowsOf(view.states, [(s) => el("code", { text: s.name }), (s) => s.description, kind]));
  clear(byId("transitions"), rowsOf(view.transitions, [
    (t) => el("span", {}, el("code", { text: t.event }), t.auto ? "" : el("span", { class: "muted", text: " (manual)" })),
    (t) => t.sources.join(", "),
    (t) => t.dest ?? "(same state)",
    (t) => named(t.guards),
    (t) => named(t.actions),
    (t) => t.description,
  ]));
  if (view.control) {
    byId("control-field").textContent = `(status field '${view.control.field}')`;
    clear(byId("control"), rowsOf(view.control.commands, [
      (c) => el("code", { text: c.name }), (c) => c.sources.join(", "), (c) => c.dest, (c) => c.state || "-", (c) => c.description,
    ]));
  } else {
    byId("control-section").hidden = true;
  }
  clear(byId("options"), settingsRows(view.options));
  clear(byId("inputs"), settingsRows(view.inputs));
  new JsonTree(byId("schema"), { openDepth: 1 }).show(view.schema);
}

async function create(event) {
  event.preventDefault();
  let inputs;
  try {
    inputs = JSON.parse(byId("create-inputs").value || "{}");
  } catch (error) {
    showError(`inputs: not JSON: ${error.message}`);
    return;
  }
  const id = byId("create-id").value.trim() || null;
  try {
    const created = await post(`/api/instances/${encodeURIComponent(name)}`, { id, inputs });
    location.href = instanceHref(created.machine, created.id);
  } catch (error) {
    showError(error);
  }
}

async function start() {
  fillNav().catch(showError);
  const [view, svg, access] = await Promise.all([
    api(`/api/machines/${encodeURIComponent(name)}`),
    api(`/api/machines/${encodeURIComponent(name)}/diagram.svg`),
    session(),
  ]);
  show(view);
  clear(byId("diagram"), svgElement(svg));
  byId("create-section").hidden = !access.control;
  byId("create-form").addEventListener("submit", create);
}

start().catch(showError);
