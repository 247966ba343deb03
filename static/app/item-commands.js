// The palette's context item commands (docs/contract.md §8): list the chat's rules, references and
// tools, add or remove one, see what agent selection would add for a message, pick the chat's
// selection preset, and run one of the vault's MCP tools by hand. Through the Smart Context
// panel when it offers an API, so the panel stays in step; else as commands.

const PRESETS = [
  { id: "aggressive", label: "Aggressive", hint: "more items, lower scores" },
  { id: "normal", label: "Normal", hint: "the usual balance" },
  { id: "conservative", label: "Conservative", hint: "fewer items, higher scores" },
];
const MODE_NAMES = { always: "Always", manual: "Manual", agent: "Agent" };

function panel() {
  return window.SmartContextPanel || {};
}

/** Throw a readable error for a command result that is not a success. */
function check(result) {
  if (!result || result.status !== "success") {
    throw new Error((result && result.error) || "The command failed.");
  }
  return result;
}

function command(name, args) {
  return window.sidecar.command(name, args);
}

const prefix = (item) => {
  if (item.type === "tool") return `${item.server_name}.`;
  return item.priority ? `${item.priority} ` : "";
};
const itemName = (item) => `${prefix(item)}${item.name}`;
const itemArgs = (chatId, item) => {
  const args = { chat_id: chatId, type: item.type, name: item.name };
  if (item.type === "tool") args.server_name = item.server_name;
  return args;
};

async function listItems(chatId, withText = false) {
  const args = withText ? { chat_id: chatId, with_text: true } : { chat_id: chatId };
  return check(await command("smart_context.list_items", args)).items || [];
}

/** The names of a tool's parameters, required ones first, from its JSON schema. */
function parameterNames(tool) {
  const schema = tool.input_schema && typeof tool.input_schema === "object" ? tool.input_schema : {};
  const props = schema.properties && typeof schema.properties === "object" ? Object.keys(schema.properties) : [];
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  return [...props.filter((p) => required.has(p)), ...props.filter((p) => !required.has(p))];
}

/** The JSON object typed for a tool's arguments, or a sentence saying what is wrong. */
function parseArguments(text) {
  const typed = (text || "").trim() || "{}";
  try {
    const value = JSON.parse(typed);
    if (value && typeof value === "object" && !Array.isArray(value)) return { value };
    return { problem: "The arguments must be a JSON object: {\"name\": value}" };
  } catch {
    return { problem: "Not JSON yet: type the arguments as a JSON object" };
  }
}

async function changeItem(chatId, item, add) {
  const api = panel();
  const viaPanel = add ? api.addItem : api.removeItem;
  if (typeof viaPanel === "function" && api.items && api.items().chat_id === chatId) {
    return check(await viaPanel(item));
  }
  const name = add ? "smart_context.add_item" : "smart_context.remove_item";
  return check(await command(name, itemArgs(chatId, item)));
}

async function setPreset(chatId, preset) {
  const api = panel();
  const result =
    typeof api.setSessionSettings === "function" && api.items && api.items().chat_id === chatId
      ? await api.setSessionSettings({ preset })
      : await command("smart_context.set_session_settings", { chat_id: chatId, settings: { preset } });
  if (result && /^unknown\b/i.test(result.error || "")) {
    throw new Error("This host cannot change the selection per chat: the vault's defaults apply.");
  }
  return check(result).settings || {};
}

function settingsText(settings) {
  const score = settings.context_include_score;
  const shown = typeof score === "number" ? score.toFixed(2) : "—";
  const k = settings.context_top_k ?? "—";
  const n = settings.context_top_n ?? "—";
  return `Selection: top K ${k}, top N ${n}, score ${shown}.`;
}

/**
 * The palette's rows for context items. `app`: the page (chatId(), notify()); `needsChat(fn)`
 * and `inBackground(palette, app, work)`: the root view's helpers.
 */
export function itemCommands(app, { needsChat, inBackground }) {
  const toggle = (item, add) => (palette) =>
    inBackground(palette, app, async () => {
      await changeItem(app.chatId(), item, add);
      return `${itemName(item)} ${add ? "added to" : "removed from"} this chat.`;
    });

  const row = (item, run) => ({
    id: `item:${item.type}:${item.server_name || ""}:${item.name}`,
    label: itemName(item),
    hint: item.in_session ? `${item.type} · ${MODE_NAMES[item.include_mode] || "in this chat"}` : item.type,
    keywords: `${item.description || ""}`,
    run,
  });

  const sessionList = {
    title: "Context items",
    placeholder: "Rules, references and tools — Enter adds or removes one",
    empty: "The vault has no rules, references or tools.",
    rows: [],
    async load() {
      this.rows = await listItems(app.chatId());
    },
    items() {
      return this.rows
        .filter((item) => item.enabled !== false || item.in_session)
        .map((item) => ({ ...row(item, toggle(item, !item.in_session)), checked: Boolean(item.in_session) }));
    },
  };

  const addList = {
    title: "Add a context item",
    placeholder: "Type to find a rule, reference or tool",
    empty: "Every item of the vault is in this chat.",
    rows: [],
    async load() {
      this.rows = await listItems(app.chatId());
    },
    items() {
      return this.rows
        .filter((item) => !item.in_session && item.enabled !== false)
        .map((item) => row(item, toggle(item, true)));
    },
  };

  const removeList = {
    title: "Remove a context item",
    placeholder: "Type to find an item of this chat",
    empty: "This chat has no rules, references or tools.",
    rows: [],
    async load() {
      this.rows = await listItems(app.chatId());
    },
    items() {
      return this.rows.filter((item) => item.in_session).map((item) => row(item, toggle(item, false)));
    },
  };

  const search = {
    title: "Search context items",
    placeholder: "Type a message, then Enter: what agent selection would add",
    empty: "Type a message to see which items agent selection would add for it.",
    filters: false, // the rows answer the query; the palette must not filter them by it
    found: null, // {query, rows}
    items(query) {
      const q = (query || "").trim();
      if (!q) return [];
      if (this.found && this.found.query === q) {
        if (!this.found.rows.length) {
          return [{ id: "none", label: "Agent selection would add nothing", run: () => {} }];
        }
        return this.found.rows.map((item) => ({
          ...row(item, toggle(item, true)),
          hint: `${item.type} · ${Number(item.similarity_score).toFixed(2)} · Enter adds it`,
        }));
      }
      return [
        {
          id: "search",
          label: `Search: ${q}`,
          hint: "Enter",
          run: async (palette) => {
            const args = { query: q, chat_id: app.chatId() };
            const result = check(await command("smart_context.search_items", args));
            this.found = { query: q, rows: result.items || [] };
            palette.rerender();
          },
        },
      ];
    },
  };

  // Run one of the vault's MCP tools by hand (smart_context.call_tool): no model needed.
  const toolArguments = {
    title: "Run a tool",
    placeholder: "",
    filters: false, // the typed text is the arguments, not a filter
    tool: null,
    items(query) {
      const tool = this.tool;
      if (!tool) return [];
      const parsed = parseArguments(query);
      if (parsed.problem) return [{ id: "bad", label: parsed.problem, run: () => {} }];
      return [
        {
          id: "run",
          label: `Run ${itemName(tool)}`,
          hint: JSON.stringify(parsed.value),
          run: async (palette) => {
            palette.close();
            try {
              const args = { server_name: tool.server_name, name: tool.name, arguments: parsed.value };
              const result = check(await command("smart_context.call_tool", args)).result || {};
              const text = String(result.text || result.summary || "no output");
              const said = result.ok ? `${itemName(tool)}: ${text}` : `${itemName(tool)} failed: ${text}`;
              app.notify(said.slice(0, 600), !result.ok);
            } catch (err) {
              app.notify(err.message || String(err), true);
            }
          },
        },
      ];
    },
  };

  const toolList = {
    title: "Run a tool",
    placeholder: "Type to find one of the vault's MCP tools",
    empty: "The vault has no MCP tools (declare servers under [mcp.servers] in .vault.toml).",
    rows: [],
    async load() {
      this.rows = (await listItems(app.chatId(), true)).filter((item) => item.type === "tool");
    },
    items() {
      return this.rows.map((tool) => ({
        id: `tool:${tool.server_name}:${tool.name}`,
        label: itemName(tool),
        hint: tool.description || "",
        keywords: tool.description || "",
        run: (palette) => {
          const names = parameterNames(tool);
          toolArguments.tool = tool;
          toolArguments.title = `Run ${itemName(tool)}`;
          toolArguments.placeholder = names.length
            ? `Arguments as JSON (${names.join(", ")}), then Enter`
            : "No arguments: Enter runs it";
          return palette.show(toolArguments);
        },
      }));
    },
  };

  const presets = {
    title: "Selection preset",
    placeholder: "How many items agent selection adds to this chat's requests",
    items() {
      return PRESETS.map((preset) => ({
        id: `preset:${preset.id}`,
        label: preset.label,
        hint: preset.hint,
        changesSetting: true,
        run: (palette) =>
          inBackground(palette, app, async () => settingsText(await setPreset(app.chatId(), preset.id))),
      }));
    },
  };

  return [
    {
      id: "items",
      label: "Context items…",
      keywords: "smart context rules references tools session list",
      run: needsChat((palette) => palette.show(sessionList)),
    },
    {
      id: "items-add",
      label: "Add context item…",
      keywords: "smart context rule reference tool session include",
      run: needsChat((palette) => palette.show(addList)),
    },
    {
      id: "items-remove",
      label: "Remove context item…",
      keywords: "smart context rule reference tool session exclude delete",
      run: needsChat((palette) => palette.show(removeList)),
    },
    {
      id: "items-search",
      label: "Search context items…",
      keywords: "smart context agent selection rules references tools",
      run: needsChat((palette) => {
        search.found = null;
        return palette.show(search);
      }),
    },
    {
      id: "tools-run",
      label: "Run a tool…",
      keywords: "mcp tool call run server",
      run: (palette) => palette.show(toolList),
    },
    {
      id: "items-settings",
      label: "Selection preset…",
      keywords: "smart context session settings aggressive normal conservative top k n score",
      run: needsChat((palette) => palette.show(presets)),
    },
  ];
}
