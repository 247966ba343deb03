/*
 * The panel's actions: the commands it sends the host (load the topics, set the filter, switch
 * the similarity filter), what it does with the replies and with the host's events, and the DOM
 * filter event it dispatches for the chat view. Each reply carries a ticket: a reply overtaken by
 * a later request of its kind, or by a chat switch, changes nothing.
 */

const REFRESH_DELAY_MS = 120; // coalesces the refreshes after messages added in a burst

class PanelController {
  /** `state`: a PanelState; `view`: a PanelView of it; `host`: from connectHost(). */
  constructor(state, view, host) {
    this.state = state;
    this.view = view;
    this.host = host;
    this.lastDispatchKey = "";
    this.refreshTimer = 0;
  }

  /** Ask the host for the chat's topics and filter (without a chat: for its current chat). */
  async loadTopics() {
    const { state } = this;
    const chat = state.chatId;
    const ticket = ++state.seq.load;
    state.loading = true;
    this.view.render();
    const result = await this.host.command("smart_context.get_topics", chat ? { chat_id: chat } : {});
    if (ticket !== state.seq.load || chat !== state.chatId) {
      return result; // a newer load, or another chat, has taken over
    }
    state.loading = false;
    if (result.status === "success") {
      if (!chat && typeof result.chat_id === "string" && result.chat_id) {
        state.chatId = result.chat_id;
      }
      state.applyTopics(result);
      if (state.selection === null) state.applyFilter(result);
      if (typeof result.embedding_search === "boolean" && state.modeRequested === null) {
        state.embeddingSearch = result.embedding_search;
      }
      state.loaded = Boolean(state.chatId);
      this.dispatchFilterChanged(false);
    } else if (chat) {
      this.showError(result.error);
    }
    this.view.render();
    return result;
  }

  /** Filter the chat by these topics ([]: no filter). The selection shows at once. */
  async setFilter(topics) {
    const { state } = this;
    const chosen = stringList(topics);
    if (!state.chatId) return { status: "error", error: "Open a chat to filter its topics." };
    if (!state.similarityOn && chosen.length) {
      const off = "Turn on the similarity filter to filter by topic.";
      this.showError(off);
      return { status: "error", error: off };
    }
    const chat = state.chatId;
    const ticket = ++state.seq.filter;
    state.selection = chosen;
    this.view.render();
    const result = await this.host.command("smart_context.set_filter", {
      topics: chosen,
      chat_id: chat,
    });
    if (ticket !== state.seq.filter || chat !== state.chatId) {
      return result; // superseded by a later click or a chat switch
    }
    state.selection = null;
    if (result.status === "success") {
      state.applyFilter(result);
      this.clearError();
      this.dispatchFilterChanged(false);
    } else {
      this.showError(result.error);
    }
    this.view.render();
    return result;
  }

  /** Add the topic to the selection, or take it out (a bubble's click or key). */
  toggleTopic(label) {
    if (!this.state.similarityOn || !this.view.hasBubble(label)) return;
    const current = this.state.selectedTopics.slice();
    const at = current.indexOf(label);
    if (at === -1) current.push(label);
    else current.splice(at, 1);
    this.setFilter(current);
  }

  /** Turn the similarity filter on or off (the host writes it to the vault's settings). */
  async setSimilarityMode(enabled) {
    const { state } = this;
    const wanted = Boolean(enabled);
    const ticket = ++state.seq.mode;
    state.modeRequested = wanted;
    this.view.render();
    const result = await this.host.command("smart_context.set_similarity_mode", {
      enabled: wanted,
    });
    if (ticket !== state.seq.mode) return result;
    state.modeRequested = null;
    if (result.status === "success") {
      state.embeddingSearch =
        typeof result.embedding_search === "boolean" ? result.embedding_search : wanted;
      this.clearError();
      if (state.chatId) {
        this.loadTopics(); // what is in context changed: refresh it and tell the chat view
      }
    } else {
      this.showError(result.error);
    }
    this.view.render();
    return result;
  }

  /** Show another chat (null: none), and load its topics. */
  async selectChat(chatId) {
    const id = typeof chatId === "string" && chatId ? chatId : null;
    if (id !== this.state.chatId) {
      this.state.switchChat(id);
      this.view.clearBubbles();
    }
    this.view.render();
    return id ? this.loadTopics() : { status: "error", error: "No chat is open." };
  }

  showError(text) {
    this.state.error = text;
    this.view.renderError();
  }

  clearError() {
    this.state.error = "";
    this.view.renderError();
  }

  /**
   * Tell the page what is in context: the DOM event smart_context:filter_changed on document.
   * `skipIfUnchanged`: not when it would repeat the last one word for word.
   */
  dispatchFilterChanged(skipIfUnchanged) {
    if (!this.state.chatId) return;
    const detail = this.state.filterDetail();
    const key = JSON.stringify(detail);
    if (skipIfUnchanged && key === this.lastDispatchKey) return;
    this.lastDispatchKey = key;
    document.dispatchEvent(new CustomEvent(EVENTS.filterChangedDom, { detail }));
  }

  // Host events and page events.

  /** smart_context.topics_updated: the background pass found the chat's topics. */
  onTopicsUpdated(payload) {
    const { state } = this;
    if (!isObject(payload)) return;
    const chat = typeof payload.chat_id === "string" ? payload.chat_id : null;
    if (!state.chatId && chat && !document.body.hasAttribute("data-chat-id")) {
      state.chatId = chat; // a host that does not announce chats: follow its events
    }
    if (!chat || chat !== state.chatId) return;
    state.applyTopics(payload);
    state.loaded = true;
    this.view.render();
    // A new map moves messages between topics: what the selection keeps changes with it, so
    // the count and the highlight are asked for again (the event carries only the topics).
    if (state.activeTopics.length && state.topics.length) this.refreshSoon();
  }

  /** smart_context.filter_changed: the filter was set elsewhere (the palette, another page). */
  onFilterChanged(payload) {
    const { state } = this;
    if (!isObject(payload) || payload.chat_id !== state.chatId || !state.chatId) return;
    if (state.selection !== null) {
      return; // our own set_filter is in flight; its reply is the newer truth
    }
    state.applyFilter(payload);
    this.view.render();
    this.dispatchFilterChanged(true);
  }

  /** sidecar:message_added on the page: refresh the topics soon (the counts changed). */
  onMessageAdded(event) {
    const detail = detailOf(event);
    if (detail.chat_id && detail.chat_id !== this.state.chatId) return;
    this.refreshSoon();
  }

  /** Load the topics and the filter again shortly; a burst of reasons makes one request. */
  refreshSoon() {
    window.clearTimeout(this.refreshTimer);
    this.refreshTimer = window.setTimeout(() => {
      if (this.state.chatId) this.loadTopics();
    }, REFRESH_DELAY_MS);
  }
}
