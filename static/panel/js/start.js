/*
 * Wiring: find the panel, connect the states, the views, the controllers and the host, publish
 * window.SmartContextPanel (the chat page's command palette uses it), and load the topics and
 * the context items.
 * The only file that acts when evaluated; it runs once per panel element.
 */

/** The initial data render_panel() put in <script type="application/json" id="sc-initial">. */
const readInitial = () => {
  const node = document.getElementById("sc-initial");
  if (!node) return {};
  try {
    const data = JSON.parse(node.textContent || "{}");
    return isObject(data) ? data : {};
  } catch {
    return {};
  }
};

const startPanel = (root) => {
  const initial = readInitial();
  const host = connectHost(initial.api_base);
  const state = new PanelState();
  const view = new PanelView(root, state, {
    toggleTopic: (label) => controller.toggleTopic(label),
    setSimilarity: (on) => controller.setSimilarityMode(on),
    clearFilter: () => controller.setFilter([]),
    dismissError: () => controller.clearError(),
  });
  const controller = new PanelController(state, view, host);
  const items = new ItemsState();
  const itemsView = new ItemsView(root, items, {
    add: (item) => itemsController.add(item),
    remove: (item) => itemsController.remove(item),
    setSettings: (change) => itemsController.setSettings(change),
    dismissError: () => itemsController.dismissError(),
  });
  const itemsController = new ItemsController(items, itemsView, host);
  const memory = startMemoryPanel(root, host); // follows sidecar:chat_selected itself
  const usage = new UsageController(new UsageView(root), host);
  usage.listen();

  host.on(EVENTS.topicsUpdated, (payload) => controller.onTopicsUpdated(payload));
  host.on(EVENTS.filterChanged, (payload) => controller.onFilterChanged(payload));
  host.on(ITEMS_CHANGED, (payload) => itemsController.onItemsChanged(payload));
  document.addEventListener(EVENTS.chatSelected, (event) => {
    controller.selectChat(detailOf(event).chat_id);
    itemsController.selectChat(detailOf(event).chat_id);
  });
  document.addEventListener(EVENTS.messageAdded, (event) => {
    controller.onMessageAdded(event);
    itemsController.onMessageAdded(event); // an item file may have changed since: read them again
  });

  window.SmartContextPanel = {
    setFilter: (topics) => controller.setFilter(topics),
    getTopics: () => controller.loadTopics(),
    setSimilarityMode: (enabled) => controller.setSimilarityMode(enabled),
    selectChat: (chatId) => controller.selectChat(chatId),
    state: () => state.snapshot(),
    items: () => items.snapshot(itemsController.pending > 0),
    listItems: () => itemsController.load(),
    addItem: (item) => itemsController.add(item),
    removeItem: (item) => itemsController.remove(item),
    setSessionSettings: (change) => itemsController.setSettings(change),
    memories: () => memory.memories(),
    usage: () => usage.snapshot(),
  };

  const announced = document.body.dataset.chatId;
  state.seed(initial, announced);
  view.render();
  itemsView.render();
  if (state.chatId || !document.body.hasAttribute("data-chat-id")) {
    // without an announced chat, ask the host for its current one; then show its items
    controller.loadTopics().then(() => {
      if (state.chatId && !items.chatId) itemsController.selectChat(state.chatId);
      memory.selectChat(state.chatId);
      if (state.chatId && !usage.chatId) usage.selectChat(state.chatId);
    });
  } else {
    memory.selectChat(null); // no chat open: every stored memory
  }
};

const panelRoot = document.getElementById(PANEL_ID);
if (panelRoot && panelRoot.dataset.scReady !== "true") {
  panelRoot.dataset.scReady = "true";
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => startPanel(panelRoot));
  } else {
    startPanel(panelRoot);
  }
}
