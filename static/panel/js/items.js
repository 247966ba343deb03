/*
 * The context section's data: the vault's items as smart_context.list_items answers them, which
 * of them the open chat's session holds (and how: "always" or "manual"), the vault's problems
 * with its item files, and the chat's selection settings. No DOM and no host: ItemsController
 * changes it, ItemsView reads it. Item names and descriptions come from files anyone may write:
 * they are data, only ever shown with textContent.
 */

const ITEM_GROUPS = [
  { type: "rule", title: "Rules" },
  { type: "reference", title: "References" },
  { type: "tool", title: "Tools" },
];
const MODE_NAMES = { always: "Always", manual: "Manual", agent: "Agent", expansion: "Expansion" };
// The vault's defaults of docs/contract.md §8, shown while the host reports no effective settings.
const DEFAULT_SETTINGS = {
  context_top_k: 20,
  context_top_n: 5,
  context_include_score: 0.7,
  context_tools_top_k: 20,
  context_tools_top_n: 5,
  context_tools_include_score: 0.7,
  context_expansion_depth: 0,
};
const PRESETS = ["aggressive", "normal", "conservative"];

/** An item's identity: type, server and name (docs/contract.md §8), as one Map key. */
const itemKey = (item) => JSON.stringify([asText(item.type), asText(item.server_name), asText(item.name)]);

/** A row of list_items, checked and with only what the panel shows; null when unusable. */
const itemRow = (raw) => {
  if (!isObject(raw) || !ITEM_GROUPS.some((g) => g.type === raw.type) || !asText(raw.name)) {
    return null;
  }
  return {
    type: raw.type,
    name: raw.name,
    server_name: raw.type === "tool" ? asText(raw.server_name) || null : null,
    description: asText(raw.description),
    priority: asText(raw.priority),
    include: asText(raw.include),
    enabled: raw.enabled !== false,
    in_session: raw.in_session === true,
    include_mode: raw.in_session === true ? asText(raw.include_mode) || null : null,
  };
};

/** "001 " for a rule or reference with a priority, "server." for a tool, else "". */
const itemPrefix = (item) => {
  if (item.type === "tool") return item.server_name ? `${item.server_name}.` : "";
  return item.priority ? item.priority : "";
};

/** The order: files by priority then name, tools by server then name. */
const compareItems = (a, b) =>
  a.type === "tool"
    ? asText(a.server_name).localeCompare(asText(b.server_name)) || a.name.localeCompare(b.name)
    : (asText(a.priority) || "999").localeCompare(asText(b.priority) || "999") ||
      a.name.localeCompare(b.name);

/** Whether `item` matches every word of `query` (name, server or description, any case). */
const matchesQuery = (item, query) => {
  const words = asText(query).toLowerCase().split(/\s+/).filter(Boolean);
  const hay = `${item.name} ${item.server_name || ""} ${item.description}`.toLowerCase();
  return words.every((word) => hay.includes(word));
};

/** Effective settings from a reply: the numbers it names, over the defaults. */
const settingsFrom = (raw) => {
  const out = { ...DEFAULT_SETTINGS, preset: "" };
  if (!isObject(raw)) return out;
  for (const key of Object.keys(DEFAULT_SETTINGS)) {
    if (typeof raw[key] === "number" && Number.isFinite(raw[key])) out[key] = raw[key];
  }
  if (PRESETS.includes(raw.preset)) out.preset = raw.preset;
  return out;
};

class ItemsState {
  constructor() {
    this.chatId = null;
    this.loaded = false;
    this.available = true; // false: the host has no list_items
    this.rows = []; // itemRow()s, as the host last listed them
    this.problems = []; // [{source, message}]
    this.error = "";
    this.query = ""; // the Add list's filter
    this.settings = settingsFrom(null);
    this.settingsKnown = false; // true: the host said which settings are in effect
    this.settingsAvailable = null; // null: not known yet; false: no set_session_settings
    this.busy = new Set(); // keys of items being added or removed
    this.seq = { load: 0, settings: 0 };
  }

  /** Forget the previous chat (replies still in flight for it will be ignored). */
  switchChat(chatId) {
    this.seq.load++;
    this.seq.settings++;
    this.chatId = chatId;
    this.loaded = false;
    this.rows = [];
    this.error = "";
    this.query = "";
    this.settings = settingsFrom(null);
    this.settingsKnown = false;
    this.busy.clear();
  }

  /** A list_items reply. */
  applyList(result) {
    this.rows = (Array.isArray(result.items) ? result.items : []).map(itemRow).filter(Boolean);
    this.problems = (Array.isArray(result.problems) ? result.problems : []).filter(
      (p) => isObject(p) && asText(p.source),
    );
    if (isObject(result.settings)) this.applySettings(result.settings, result.preset);
    this.loaded = true;
    this.error = "";
  }

  /**
   * The session's entries (add_item / remove_item replies, the items_changed event). Returns
   * false when an entry names an item the panel does not know: the list must be read again.
   */
  applySession(entries) {
    if (!Array.isArray(entries)) return false;
    const modes = new Map();
    for (const entry of entries) {
      if (isObject(entry)) modes.set(itemKey(entry), asText(entry.include_mode) || "manual");
    }
    const known = new Set(this.rows.map(itemKey));
    for (const row of this.rows) {
      const mode = modes.get(itemKey(row));
      row.in_session = mode !== undefined;
      row.include_mode = mode === undefined ? null : mode;
    }
    return [...modes.keys()].every((key) => known.has(key));
  }

  /** The settings in effect, and the preset they match (the host says it beside them). */
  applySettings(raw, preset) {
    this.settings = settingsFrom(preset === undefined ? raw : { ...raw, preset });
    this.settingsKnown = true;
    this.settingsAvailable = true;
  }

  /** The session's items, in groups of ITEM_GROUPS, each sorted. */
  get sessionGroups() {
    return ITEM_GROUPS.map((group) => ({
      ...group,
      items: this.rows.filter((r) => r.in_session && r.type === group.type).sort(compareItems),
    }));
  }

  /** The vault's enabled items not in the session that match the Add list's filter. */
  get choices() {
    const rank = (item) => ITEM_GROUPS.findIndex((g) => g.type === item.type);
    return this.rows
      .filter((r) => r.enabled && !r.in_session && matchesQuery(r, this.query))
      .sort((a, b) => rank(a) - rank(b) || compareItems(a, b));
  }

  /** A copy for the outside (window.SmartContextPanel.items()); `pending`: a reply is due. */
  snapshot(pending) {
    return {
      chat_id: this.chatId,
      loaded: this.loaded,
      available: this.available,
      pending: Boolean(pending),
      session: this.rows
        .filter((r) => r.in_session)
        .map((r) => ({
          type: r.type,
          name: r.name,
          server_name: r.server_name,
          include_mode: r.include_mode,
        })),
      vault: this.rows.map((r) => ({ ...r })),
      settings: { ...this.settings },
      settings_known: this.settingsKnown,
      error: this.error,
    };
  }

  get sessionCount() {
    return this.rows.filter((r) => r.in_session).length;
  }
}
