/*
 * Long memory in the panel: the progress of the open chat's first summaries or the notes' indexing
 * (#sc-memory-progress, from smart_context.memory_progress), and the stored memories of the open
 * chat and of every chat (#sc-memory): listed, edited in place and deleted after a confirmation,
 * live on smart_context.memory_changed. Memories are user data written by people and models:
 * their text only ever goes in with textContent and the value of a textarea.
 */

const MEMORY_PROGRESS = "smart_context.memory_progress";
const MEMORY_CHANGED = "smart_context.memory_changed";
const PROGRESS_STALE_MS = 120000; // a pass that stopped midway sends no "done": hide it then
const PROGRESS_WORDS = {
  summaries: ["Summarising this chat", "summaries made"],
  notes: ["Indexing the vault's notes", "notes indexed"], // chat_id null: every chat's
};

const memoryButton = (text, action, extra = "") => {
  const button = itemsEl("button", `sc-memory-button ${extra}`.trim(), text);
  button.type = "button";
  button.dataset.action = action;
  return button;
};

class MemoryProgress {
  /** `root`: the panel element. */
  constructor(root) {
    this.box = root.querySelector("#sc-memory-progress");
    this.label = root.querySelector("#sc-memory-progress-label");
    this.bar = this.box.querySelector("[role='progressbar']");
    this.fill = this.box.querySelector(".sc-progress-fill");
    this.chatId = null;
    this.timer = 0;
  }

  selectChat(chatId) {
    if (chatId !== this.chatId) this.hide();
    this.chatId = chatId;
  }

  /** smart_context.memory_progress: shown for the open chat (or, with chat_id null, for the
   * vault) until done reaches total. */
  onProgress(payload) {
    if (!isObject(payload) || (payload.chat_id && payload.chat_id !== this.chatId)) return;
    const total = count(payload.total);
    const done = Math.min(count(payload.done), total);
    if (!total || done >= total) return this.hide();
    const [title, unit] = PROGRESS_WORDS[payload.what] || ["Preparing this chat's memory", "done"];
    this.label.textContent = `${title}… ${formatTokens(done)} of ${formatTokens(total)}`;
    this.bar.setAttribute("aria-valuemax", String(total));
    this.bar.setAttribute("aria-valuenow", String(done));
    this.bar.setAttribute("aria-valuetext", `${formatTokens(done)} of ${formatTokens(total)} ${unit}`);
    this.fill.style.width = `${Math.round((done / total) * 100)}%`;
    this.box.hidden = false;
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.hide(), PROGRESS_STALE_MS);
  }

  hide() {
    window.clearTimeout(this.timer);
    this.box.hidden = true;
  }
}

class MemoriesSection {
  /** `root`: the panel element; `host`: from connectHost(). */
  constructor(root, host) {
    this.host = host;
    const section = root.querySelector("#sc-memory");
    this.el = {
      section,
      count: section.querySelector(".sc-memory-count"),
      list: section.querySelector("#sc-memory-list"),
      empty: section.querySelector("#sc-memory-empty"),
      error: section.querySelector("#sc-memory-error"),
      errorText: section.querySelector("#sc-memory-error .sc-error-text"),
    };
    this.chatId = null;
    this.memories = [];
    this.loaded = false;
    this.available = true; // false: the host has no long memory, the section stays hidden
    this.editing = null; // {id, draft, area} while a memory is edited
    this.confirming = null; // the id whose deletion waits for a yes
    this.busy = new Set(); // ids with a command in flight
    this.error = "";
    this.loads = 0;
    section.querySelector("#sc-memory-error .sc-error-close").addEventListener("click", () => {
      this.error = "";
      this.render();
    });
    this.el.list.addEventListener("click", (event) => this.#onClick(event));
    this.el.list.addEventListener("input", (event) => {
      if (this.editing && event.target.matches("textarea")) this.editing.draft = event.target.value;
    });
    this.el.list.addEventListener("keydown", (event) => this.#onKey(event));
  }

  /** Show the memories the open chat is sent with (null: every stored memory). */
  selectChat(chatId) {
    if (chatId !== this.chatId) {
      this.chatId = chatId;
      this.memories = [];
      this.loaded = false;
      this.editing = this.confirming = null;
      this.error = "";
      this.render();
    }
    return this.load();
  }

  async load() {
    if (!this.available) return null; // a host without long memory: asking again changes nothing
    const chat = this.chatId;
    const ticket = ++this.loads;
    const result = await this.host.command("smart_context.list_memories", chat ? { chat_id: chat } : {});
    if (ticket !== this.loads || chat !== this.chatId) return result;
    if (result.status === "success" && Array.isArray(result.memories)) {
      this.memories = result.memories.filter((m) => isObject(m) && m.id !== undefined);
      this.loaded = true;
      const ids = new Set(this.memories.map((m) => String(m.id)));
      if (this.editing && !ids.has(this.editing.id)) {
        this.editing = null;
        this.error = "The memory you were editing was deleted elsewhere.";
      }
      if (this.confirming && !ids.has(this.confirming)) this.confirming = null;
    } else if (isUnknownCommand(result)) {
      this.available = false; // a host without long memory
    } else {
      this.error = `Could not list the memories: ${result.error}`;
    }
    this.render();
    return result;
  }

  /** smart_context.memory_changed: a memory of this chat or a global one changed somewhere. */
  onChanged(payload) {
    if (!isObject(payload) || payload.what !== "memories") return;
    if (payload.chat_id && this.chatId && payload.chat_id !== this.chatId) return;
    this.load();
  }

  snapshot() {
    return {
      chatId: this.chatId,
      ids: this.memories.map((m) => m.id),
      editing: this.editing ? this.editing.id : null,
      pending: this.busy.size,
    };
  }

  #onClick(event) {
    const button = event.target.closest("button[data-action]");
    const row = button && button.closest("[data-memory-id]");
    if (!row || button.disabled) return;
    const id = row.dataset.memoryId;
    const memory = this.memories.find((m) => String(m.id) === id);
    const action = button.dataset.action;
    if (action === "edit" && memory) {
      this.editing = { id, draft: String(memory.content ?? ""), area: null };
      this.confirming = null;
      this.render({ id, action: "text" });
    } else if (action === "cancel") {
      this.editing = null;
      this.render({ id, action: "edit" });
    } else if (action === "save") {
      this.#save(id);
    } else if (action === "delete") {
      this.confirming = id;
      this.editing = null;
      this.render({ id, action: "keep" }); // the safe choice gets the focus
    } else if (action === "keep") {
      this.confirming = null;
      this.render({ id, action: "delete" });
    } else if (action === "confirm-delete") {
      this.#delete(id);
    }
  }

  #onKey(event) {
    const row = event.target.closest("[data-memory-id]");
    if (!row) return;
    const id = row.dataset.memoryId;
    if (event.key === "Escape" && (this.editing || this.confirming)) {
      event.preventDefault();
      event.stopPropagation(); // the page's Escape would close a drawer
      const editing = this.editing && this.editing.id === id;
      this.editing = this.confirming = null;
      this.render({ id, action: editing ? "edit" : "delete" });
    } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.matches("textarea")) {
      event.preventDefault();
      this.#save(id);
    }
  }

  async #save(id) {
    if (!this.editing || this.editing.id !== id || this.busy.has(id)) return;
    const content = this.editing.draft;
    if (!content.trim()) {
      this.error = "A memory cannot be empty: delete it instead.";
      return this.render({ id, action: "text" });
    }
    const result = await this.#run(id, "smart_context.update_memory", { memory_id: Number(id), content });
    if (result.status === "success") {
      this.editing = null;
      this.#replace(result.memory);
      this.render({ id, action: "edit" });
    } else {
      this.render({ id, action: "text" });
    }
  }

  async #delete(id) {
    if (this.busy.has(id)) return;
    const index = this.memories.findIndex((m) => String(m.id) === id);
    const result = await this.#run(id, "smart_context.delete_memory", { memory_id: Number(id) });
    this.confirming = null;
    if (result.status !== "success") return this.render({ id, action: "delete" });
    this.memories = this.memories.filter((m) => String(m.id) !== id);
    const next = this.memories[Math.min(index, this.memories.length - 1)];
    this.render(next ? { id: String(next.id), action: "edit" } : null);
  }

  /** A command about memory `id`, its buttons disabled meanwhile; failures become the error. */
  async #run(id, name, args) {
    const chat = this.chatId;
    this.busy.add(id);
    this.render({ id, action: null });
    const result = await this.host.command(name, args);
    this.busy.delete(id);
    if (chat !== this.chatId) return { status: "error", error: "" };
    this.error = result.status === "success" ? "" : result.error;
    return result;
  }

  #replace(memory) {
    if (!isObject(memory)) return;
    this.memories = this.memories.map((m) => (String(m.id) === String(memory.id) ? memory : m));
  }

  /** Draw the list; `focus` ({id, action}) says which control gets the keyboard after. */
  render(focus) {
    const { el } = this;
    el.section.hidden = !this.available;
    const active = document.activeElement;
    const keep =
      focus === undefined && el.list.contains(active)
        ? { id: active.closest("[data-memory-id]")?.dataset.memoryId, action: active.dataset.action || "text" }
        : focus;
    el.count.textContent = this.loaded ? `· ${this.memories.length}` : "";
    el.error.hidden = !this.error;
    el.errorText.textContent = this.error;
    el.empty.hidden = !this.loaded || this.memories.length > 0;
    el.empty.textContent = this.chatId
      ? "No memories for this chat yet. The model and MCP clients store them with store_memory."
      : "No memories stored yet.";
    el.list.replaceChildren(...this.memories.map((m) => this.#row(m)));
    if (keep && keep.id) this.#focus(keep);
  }

  #focus({ id, action }) {
    const row = [...this.el.list.children].find((node) => node.dataset.memoryId === id);
    if (!row) return;
    const target = action === "text" ? row.querySelector("textarea") : row.querySelector(`[data-action="${action}"]`);
    if (target) target.focus();
  }

  #row(memory) {
    const id = String(memory.id);
    const busy = this.busy.has(id);
    const row = itemsEl("li", "sc-memory-row");
    row.dataset.memoryId = id;
    const textId = `sc-memory-text-${id.replace(/[^\w-]/g, "")}`;
    if (this.editing && this.editing.id === id) {
      // the same textarea while the edit lasts: a live update of the list keeps its caret
      const area = this.editing.area || (this.editing.area = itemsEl("textarea", "sc-memory-input"));
      if (area.value !== this.editing.draft) area.value = this.editing.draft;
      area.rows = 3;
      area.setAttribute("aria-label", "Memory text (Ctrl+Enter saves, Escape cancels)");
      area.disabled = busy;
      const actions = itemsEl("div", "sc-memory-actions");
      actions.append(memoryButton("Save", "save", "is-primary"), memoryButton("Cancel", "cancel"));
      row.append(area, actions);
    } else {
      const text = itemsEl("p", "sc-memory-text", String(memory.content ?? ""));
      text.id = textId;
      const meta = itemsEl("p", "sc-memory-meta");
      meta.append(
        itemsEl("span", "sc-memory-scope", memory.chat_id ? "This chat" : "All chats"),
        itemsEl("span", "", `importance ${Number(memory.importance || 0).toFixed(2)}`),
      );
      const actions = itemsEl("div", "sc-memory-actions");
      if (this.confirming === id) {
        const question = itemsEl("span", "sc-memory-confirm", "Delete this memory?");
        actions.append(question, memoryButton("Delete", "confirm-delete", "is-danger"), memoryButton("Keep", "keep"));
      } else {
        actions.append(memoryButton("Edit", "edit"), memoryButton("Delete", "delete"));
      }
      for (const button of actions.querySelectorAll("button")) button.setAttribute("aria-describedby", textId);
      row.append(text, meta, actions);
    }
    for (const button of row.querySelectorAll("button")) button.disabled = busy;
    if (busy) row.setAttribute("aria-busy", "true");
    return row;
  }
}

/** Wire the long-memory parts of the panel to the host; returns them for start.js. */
const startMemoryPanel = (root, host) => {
  const progress = new MemoryProgress(root);
  const memories = new MemoriesSection(root, host);
  host.on(MEMORY_PROGRESS, (payload) => progress.onProgress(payload));
  host.on(MEMORY_CHANGED, (payload) => memories.onChanged(payload));
  const selectChat = (chatId) => {
    const id = typeof chatId === "string" && chatId ? chatId : null;
    progress.selectChat(id);
    return memories.selectChat(id);
  };
  document.addEventListener(EVENTS.chatSelected, (event) => selectChat(detailOf(event).chat_id));
  return { selectChat, memories: () => memories.snapshot() };
};
