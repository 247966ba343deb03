// The palette's commands: Smart Context (through the panel when it offers an API; the context
// item commands are in item-commands.js) and navigation.

import { announce, plural } from "./dom.js";
import { itemCommands } from "./item-commands.js";

function sidecar() {
  return window.sidecar;
}

/** Throw a readable error for a command result that is not a success. */
function check(result) {
  if (!result || result.status !== "success") {
    throw new Error((result && result.error) || "The command failed.");
  }
  return result;
}

async function getTopics(chatId) {
  return check(await sidecar().command("smart_context.get_topics", chatId ? { chat_id: chatId } : {}));
}

/** Set the topic filter through the panel (so it stays in step), else as a command. */
export async function setFilter(topics, chatId) {
  const panel = window.SmartContextPanel;
  if (panel && typeof panel.setFilter === "function") {
    return check(await panel.setFilter(topics));
  }
  const args = { topics };
  if (chatId) args.chat_id = chatId;
  return check(await sidecar().command("smart_context.set_filter", args));
}

function similarityToggle() {
  return document.getElementById("sc-similarity-toggle");
}

/** Whether the similarity filter is on, as the panel shows it (or as last reported). */
export function similarityEnabled(fallback) {
  const toggle = similarityToggle();
  return toggle ? toggle.checked : fallback;
}

async function setSimilarity(enabled) {
  const panel = window.SmartContextPanel;
  if (panel && typeof panel.setSimilarityMode === "function") {
    return check(await panel.setSimilarityMode(enabled));
  }
  const toggle = similarityToggle();
  if (toggle && !toggle.disabled) {
    // The panel owns the switch: flipping it runs the panel's own handler and keeps it in step.
    if (toggle.checked !== enabled) toggle.click();
    return { status: "success", embedding_search: enabled };
  }
  return check(await sidecar().command("smart_context.set_similarity_mode", { enabled }));
}


/**
 * Close the palette and do `work` (which resolves to a sentence): the panel shows progress,
 * a screen reader hears the result, and a failure is shown by the page.
 */
function inBackground(palette, app, work) {
  palette.close();
  return Promise.resolve()
    .then(work)
    .then(
      (text) => announce(text),
      (err) => app.notify(err.message || String(err), true),
    );
}

/**
 * The palette's root view. `app` offers chatId(), chats(), openChat(id), newChat(), focusInput(),
 * previewContext() and notify(text, isError).
 */
export function rootView(app) {
  const state = { embeddingSearch: true };

  const topicPicker = {
    title: "Filter by topics",
    placeholder: "Pick topics — Enter toggles, then choose Apply",
    empty: "No topics yet. Topics appear after the first replies.",
    topics: [],
    selected: new Set(),
    async load() {
      const result = await getTopics(app.chatId());
      state.embeddingSearch = result.embedding_search !== false;
      this.topics = (result.topics || []).filter((t) => !t.sticky);
      this.selected = new Set(result.active_topics || []);
    },
    items() {
      const chosen = [...this.selected];
      const apply = {
        id: "apply",
        label: chosen.length ? `Apply filter: ${chosen.join(", ")}` : "Apply: no filter (all messages)",
        hint: "Enter",
        keywords: "apply done",
        run: (palette) => inBackground(palette, app, () => setFilter(chosen, app.chatId()).then(statusText)),
      };
      const rows = this.topics.map((t) => ({
        id: `topic:${t.label}`,
        label: t.label,
        hint: plural(t.count || 0, "message"),
        checked: this.selected.has(t.label),
        run: (palette) => {
          if (this.selected.has(t.label)) this.selected.delete(t.label);
          else this.selected.add(t.label);
          palette.rerender();
        },
      }));
      return this.topics.length ? [apply, ...rows] : [];
    },
  };

  const topicList = {
    title: "Topics in this chat",
    placeholder: "Filter topics — Enter filters the chat by one",
    empty: "No topics yet. Topics appear after the first replies.",
    topics: [],
    async load() {
      const result = await getTopics(app.chatId());
      this.topics = result.topics || [];
      this.active = new Set(result.active_topics || []);
    },
    items() {
      return this.topics.map((t) => ({
        id: `show:${t.label}`,
        label: t.sticky ? `${t.label} (always sent)` : t.label,
        hint: t.sticky
          ? plural((t.message_ids || []).length || t.count || 0, "message")
          : `${plural(t.count || 0, "message")}${this.active.has(t.label) ? " · selected" : ""}`,
        run: (palette) => {
          if (t.sticky) return palette.setMessage("Sticky instructions are always in context.");
          return inBackground(palette, app, () => setFilter([t.label], app.chatId()).then(statusText));
        },
      }));
    },
  };

  const needsChat = (fn) => async (palette) => {
    if (!app.chatId()) {
      palette.setMessage("Open or start a chat first.", true);
      return;
    }
    await fn(palette);
  };

  return {
    title: "Commands",
    placeholder: "Type a command…",
    items() {
      const on = similarityEnabled(state.embeddingSearch);
      const items = [
        {
          id: "filter",
          label: "Filter by topics…",
          keywords: "smart context select topic",
          run: needsChat((palette) => palette.show(topicPicker)),
        },
        {
          id: "clear",
          label: "Clear filter",
          keywords: "smart context all messages reset",
          changesSetting: true,
          run: needsChat((palette) =>
            inBackground(palette, app, () => setFilter([], app.chatId()).then(statusText)),
          ),
        },
        {
          id: "topics",
          label: "Show topics",
          keywords: "smart context list",
          run: needsChat((palette) => palette.show(topicList)),
        },
        {
          id: "similarity",
          // The panel's name for it; the title starts with it, so "similarity" + Enter is clear.
          label: on ? "Similarity filter: turn off" : "Similarity filter: turn on",
          keywords: "smart context embedding search toggle",
          changesSetting: true, // it rewrites embedding_search in .vault.toml
          run: (palette) =>
            inBackground(palette, app, async () => {
              await setSimilarity(!on);
              state.embeddingSearch = !on;
              return `Similarity filter ${on ? "off" : "on"}.`;
            }),
        },
        {
          id: "preview",
          label: "Preview context of the message being written",
          keywords: "smart context view dry run budget why summaries",
          run: needsChat((palette) => (palette.close(), app.previewContext())),
        },
        ...itemCommands(app, { needsChat, inBackground }),
        { id: "new", label: "New chat", keywords: "create start", run: (p) => (p.close(), app.newChat()) },
        {
          id: "focus",
          label: "Write a message",
          keywords: "input compose",
          run: (p) => (p.close(), app.focusInput()),
        },
      ];
      for (const chat of app.chats()) {
        if (chat.id === app.chatId()) continue;
        items.push({
          id: `open:${chat.id}`,
          label: `Open chat: ${chat.title || "Untitled chat"}`,
          hint: plural(chat.message_count || 0, "message"),
          keywords: "switch go",
          run: (p) => (p.close(), app.openChat(chat.id)),
        });
      }
      return items;
    },
  };
}

function statusText(result) {
  if (!result || !Array.isArray(result.active_topics)) return "Filter updated.";
  if (!result.active_topics.length) return "Filter cleared: all messages in context.";
  const n = Array.isArray(result.included_ids) ? result.included_ids.length : "Some";
  return `${n} of ${result.total_messages} messages in context.`;
}
