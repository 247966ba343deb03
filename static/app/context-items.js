// "View context", the items part: the rules, references and tools a reply was sent with (its
// stored request_context, docs/contract.md §8), as View context shows them.

import { h } from "./dom.js";

const GROUPS = [
  { type: "rule", title: "Rules", one: "rule", many: "rules" },
  { type: "reference", title: "References", one: "reference", many: "references" },
  { type: "tool", title: "Tools", one: "tool", many: "tools" },
];
// The summary names the modes in this order: what search chose first, then what the session
// held, then the plugin's own tools (the memory tools), which no vault item names.
const MODES = ["agent", "expansion", "always", "manual", "builtin"];
const MODE_NAMES = { always: "Always", manual: "Manual", agent: "Agent", expansion: "Expansion", builtin: "Built in" };
const BUILT_IN = "Smart Context's own tool: sent with every request while memory_tools is on.";
const NO_PRIORITY = "999";

const str = (value) => (typeof value === "string" ? value : "");

/** An item's identity (type, server, name) as one string. */
export function itemKey(item) {
  return JSON.stringify([str(item.type), str(item.server_name), str(item.name)]);
}

/** The record's items that name a type, a name and (tools) a server; anything else is dropped. */
export function recordItems(record) {
  const items = record && Array.isArray(record.items) ? record.items : [];
  return items.filter(
    (i) =>
      i &&
      GROUPS.some((g) => g.type === i.type) &&
      str(i.name) &&
      (i.type !== "tool" || str(i.server_name)),
  );
}

/**
 * The tools the reply's record says were sent (`sentTools`: the smart_context record's `tools`,
 * function names `{server}__{tool}`) that no item of `record` names: the plugin's own, counted
 * in the budget's tools like the rest, so listed like the rest.
 */
export function builtInTools(record, sentTools) {
  if (!Array.isArray(sentTools)) return [];
  const named = new Set(
    recordItems(record)
      .filter((i) => i.type === "tool")
      .map((i) => `${i.server_name}__${i.name}`),
  );
  return sentTools
    .filter((name) => typeof name === "string" && name && !named.has(name))
    .map((name) => {
      const at = name.indexOf("__");
      const [server, tool] = at > 0 ? [name.slice(0, at), name.slice(at + 2)] : ["", name];
      return { type: "tool", server_name: server, name: tool, include_mode: "builtin" };
    });
}

/** A similarity score to two decimals ("0.87"), or "" when there is none. */
export function formatScore(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "";
  return (Math.abs(value) < 0.005 ? 0 : value).toFixed(2);
}

/**
 * The selection summary: "5 rules (3 agent, 2 always), 2 references (1 agent, 1 manual),
 * 3 tools (all manual)".
 */
export function summaryLine(items) {
  return GROUPS.map((group) => {
    const mine = items.filter((i) => i.type === group.type);
    if (!mine.length) return `no ${group.many}`;
    const counts = MODES.map((mode) => [mode, mine.filter((i) => i.include_mode === mode).length]).filter(
      ([, n]) => n,
    );
    const noun = mine.length === 1 ? group.one : group.many;
    const word = (mode) => (mode === "builtin" ? "built in" : mode);
    let modes = counts.map(([mode, n]) => `${n} ${word(mode)}`).join(", ");
    if (counts.length === 1) modes = mine.length === 1 ? word(counts[0][0]) : `all ${word(counts[0][0])}`;
    return modes ? `${mine.length} ${noun} (${modes})` : `${mine.length} ${noun}`;
  }).join(", ");
}

/** The order: rules and references by priority then name, tools by server then name. */
export function sortItems(items, details) {
  const info = (item) => details.get(itemKey(item)) || {};
  return items.slice().sort((a, b) => {
    if (a.type === "tool") {
      return str(a.server_name).localeCompare(str(b.server_name)) || a.name.localeCompare(b.name);
    }
    const pa = str(info(a).priority) || NO_PRIORITY;
    const pb = str(info(b).priority) || NO_PRIORITY;
    return pa.localeCompare(pb) || a.name.localeCompare(b.name);
  });
}

/**
 * The items section for `record` (a reply's request_context, or undefined). `details`: a Map
 * from itemKey to the vault's row (description, priority, text), or null while it loads;
 * `error`: why the vault's items could not be read; `opened`: the keys of items whose text was
 * open (kept when the section is drawn again); `sentTools`: the names of every tool sent (the
 * smart_context record's `tools`), so the plugin's own are listed too.
 */
export function requestContextSection(
  record,
  { details = null, error = "", opened = new Set(), sentTools = null } = {},
) {
  const section = h("section", { class: "ctx-ci", attrs: { "aria-labelledby": "ctx-ci-heading" } });
  const title = "Rules, references and tools";
  section.append(h("h3", { class: "ctx-heading", id: "ctx-ci-heading", text: title }));
  if (!record || typeof record !== "object" || !Array.isArray(record.items)) {
    section.append(h("p", { class: "ctx-empty", text: "No context data available" }));
    return section;
  }
  const items = [...recordItems(record), ...builtInTools(record, sentTools)];
  section.append(h("p", { class: "ctx-ci__summary", text: summaryLine(items) }));
  if (str(record.error)) {
    const error = h("p", { class: "ctx-error", attrs: { role: "note" } }, h("strong", { text: "Error: " }));
    error.append(record.error);
    section.append(error);
  }
  if (error) {
    section.append(h("p", { class: "ctx-empty", text: `The vault's items could not be read: ${error}` }));
  }
  const known = details || new Map();
  const columns = h("div", { class: "ctx-ci__columns" });
  for (const group of GROUPS) {
    const mine = sortItems(
      items.filter((i) => i.type === group.type),
      known,
    );
    const list = h("ul", { class: "ctx-ci__list" });
    for (const item of mine) list.append(itemEntry(item, error ? new Map() : details, opened, error));
    if (!mine.length) list.append(h("li", { class: "ctx-empty", text: "None" }));
    columns.append(
      h(
        "details",
        { class: "ctx-ci__column", open: true, dataset: { group: group.type } },
        h("summary", { class: "ctx-ci__title", text: `${group.title} (${mine.length})` }),
        list,
      ),
    );
  }
  section.append(columns);
  return section;
}

function itemEntry(item, details, opened, error) {
  const key = itemKey(item);
  const info = details ? details.get(key) : undefined;
  const mode = str(item.include_mode);
  const prefix = item.type === "tool" ? `${item.server_name}.` : str(info && info.priority);
  const summary = h(
    "summary",
    { class: "ctx-ci__head", title: info && info.description ? info.description : undefined },
    prefix ? h("span", { class: "ctx-ci__prefix", text: prefix }) : null,
    h("span", { class: "ctx-ci__name", text: item.name }),
    h("span", { class: `ci-badge ci-badge--${mode || "unknown"}`, text: MODE_NAMES[mode] || mode || "?" }),
    formatScore(item.similarity_score)
      ? h("span", {
          class: "score",
          title: "Similarity to the message",
          text: formatScore(item.similarity_score),
        })
      : null,
    info && info.description ? h("span", { class: "ctx-ci__desc", text: info.description }) : null,
  );
  return h(
    "li",
    { class: "ctx-ci__item", dataset: { itemKey: key, mode } },
    h(
      "details",
      { class: "ctx-ci__entry", open: opened.has(key) },
      summary,
      itemBody(item, details, info, error),
    ),
  );
}

function itemBody(item, details, info, error) {
  if (item.include_mode === "builtin") return h("p", { class: "ctx-empty", text: BUILT_IN });
  if (!details) return h("p", { class: "ctx-empty", text: "Loading…" });
  if (!info) {
    const why = error ? "Its text could not be read." : "This item is no longer in the vault.";
    return h("p", { class: "ctx-empty", text: why });
  }
  const body = str(info.text).trim();
  if (item.type === "tool") {
    const parts = [
      h("p", { class: "ctx-ci__label", text: "Parameters" }),
      h("pre", { class: "ctx-ci__text", text: body || "No parameters." }),
    ];
    if (info.input_schema && typeof info.input_schema === "object") {
      // the schema as the model receives it, folded: most people want the lines above
      const schema = JSON.stringify(info.input_schema, null, 2);
      parts.push(
        h(
          "details",
          { class: "ctx-ci__schema" },
          h("summary", { text: "Schema" }),
          h("pre", { class: "ctx-ci__text", text: schema }),
        ),
      );
    }
    return h("div", { class: "ctx-ci__body" }, ...parts);
  }
  return h("pre", { class: "ctx-ci__text", text: body || "This item has no text." });
}

/** A Map from itemKey to row, from a list_items result (null when it failed). */
export function detailsFrom(result) {
  if (!result || result.status !== "success" || !Array.isArray(result.items)) return null;
  const rows = result.items.filter((row) => row && typeof row === "object");
  return new Map(rows.map((row) => [itemKey(row), row]));
}
