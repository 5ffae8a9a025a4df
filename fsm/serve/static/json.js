// A collapsible JSON view. Which objects are open is kept by path, so a live update redraws the
// document without closing what the reader opened.

import { el } from "./common.js";

export class JsonTree {
  constructor(container, { openDepth = 1 } = {}) {
    this.container = container;
    this.openDepth = openDepth;
    this.open = new Map(); // path -> open?
  }

  show(value) {
    this.container.replaceChildren(this.node(value, "$", null, 0));
  }

  node(value, path, key, depth) {
    const label = key === null ? null : el("span", { class: "json-key", text: `${key}: ` });
    if (value === null || typeof value !== "object") {
      return el("div", { class: "json-line" }, label, this.scalar(value));
    }
    const entries = Array.isArray(value)
      ? value.map((item, index) => [index, item])
      : Object.entries(value);
    const brackets = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
    const count = Array.isArray(value) ? `${entries.length} items` : `${entries.length} keys`;
    if (entries.length === 0) {
      return el("div", { class: "json-line" }, label, el("span", { text: brackets.join("") }));
    }
    const details = el("details", { class: "json-node", "data-path": path });
    details.open = this.open.has(path) ? this.open.get(path) : depth < this.openDepth;
    details.addEventListener("toggle", () => this.open.set(path, details.open));
    details.append(
      el("summary", {}, label, el("span", { class: "json-count", text: `${brackets[0]} ${count} ${brackets[1]}` })),
      el(
        "div",
        { class: "json-children" },
        entries.map(([childKey, child]) => this.node(child, `${path}.${childKey}`, childKey, depth + 1)),
      ),
    );
    return details;
  }

  scalar(value) {
    const type = value === null ? "null" : typeof value;
    const text = type === "string" ? JSON.stringify(value) : String(value);
    return el("span", { class: `json-${type}`, text });
  }
}
