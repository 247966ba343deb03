/*
 * The panel's DOM: renders a PanelState into the markup of static/panel/panel.html.j2, keeps one
 * element per topic bubble (keyed by label in a Map, so a bubble glides to its new place), and
 * turns clicks and keys into the intents it was given. It never changes the state itself.
 */

const LEAVE_MS = 420; // a leaving bubble fades out for this long, then goes
const MOVE_MS = 500; // a bubble glides to its new place for this long (panel.css)
// Arrow keys walk the bubbles from the largest to the smallest; Home and End jump to the ends.
const ARROW_STEPS = {
  ArrowRight: 1,
  ArrowDown: 1,
  ArrowLeft: -1,
  ArrowUp: -1,
  Home: -Infinity,
  End: Infinity,
};

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const sentence = (text) => text.charAt(0).toUpperCase() + text.slice(1);

const reducedMotion = () =>
  Boolean(window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches);

const statusText = (state) => {
  if (!state.chatId) return "No chat open";
  if (!state.loaded) return "Loading topics…";
  if (state.totalMessages === 0) return "No messages yet";
  if (!state.embeddingSearch || !state.activeTopics.length) return "All messages in context";
  if (state.fellBack) return sentence(state.note || "No message is close enough: all are sent");
  return `${state.includedIds.length} of ${state.totalMessages} messages in context`;
};

const hintText = (state, current) => {
  if (current !== "topics") return "";
  if (!state.similarityOn) {
    return "Similarity filter is off: every message is sent. Topics are shown for reference.";
  }
  if (state.filterOn && state.fellBack && state.selection === null) {
    return "Nothing is filtered: every message is sent with your next message.";
  }
  if (state.filterOn) {
    return "Only messages about the selected topics are sent with your next message.";
  }
  return "Select topics to send only the messages about them.";
};

const emptyText = (state, current) => {
  if (current === "no-chat") return "Open a chat to see its topics.";
  if (current === "empty") {
    if (state.extracting) return "Mapping this chat's topics…";
    return state.totalMessages
      ? "Topics appear after the first replies."
      : "Topics appear after the first replies. Start the conversation!";
  }
  return "";
};

class PanelView {
  /**
   * `root`: the panel element; `state`: the PanelState to show; `intents`: what the user asks
   * for, as functions: toggleTopic(label), setSimilarity(on), clearFilter(), dismissError().
   */
  constructor(root, state, intents) {
    this.root = root;
    this.state = state;
    this.intents = intents;
    this.el = {
      cloud: root.querySelector("#sc-cloud"),
      status: root.querySelector("#sc-status"),
      toggle: root.querySelector("#sc-similarity-toggle"),
      clear: root.querySelector("#sc-clear"),
      sticky: root.querySelector("[data-sticky-count]"),
      stickyCount: root.querySelector(".sc-sticky-count"),
      error: root.querySelector("#sc-error"),
      errorText: root.querySelector(".sc-error-text"),
      errorClose: root.querySelector(".sc-error-close"),
      empty: root.querySelector("#sc-empty"),
      hint: root.querySelector("#sc-hint"),
    };
    this.bubbles = new Map(); // label -> {node, countNode}
    this.lastLayoutKey = "";
    this.measure = null; // a canvas context to measure words, once needed (false: none)

    this.el.toggle.addEventListener("change", () => intents.setSimilarity(this.el.toggle.checked));
    this.el.clear.addEventListener("click", () => intents.clearFilter());
    this.el.errorClose.addEventListener("click", () => intents.dismissError());
    this.el.cloud.tabIndex = -1;
    this.#watchWidth();
  }

  hasBubble(label) {
    return this.bubbles.has(label);
  }

  /** Show the whole state. */
  render() {
    const { state, el, root } = this;
    const current = state.view;
    root.dataset.view = current;
    root.dataset.filter = state.filterOn ? "on" : "off";
    root.dataset.similarity = state.similarityOn ? "on" : "off";
    root.setAttribute("aria-busy", state.loading || state.selection !== null ? "true" : "false");

    el.toggle.checked = state.similarityOn;

    el.sticky.hidden = !(state.stickyCount > 0 && current !== "no-chat");
    el.sticky.dataset.stickyCount = String(state.stickyCount);
    el.stickyCount.textContent = String(state.stickyCount);
    el.sticky.setAttribute(
      "aria-label",
      `Instructions & Preferences: ${plural(state.stickyCount, "message")}, always in context`,
    );

    if (current === "topics") {
      this.#placeBubbles();
    } else if (current !== "loading") {
      // "loading" keeps the old bubbles only while refreshing the same chat
      this.clearBubbles();
      clearTimeout(this.shrinkTimer);
      el.cloud.style.height = "0px";
    }
    this.#renderBubbleStates();

    const empty = emptyText(state, current);
    el.empty.hidden = !empty;
    el.empty.textContent = empty;
    el.status.textContent = statusText(state);
    el.status.toggleAttribute("data-fallback", state.fellBack);
    el.clear.hidden = !state.filterOn;
    const hint = hintText(state, current);
    el.hint.hidden = !hint;
    el.hint.textContent = hint;
    this.renderError();
  }

  /** Show only the error line (state.error; empty hides it). */
  renderError() {
    this.el.error.hidden = !this.state.error;
    this.el.errorText.textContent = this.state.error;
  }

  /** Remove every bubble at once (another chat: nothing to glide from). */
  clearBubbles() {
    for (const { node } of this.bubbles.values()) node.remove();
    this.bubbles.clear();
    this.lastLayoutKey = "";
  }

  #placeBubbles() {
    const { state, el, bubbles } = this;
    const width = el.cloud.clientWidth || 280;
    const key = `${width}|${JSON.stringify(state.topics)}`;
    if (key === this.lastLayoutKey) return;
    this.lastLayoutKey = key;
    const plan = bubbleLayout(state.topics.map((t) => t.count), width);
    const hues = assignHues(state.topics.map((t) => t.label));
    const entering = [];
    const keep = new Set();
    state.topics.forEach((topic, i) => {
      const c = plan.circles[i];
      let bubble = bubbles.get(topic.label);
      if (!bubble) {
        bubble = this.#createBubble(topic.label);
        bubbles.set(topic.label, bubble);
        bubble.node.classList.add("sc-entering");
        entering.push(bubble);
        el.cloud.appendChild(bubble.node);
      }
      keep.add(topic.label);
      const { node } = bubble;
      const size = `${(2 * c.r).toFixed(2)}px`;
      node.style.width = size;
      node.style.height = size;
      node.style.transform = `translate(${(c.x - c.r).toFixed(2)}px, ${(c.y - c.r).toFixed(2)}px)`;
      const fit = labelFit(topic.label, c.r, (word) => this.#wordWidth(word));
      node.style.fontSize = `${fit.size.toFixed(1)}px`;
      node.dataset.fit = fit.clip ? "clip" : "full";
      node.style.setProperty("--sc-hue", String(hues.get(topic.label)));
      node.dataset.size = c.r < 24 ? "s" : c.r < 40 ? "m" : "l";
      bubble.countNode.textContent = String(topic.count);
      node.setAttribute("aria-label", `${topic.label}, ${plural(topic.count, "message")}`);
    });
    for (const [label, bubble] of bubbles) {
      if (!keep.has(label)) {
        bubbles.delete(label);
        this.#retireBubble(bubble);
      }
    }
    this.#setCloudHeight(plan.height);
    if (entering.length) {
      void el.cloud.offsetWidth; // commit the entering style so the entrance transitions
      for (const bubble of entering) bubble.node.classList.remove("sc-entering");
    }
  }

  /**
   * The cloud's height, so that no bubble ever hangs over the status line below it: at once
   * when the cloud grows, and only once the bubbles have glided to their places when it shrinks.
   */
  #setCloudHeight(height) {
    const { cloud } = this.el;
    clearTimeout(this.shrinkTimer);
    const px = `${height.toFixed(1)}px`;
    if (height >= cloud.offsetHeight || reducedMotion()) cloud.style.height = px;
    else this.shrinkTimer = setTimeout(() => (cloud.style.height = px), MOVE_MS);
  }

  #createBubble(label) {
    const node = document.createElement("div");
    node.className = "sc-bubble";
    node.dataset.topic = label;
    node.setAttribute("role", "button");
    const text = document.createElement("span");
    text.className = "sc-bubble-label";
    text.textContent = label;
    const countNode = document.createElement("span");
    countNode.className = "sc-bubble-count";
    countNode.setAttribute("aria-hidden", "true");
    node.append(text, countNode);
    node.addEventListener("click", () => this.intents.toggleTopic(label));
    node.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " " || event.key === "Spacebar") {
        event.preventDefault();
        if (!event.repeat) this.intents.toggleTopic(label);
      } else if (Object.hasOwn(ARROW_STEPS, event.key)) {
        event.preventDefault();
        this.#focusNeighbour(label, ARROW_STEPS[event.key]);
      }
    });
    return { node, countNode };
  }

  #focusNeighbour(label, step) {
    if (!this.state.similarityOn) return;
    const order = this.state.topics.map((t) => t.label).filter((l) => this.bubbles.has(l));
    const at = order.indexOf(label);
    if (at === -1 || !order.length) return;
    let next;
    if (step === -Infinity) next = 0;
    else if (step === Infinity) next = order.length - 1;
    else next = (at + step + order.length) % order.length;
    this.bubbles.get(order[next]).node.focus();
  }

  /** A bubble whose topic is gone: out of reach at once, faded out, then removed. */
  #retireBubble({ node }) {
    delete node.dataset.topic;
    node.removeAttribute("role");
    node.removeAttribute("aria-pressed");
    node.removeAttribute("aria-label");
    node.setAttribute("aria-hidden", "true");
    node.tabIndex = -1;
    node.classList.add("sc-leaving");
    if (document.activeElement === node) this.el.cloud.focus();
    if (reducedMotion()) node.remove();
    else window.setTimeout(() => node.remove(), LEAVE_MS);
  }

  #renderBubbleStates() {
    const interactive = this.state.similarityOn;
    const selected = new Set(this.state.selectedTopics);
    const focused = document.activeElement;
    if (!interactive && focused && focused.parentNode === this.el.cloud) {
      this.el.toggle.focus(); // the bubbles are leaving the tab order: keep focus somewhere useful
    }
    const fellBack = this.state.fellBack && this.state.selection === null;
    for (const [label, { node }] of this.bubbles) {
      node.setAttribute("aria-pressed", selected.has(label) ? "true" : "false");
      // a selected bubble that kept nothing says so: dashed, and in its tooltip
      const empty = fellBack && selected.has(label);
      node.toggleAttribute("data-fallback", empty);
      if (empty) node.title = sentence(this.state.note);
      else node.removeAttribute("title");
      if (interactive) {
        node.removeAttribute("aria-disabled");
        node.tabIndex = 0;
      } else {
        node.setAttribute("aria-disabled", "true");
        node.tabIndex = -1;
      }
    }
  }

  /** A word's width at 100px in the bubble font (a canvas: no layout, no reflow). */
  #wordWidth(word) {
    if (this.measure === null) {
      this.measure = document.createElement("canvas").getContext("2d") || false;
      if (this.measure) {
        const family = getComputedStyle(this.root).fontFamily || "sans-serif";
        this.measure.font = `600 100px ${family}`;
      }
    }
    return this.measure ? this.measure.measureText(word).width : word.length * 62;
  }

  /** Lay the bubbles out again when the cloud's width changes. */
  #watchWidth() {
    if (typeof ResizeObserver !== "function") return;
    let lastWidth = this.el.cloud.clientWidth;
    new ResizeObserver(() => {
      if (this.el.cloud.clientWidth !== lastWidth) {
        lastWidth = this.el.cloud.clientWidth;
        if (this.state.view === "topics") this.#placeBubbles();
      }
    }).observe(this.el.cloud);
  }
}
