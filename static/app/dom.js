// Small DOM helpers. Text always goes in as text nodes: data never reaches innerHTML.

/**
 * Build an element. `props`: class, text, dataset, attrs (set as attributes), on (listeners),
 * and any other key is assigned as a property. Children: nodes or strings (as text).
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = value;
      else if (key === "dataset") Object.assign(el.dataset, value);
      else if (key === "attrs") {
        for (const [name, v] of Object.entries(value)) {
          if (v !== undefined && v !== null && v !== false) el.setAttribute(name, v === true ? "" : v);
        }
      } else if (key === "on") {
        for (const [type, fn] of Object.entries(value)) el.addEventListener(type, fn);
      } else el[key] = value;
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/**
 * After a modal `dialog` closed, give `opener` the focus back, unless something took it
 * meanwhile: "close" comes a task after dialog.close(), so a jump to a message or typing into
 * the composer right after Escape must keep the focus where it went.
 */
export function restoreFocus(dialog, opener) {
  const now = document.activeElement;
  const free = !now || now === document.body || dialog.contains(now);
  if (free && opener && opener.isConnected) opener.focus();
}

/** A score with two decimals ("" for a non-number), never "-0.00". */
export function fmtScore(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "";
  return (Math.abs(value) < 0.005 ? 0 : value).toFixed(2);
}

/** "1 message", "3 messages"; `many` for an irregular plural. */
export function plural(n, word, many = `${word}s`) {
  return `${n} ${n === 1 ? word : many}`;
}

/** Remove every child of `el`. */
export function clear(el) {
  el.replaceChildren();
}

/** The first `n` characters of `text` on one line, with an ellipsis when cut. */
export function excerpt(text, n = 120) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > n ? flat.slice(0, n - 1).trimEnd() + "…" : flat;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const dateTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

/** A Date from an ISO string or epoch number, or null. */
export function toDate(value) {
  if (value === undefined || value === null || value === "") return null;
  const date = typeof value === "number" ? new Date(value < 1e12 ? value * 1000 : value) : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

export function shortTime(date) {
  return date ? timeFormat.format(date) : "";
}

export function longTime(date) {
  return date ? dateTimeFormat.format(date) : "";
}

/** "just now", "5 min ago", "3 h ago", "2 d ago", or a date. */
export function relativeTime(date, now = Date.now()) {
  if (!date) return "";
  const seconds = Math.round((now - date.getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  if (seconds < 86400 * 7) return `${Math.round(seconds / 86400)} d ago`;
  return date.toLocaleDateString();
}

/** Announce `text` to screen readers through the page's polite live region. */
export function announce(text) {
  const region = document.getElementById("sr-announcer");
  if (!region) return;
  region.textContent = "";
  // A fresh text node in a later task makes repeated identical messages be read again.
  setTimeout(() => {
    region.textContent = text;
  }, 30);
}
