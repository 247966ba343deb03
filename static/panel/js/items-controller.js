/*
 * The context section's actions: list the vault's items for the open chat, add one to its
 * session or take one out, change its selection settings, and follow the host's
 * smart_context.items_changed event. Each reply carries a ticket, as in controller.js: a reply
 * overtaken by a chat switch changes nothing.
 */

const ITEMS_CHANGED = "smart_context.items_changed";
const NOT_SETTABLE = "This host cannot change the selection per chat: the vault's defaults apply.";

/** The arguments that name `item` to add_item and remove_item. */
const itemArguments = (chatId, item) => {
  const args = { chat_id: chatId, type: item.type, name: item.name };
  if (item.type === "tool") args.server_name = item.server_name;
  return args;
};

class ItemsController {
  /** `state`: an ItemsState; `view`: an ItemsView of it; `host`: from connectHost(). */
  constructor(state, view, host) {
    this.state = state;
    this.view = view;
    this.host = host;
    this.pending = 0;
    this.refreshTimer = 0;
  }

  /** Show another chat's items (null: none). */
  selectChat(chatId) {
    const id = typeof chatId === "string" && chatId ? chatId : null;
    if (id !== this.state.chatId) this.state.switchChat(id);
    this.view.render();
    return id ? this.load() : Promise.resolve({ status: "error", error: "No chat is open." });
  }

  /** Read the vault's items and the chat's session again. */
  async load() {
    const { state } = this;
    const chat = state.chatId;
    const ticket = ++state.seq.load;
    const result = await this.#send("smart_context.list_items", { chat_id: chat });
    if (ticket !== state.seq.load || chat !== state.chatId) return result;
    if (result.status === "success") {
      state.applyList(result);
    } else if (isUnknownCommand(result)) {
      state.available = false; // a host without context items: the section stays hidden
    } else {
      state.error = result.error;
    }
    this.view.render();
    return result;
  }

  /** Add `item` (a row of the state) to the chat's session by hand. */
  add(item) {
    return this.#change("smart_context.add_item", item);
  }

  /** Take `item` out of the chat's session. */
  remove(item) {
    return this.#change("smart_context.remove_item", item);
  }

  /**
   * Change the chat's selection settings: `change` holds some of context_top_k, context_top_n,
   * context_include_score, or a preset. The host answers the settings now in effect.
   */
  async setSettings(change) {
    const { state } = this;
    const chat = state.chatId;
    if (!chat) return { status: "error", error: "Open a chat first." };
    if (state.settingsAvailable === false) return { status: "error", error: NOT_SETTABLE };
    const ticket = ++state.seq.settings;
    const result = await this.#send("smart_context.set_session_settings", {
      chat_id: chat,
      settings: change,
    });
    if (ticket !== state.seq.settings || chat !== state.chatId) return result;
    if (result.status === "success") {
      state.applySettings(result.settings, result.preset);
      state.error = "";
    } else if (isUnknownCommand(result)) {
      state.settingsAvailable = false;
    } else {
      state.error = result.error;
    }
    this.view.render();
    return result;
  }

  /** smart_context.items_changed: the chat's session changed (here, in the palette, elsewhere). */
  onItemsChanged(payload) {
    if (!isObject(payload) || !this.state.chatId || payload.chat_id !== this.state.chatId) return;
    if (!this.state.loaded || !this.state.applySession(payload.items)) {
      this.load(); // an item the panel has not seen yet: read the vault's list again
      return;
    }
    this.view.render();
  }

  /** sidecar:message_added on the page: list the items again soon (files may have changed). */
  onMessageAdded(event) {
    const { state } = this;
    const chat = detailOf(event).chat_id;
    if (!state.available || !state.chatId || (chat && chat !== state.chatId)) return;
    window.clearTimeout(this.refreshTimer);
    this.refreshTimer = window.setTimeout(() => {
      if (state.chatId) this.load();
    }, REFRESH_DELAY_MS);
  }

  dismissError() {
    this.state.error = "";
    this.view.render();
  }

  async #change(command, item) {
    const { state } = this;
    const chat = state.chatId;
    if (!chat) return { status: "error", error: "Open a chat first." };
    const key = itemKey(item);
    state.busy.add(key);
    this.view.render();
    const result = await this.#send(command, itemArguments(chat, item));
    if (chat !== state.chatId) return result;
    state.busy.delete(key);
    if (result.status === "success") {
      state.error = "";
      if (!state.applySession(result.items)) this.load();
    } else {
      state.error = result.error;
    }
    this.view.render();
    return result;
  }

  /** A command, counted while in flight (window.SmartContextPanel.items().pending). */
  async #send(name, args) {
    this.pending++;
    try {
      return await this.host.command(name, args);
    } finally {
      this.pending--;
    }
  }
}
