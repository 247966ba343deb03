/*
 * What the panel knows (as the host last confirmed it), what it has asked for and is waiting on,
 * and what follows from both. No DOM and no host: the controller changes it, the view reads it.
 */

class PanelState {
  constructor() {
    this.chatId = null;
    this.loaded = false;
    this.loading = false;
    this.topics = []; // regular topics, [{label, count}], largest first
    this.stickyCount = 0;
    this.totalMessages = 0;
    this.extracting = false; // the host is mapping the chat's topics (get_topics said so)
    this.activeTopics = []; // as confirmed by the host
    this.includedIds = [];
    this.mode = ""; // "full", "filtered" or "fallback", as the host last said
    this.note = ""; // on a fallback or a failed click, the host's words for it
    this.embeddingSearch = true;
    this.selection = null; // the selection asked for while set_filter is in flight
    this.modeRequested = null; // the mode asked for while set_similarity_mode is in flight
    this.error = "";
    // Tickets: a reply is applied only if no later request of its kind was made meanwhile.
    this.seq = { filter: 0, mode: 0, load: 0 };
  }

  /** The similarity filter as shown: the mode asked for while it is in flight. */
  get similarityOn() {
    return this.modeRequested === null ? this.embeddingSearch : this.modeRequested;
  }

  /** The selected topics as shown: the selection asked for while it is in flight. */
  get selectedTopics() {
    return this.selection === null ? this.activeTopics : this.selection;
  }

  get filterOn() {
    return this.similarityOn && this.selectedTopics.length > 0;
  }

  /** "no-chat", "loading", "topics" or "empty". */
  get view() {
    if (!this.chatId) return "no-chat";
    if (!this.loaded) return "loading";
    return this.topics.length ? "topics" : "empty";
  }

  get pending() {
    return this.selection !== null || this.modeRequested !== null || this.loading;
  }

  /** A copy for the outside (window.SmartContextPanel.state()). */
  snapshot() {
    return {
      chat_id: this.chatId,
      view: this.view,
      topics: this.topics.map((t) => ({ label: t.label, count: t.count })),
      sticky_count: this.stickyCount,
      total_messages: this.totalMessages,
      active_topics: this.selectedTopics.slice(),
      included_ids: this.includedIds.slice(),
      mode: this.mode,
      note: this.note,
      embedding_search: this.similarityOn,
      filter_active: this.filterOn,
      pending: this.pending,
      error: this.error,
    };
  }

  /** The detail of the DOM filter event: what the host confirmed is in context. */
  filterDetail() {
    return {
      chat_id: this.chatId,
      active_topics: this.embeddingSearch ? this.activeTopics.slice() : [],
      included_ids: this.includedIds.slice(),
      total_messages: this.totalMessages,
      embedding_search: this.embeddingSearch,
      // how the host chose them, when it said: "full", "filtered" or "fallback" (with a note)
      ...(this.mode ? { mode: this.mode } : {}),
      ...(this.note ? { note: this.note } : {}),
    };
  }

  /** Take the topics of a get_topics result or a topics_updated event. */
  applyTopics(result) {
    const regular = [];
    const seen = new Set();
    let sticky = 0;
    for (const topic of Array.isArray(result.topics) ? result.topics : []) {
      if (!isObject(topic) || typeof topic.label !== "string" || !topic.label) continue;
      if (topic.sticky === true) {
        const ids = Array.isArray(topic.message_ids) ? topic.message_ids.length : 0;
        sticky = count(topic.count) || ids;
        continue;
      }
      if (!seen.has(topic.label)) {
        seen.add(topic.label);
        regular.push({ label: topic.label, count: count(topic.count) });
      }
    }
    regular.sort(
      (a, b) => b.count - a.count || (a.label < b.label ? -1 : a.label > b.label ? 1 : 0),
    );
    this.topics = regular;
    this.stickyCount = sticky;
    // a topics_updated event is the pass done: it says nothing of extracting
    this.extracting = result.extracting === true && !regular.length;
    if (result.total_messages !== undefined) this.totalMessages = count(result.total_messages);
  }

  /** Take the filter of a command result or a filter_changed event. */
  applyFilter(result) {
    if (Array.isArray(result.active_topics)) this.activeTopics = stringList(result.active_topics);
    if (Array.isArray(result.included_ids)) this.includedIds = stringList(result.included_ids);
    if (result.total_messages !== undefined) this.totalMessages = count(result.total_messages);
    if (typeof result.mode === "string") {
      this.mode = result.mode;
      this.note = typeof result.note === "string" ? result.note : "";
    }
  }

  /**
   * A selection that filters nothing: a click that kept nothing ("fallback"), or one that could
   * not run (the embedding model failed: "full" with the host's note). The full history is
   * sent, and the panel must say so and why.
   */
  get fellBack() {
    const unfiltered = this.mode === "fallback" || (this.mode === "full" && this.note !== "");
    return unfiltered && this.activeTopics.length > 0;
  }

  /** Forget the previous chat's data (replies still in flight for it will be ignored). */
  switchChat(chatId) {
    this.seq.filter++;
    this.seq.load++;
    this.chatId = chatId;
    this.loaded = false;
    this.loading = false;
    this.topics = [];
    this.stickyCount = 0;
    this.totalMessages = 0;
    this.extracting = false;
    this.activeTopics = [];
    this.includedIds = [];
    this.mode = "";
    this.note = "";
    this.selection = null;
    this.error = "";
  }

  /**
   * The state at start: the chat the page announces (`announced`), else the initial data's;
   * the initial topics and filter when they are that chat's, so the first paint needs no reply.
   */
  seed(initial, announced) {
    this.chatId = announced || (typeof initial.chat_id === "string" && initial.chat_id) || null;
    if (typeof initial.embedding_search === "boolean") {
      this.embeddingSearch = initial.embedding_search;
    }
    if (this.chatId && initial.chat_id === this.chatId && Array.isArray(initial.topics)) {
      this.applyTopics(initial);
      this.applyFilter(initial);
      this.loaded = true;
    }
  }
}
