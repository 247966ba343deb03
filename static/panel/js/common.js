/*
 * The Smart Context panel's script: the topic bubble cloud, the sticky indicator, the status line,
 * the similarity switch, and the context section (the chat's rules, references and tools).
 * Plain JS, no framework.
 *
 * How the files fit together. The script is small files, each with one job, that
 * smart_context/panel.py inlines in a fixed order (PANEL_SCRIPTS) into ONE classic inline
 * <script> of the panel's HTML, wrapped in one enclosing function:
 *
 *   (() => { "use strict"; common.js, app/bridge.js, transport.js, layout.js, state.js,
 *            view.js, controller.js, items.js, items-view.js, items-controller.js,
 *            memory.js, usage.js, usage-view.js, start.js })();
 *
 * So the files share names as plain top-level const and class declarations: every file sees
 * every other's, and nothing leaks into the host page (the panel is inserted into other hosts'
 * pages, where a module URL would not resolve, so there are no ES module imports). Only start.js
 * acts when evaluated; the others only declare, so nothing runs before every name exists.
 *
 *   common.js      this note, and the helpers and event names several files use
 *   app/bridge.js  the HTTP fallback bridge, shared with the chat page (window.sidecar)
 *   transport.js   talking to the host: its window.sidecar, or the fallback installed as one
 *   layout.js      the bubble cloud's geometry and colours: pure, numbers in, circles out
 *   state.js       what the panel knows and wants, and what follows from it: no DOM
 *   view.js        the DOM: renders the state, turns clicks and keys into intents
 *   controller.js  the actions: commands to the host, host events, the DOM filter event
 *   items.js       the context section's data: the vault's items, the chat's session, settings
 *   items-view.js  the context section's DOM: session items, the Add list, the settings row
 *   items-controller.js  its actions: list, add, remove, settings; the items_changed event
 *   memory.js      long memory: the first indexing/summaries' progress, the memories list
 *   usage.js       the budget and usage section's data: figures read, bars and chart laid out
 *   usage-view.js  its DOM and its loading: the budget bar, the totals, the chart over replies
 *   start.js       wiring, the window.SmartContextPanel API, and the first load
 *
 * Topic labels are hostile (model output derived from user text): they are only ever written
 * with textContent, dataset and setAttribute, and looked up in a Map, never put into markup or
 * selectors. Every file is inlined inside a script element, so none may contain a closing script
 * tag or an HTML comment opener (render_panel refuses to inline one that does).
 */

const PANEL_ID = "smart-context-panel";
const EVENTS = {
  filterChangedDom: "smart_context:filter_changed", // the panel's DOM event, on document
  topicsUpdated: "smart_context.topics_updated", // host events, through the bridge
  filterChanged: "smart_context.filter_changed",
  chatSelected: "sidecar:chat_selected", // the host page's DOM events
  messageAdded: "sidecar:message_added",
};

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/** The strings of `value` (an array), each once, in order; anything else gives []. */
const stringList = (value) =>
  Array.isArray(value) ? [...new Set(value.filter((item) => typeof item === "string"))] : [];

/** A message count: a positive finite number, or 0. */
const count = (value) => {
  const n = Number(value);
  return Number.isFinite(n) && n > 0 ? n : 0;
};

/** An element with a class and, when given, its text (always as text, never markup). */
const itemsEl = (tag, className, content) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (content !== undefined) node.textContent = content;
  return node;
};

const asText = (value) => (typeof value === "string" ? value : "");

/** A reply that says the host has no such command (the sidecar's 404 says "Unknown"). */
const isUnknownCommand = (result) => /^unknown\b/i.test(asText(result.error));

/** A token or item count as people read it: 12,345. */
const formatTokens = (n) => Number(n).toLocaleString("en-US");

/** The `detail` of a DOM CustomEvent when it is an object, else {}. */
const detailOf = (event) => (event && isObject(event.detail) ? event.detail : {});
