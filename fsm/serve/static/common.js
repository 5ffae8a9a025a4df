// Shared by the pages of fsm serve: API calls, DOM building, live updates, small formatters.
// Data from the workspace is only ever put into the page as text (textContent), never as HTML.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function api(path, options = {}) {
  const response = await fetch(path, options);
  const type = response.headers.get("content-type") || "";
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    if (type.includes("json")) {
      const body = await response.json();
      message = body.error || message;
    }
    throw new ApiError(response.status, message);
  }
  return type.includes("json") ? response.json() : response.text();
}

export function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
}

// el("a", {href: "/", class: "x"}, "text", child) -> element; null children are skipped.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

export function instanceHref(machine, id) {
  return `/instances/${encodeURIComponent(machine)}/${encodeURIComponent(id)}`;
}

export function machineHref(machine) {
  return `/machines/${encodeURIComponent(machine)}`;
}

export function apiInstance(machine, id) {
  return `/api/instances/${encodeURIComponent(machine)}/${encodeURIComponent(id)}`;
}

// The path segments after the page's own prefix, decoded: /instances/m/id -> ["m", "id"].
export function pathParts() {
  return location.pathname.split("/").filter(Boolean).slice(1).map(decodeURIComponent);
}

export function badge(text, kind) {
  return el("span", { class: `badge ${kind || ""}`.trim(), text: text ?? "-" });
}

export function statusBadge(status) {
  return badge(status || "-", `status-${(status || "none").replace(/[^a-z_]/gi, "")}`);
}

export function outcomeBadge(outcome) {
  return outcome ? badge(outcome, outcome === "success" ? "good" : "bad") : null;
}

function ago(date) {
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds >= 86400) return `${Math.floor(seconds / 86400)} d ago`;
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)} h ago`;
  if (seconds >= 60) return `${Math.floor(seconds / 60)} min ago`;
  return seconds < 2 ? "just now" : `${seconds} s ago`;
}

// A duration as a person reads it: "0.4 ms", "850 ms", "3.9 s", "2 min 5 s", "1 h 3 min".
export function duration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  if (ms < 1) return `${ms.toFixed(1)} ms`; // a step of fsm's own: "0.4 ms", not "0 ms"
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function when(iso) {
  if (!iso) return el("span", { text: "-" });
  const date = new Date(iso);
  return el("time", { datetime: iso, title: date.toLocaleString(), text: ago(date) });
}

// "3 s ago" would go stale on a page that nothing changes: keep the shown ages current.
setInterval(() => {
  for (const time of document.querySelectorAll("time[datetime]")) {
    time.textContent = ago(new Date(time.getAttribute("datetime")));
  }
}, 10000);

export function showError(error) {
  const banner = document.getElementById("error");
  if (!banner) return;
  banner.textContent = error ? String(error.message || error) : "";
  banner.hidden = !error;
}

function setLive(on) {
  const dot = document.getElementById("live");
  if (!dot) return;
  dot.className = on ? "live on" : "live off";
  dot.title = on ? "live: updates as files change" : "not connected: reconnecting";
  dot.textContent = on ? "live" : "offline";
}

// Reload the page's data when the stream is ready and whenever a matching instance changes.
// One reload at a time; changes during a reload cause one more, at most every minInterval ms.
export function live(params, reload, minInterval = 0) {
  let running = false;
  let again = false;
  let last = 0;
  async function run() {
    if (running) {
      again = true;
      return;
    }
    running = true;
    const wait = last + minInterval - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    last = Date.now();
    try {
      await reload();
      showError(null);
    } catch (error) {
      showError(error);
    } finally {
      running = false;
      if (again) {
        again = false;
        run();
      }
    }
  }
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v));
  const source = new EventSource(`/api/events?${query}`);
  source.addEventListener("ready", () => {
    setLive(true);
    run();
  });
  source.addEventListener("change", () => run());
  source.addEventListener("error", () => setLive(false));
  return { reload: run, source };
}

let sessionPromise = null;
export function session() {
  sessionPromise ||= api("/api/session").catch(() => ({ control: false, remote: false }));
  return sessionPromise;
}

// Navigation: the machines this server shows.
export async function fillNav() {
  const nav = document.getElementById("machines-nav");
  if (!nav) return [];
  const machines = await api("/api/machines");
  clear(nav, machines.map((m) => el("a", { href: machineHref(m.name), text: m.name })));
  return machines;
}

// Graphviz SVG text -> an <svg> element that fits the page width (never wider than drawn).
export function svgElement(text) {
  const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
  const svg = parsed.documentElement;
  if (svg.nodeName !== "svg") throw new Error("the diagram is not an SVG image");
  for (const script of svg.querySelectorAll("script, foreignObject")) script.remove();
  const width = parseFloat(svg.getAttribute("width") || "0");
  svg.removeAttribute("height");
  svg.setAttribute("width", "100%");
  if (width) svg.style.maxWidth = `${Math.round((width * 4) / 3)}px`;
  return document.importNode(svg, true);
}
