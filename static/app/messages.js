// The message list: rendering (the sidecar's cleaned HTML of each text, else text nodes), the
// streaming bubble, highlights.

import { h, shortTime, longTime, toDate } from "./dom.js";
import { finishToolCall, liveToolCall, toolCallList } from "./tool-calls.js";
import { pinIcon, showPin } from "./pins.js";

const ROLE_NAMES = { user: "You", assistant: "Assistant", system: "System", tool: "Tool" };

/**
 * Show a message's text in `parent`: `html` is the sidecar's rendering of it from Markdown,
 * already cleaned there against an allowlist (smart_context_hosts/sidecar/markdown.py), and the
 * only markup this page ever inserts. A <template> parses it inert: nothing in it runs or loads
 * while it is parsed. Without `html` (a message still being sent) the text shows as text.
 */
export function renderText(parent, text, html) {
  if (typeof html === "string") {
    const template = document.createElement("template");
    template.innerHTML = html;
    parent.append(h("div", { class: "md" }, template.content));
  } else if (text) {
    parent.append(h("p", { class: "msg__plain", text: String(text) }));
  }
}

function isNotice(message) {
  return message.role === "assistant" && Boolean(message.notice);
}

/** One message element. Pure: depends only on the message (and `pin`: draw its pin). */
export function messageElement(message, { pin = false } = {}) {
  const role = message.role || "assistant";
  const notice = isNotice(message);
  const failed = !notice && message.role === "assistant" && Boolean(message.error);
  const date = toDate(message.created_at);
  const classes = ["msg", `msg--${role}`];
  if (notice) classes.push("msg--notice");
  if (failed) classes.push("msg--error");

  const meta = h(
    "header",
    { class: "msg__meta" },
    h("span", { class: "msg__role", text: notice ? "Notice" : ROLE_NAMES[role] || role }),
    date ? h("time", { dateTime: date.toISOString(), title: longTime(date), text: shortTime(date) }) : null,
  );
  const body = h("div", { class: "msg__body" });
  const tools = role === "assistant" ? toolCallList(message.tool_calls) : null;
  if (tools) body.append(tools);
  if (failed) {
    // A stored failed reply: what arrived before the failure, then the error itself.
    if (message.partial_content) renderText(body, message.partial_content, message.partial_content_html);
    body.append(h("div", { class: "msg__alert", text: message.error }));
  } else {
    renderText(body, message.content, message.content_html);
  }
  if (role === "assistant" && message.model && !notice && !failed) {
    meta.append(h("span", { class: "msg__model", text: message.model }));
  }
  // a host note is never sent to the model: there is nothing to pin
  if (pin && !notice && !failed && message.id !== undefined && message.id !== null) meta.append(pinButton());

  const el = h("article", { class: classes.join(" "), dataset: { messageId: message.id, role } }, meta, body);
  if (notice) {
    el.dataset.notice = message.notice;
    body.prepend(h("span", { class: "msg__notice-icon", attrs: { "aria-hidden": "true" }, text: "i" }));
  }
  if (role === "assistant" && message.smart_context) {
    el.append(
      h(
        "div",
        { class: "msg__actions" },
        h("button", {
          type: "button",
          class: "chip-button",
          dataset: { action: "view-context" },
          attrs: { "aria-haspopup": "dialog" },
          text: notice ? "View context that would be sent" : "View context",
        }),
      ),
    );
  }
  return el;
}

/** The pin of a message (its state is set by MessageList.setPinned). */
function pinButton() {
  const button = h(
    "button",
    { type: "button", class: "msg__pin", dataset: { action: "pin" }, attrs: { "aria-label": "Pin this message" } },
    pinIcon(),
  );
  showPin(button, false);
  return button;
}

export class MessageList {
  /** `onViewContext(id, button)` and `onPin(id)`: a message's buttons were pressed. */
  constructor(container, { onViewContext, onPin } = {}) {
    this.container = container;
    this.messages = [];
    this.elements = new Map(); // message id -> element
    this.included = null; // Set of ids in context while a filter is active, else null
    this.pinned = new Set(); // ids of the messages the user pinned
    this.pins = Boolean(onPin); // without a handler (a host without pins) there is no pin
    container.addEventListener("click", (event) => {
      const button = event.target.closest("[data-action='view-context'], [data-action='pin']");
      const owner = button && button.closest("[data-message-id]");
      if (!owner) return;
      const id = owner.dataset.messageId;
      if (button.dataset.action === "pin") {
        if (onPin) onPin(id);
      } else if (onViewContext) {
        onViewContext(id, button);
      }
    });
  }

  /** Show the messages whose id is in `ids` (a Set of strings) as pinned, the rest not. */
  setPinned(ids) {
    const before = this.pinned;
    this.pinned = ids;
    for (const id of new Set([...before, ...ids])) {
      const pin = this.elements.get(id)?.querySelector(".msg__pin");
      if (pin) showPin(pin, ids.has(id));
    }
  }

  /** Replace everything with `messages`, built in one fragment (fast for long chats). */
  render(messages) {
    this.messages = messages.slice();
    this.elements.clear();
    const fragment = document.createDocumentFragment();
    for (const message of this.messages) fragment.append(this.#build(message));
    this.container.replaceChildren(fragment);
  }

  /** Replace the temporary elements `olds` with the stored `messages`. */
  replace(olds, messages) {
    const fragment = document.createDocumentFragment();
    for (const message of messages) {
      this.messages.push(message);
      fragment.append(this.#build(message));
    }
    const anchor = olds.find((el) => el && el.isConnected);
    if (anchor) anchor.before(fragment);
    else this.container.append(fragment);
    for (const el of olds) if (el) el.remove();
  }

  /** Append a user bubble and a "Thinking…" assistant bubble; returns a handle to stream into. */
  pending(content) {
    const user = messageElement({ id: "", role: "user", content, created_at: new Date().toISOString() });
    user.classList.add("is-pending");
    delete user.dataset.messageId; // it gets its real id when the reply is done
    const text = document.createTextNode("");
    const status = h("p", { class: "msg__thinking", text: "Thinking…" });
    const tools = h("div", { class: "msg__tools", hidden: true });
    const stream = h("p", { class: "msg__stream" }, text);
    const body = h("div", { class: "msg__body", attrs: { "aria-live": "polite" } }, status, tools, stream);
    const assistant = h(
      "article",
      { class: "msg msg--assistant is-streaming is-thinking", attrs: { "aria-busy": "true" } },
      h("header", { class: "msg__meta" }, h("span", { class: "msg__role", text: "Assistant" })),
      body,
    );
    this.container.append(user, assistant);
    return new PendingReply(user, assistant, text, status, tools);
  }

  /** Give the temporary element `el` the identity of the stored `message`. */
  adopt(el, message) {
    if (!message || message.id === undefined || message.id === null) return;
    el.dataset.messageId = String(message.id);
    this.messages.push(message);
    this.elements.set(String(message.id), el);
    const meta = el.querySelector(".msg__meta");
    if (this.pins && message.role === "user" && meta && !meta.querySelector(".msg__pin")) meta.append(pinButton());
    if (this.included) this.#mark(el, this.included.has(String(message.id)));
  }

  /** Mark the messages whose id is in `ids` (a Set), or clear every mark when `ids` is null. */
  setHighlight(ids) {
    this.included = ids;
    this.container.classList.toggle("is-filtered", Boolean(ids));
    for (const [id, el] of this.elements) this.#mark(el, Boolean(ids) && ids.has(id));
  }

  element(id) {
    return this.elements.get(id) || null;
  }

  message(id) {
    return this.messages.find((m) => m.id === id) || null;
  }

  #build(message) {
    const el = messageElement(message, { pin: this.pins });
    if (message.id !== undefined && message.id !== null) {
      this.elements.set(String(message.id), el);
      if (this.included && this.included.has(String(message.id))) this.#mark(el, true);
      const pin = this.pinned.has(String(message.id)) && el.querySelector(".msg__pin");
      if (pin) showPin(pin, true);
    }
    return el;
  }

  #mark(el, on) {
    if (el.hasAttribute("data-in-context") === on) return;
    el.toggleAttribute("data-in-context", on);
    el.classList.toggle("in-context", on);
  }
}

/** The assistant bubble of a reply in flight. */
class PendingReply {
  constructor(user, assistant, textNode, status, tools) {
    this.user = user;
    this.assistant = assistant;
    this.textNode = textNode;
    this.status = status;
    this.tools = tools;
    this.calls = new Map(); // call id -> its block
    this.buffer = "";
    this.frame = 0;
  }

  #started() {
    if (this.assistant.classList.contains("is-thinking")) {
      this.assistant.classList.remove("is-thinking");
      this.status.remove();
    }
  }

  /** Append streamed text; the DOM is updated at most once per frame. */
  append(text) {
    if (!text) return;
    this.buffer += text;
    this.#started();
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.textNode.data = this.buffer;
      });
    }
  }

  /** Show a `tool_call` event; `onAnswer(callId, approve)` posts the user's answer. */
  toolCall(data, onAnswer) {
    this.#started();
    const el = liveToolCall(data, onAnswer);
    this.calls.set(String(data.call_id), el);
    this.tools.hidden = false;
    this.tools.append(el);
  }

  /** Show a `tool_result` event on its call. */
  toolResult(data) {
    const el = this.calls.get(String(data.call_id));
    if (el) finishToolCall(el, data);
  }

  /** Show `message` as the reply's error; the user's message stays. `retry` re-sends. */
  fail(message, retry) {
    cancelAnimationFrame(this.frame);
    this.textNode.data = this.buffer;
    this.user.classList.remove("is-pending");
    this.user.classList.add("is-unsent");
    this.assistant.classList.remove("is-thinking", "is-streaming");
    this.assistant.classList.add("msg--error");
    this.assistant.removeAttribute("aria-busy");
    this.status.remove();
    const alert = h(
      "div",
      { class: "msg__alert", attrs: { role: "alert" } },
      h("strong", { text: "The reply failed. " }),
      document.createTextNode(message),
    );
    const actions = h("div", { class: "msg__actions" });
    if (retry) {
      const on = { click: retry };
      actions.append(h("button", { type: "button", class: "chip-button", text: "Try again", on }));
    }
    actions.append(
      h("button", {
        type: "button",
        class: "chip-button",
        text: "Dismiss",
        on: { click: () => this.assistant.remove() },
      }),
    );
    this.assistant.querySelector(".msg__body").append(alert);
    this.assistant.append(actions);
  }

  elements() {
    return [this.user, this.assistant];
  }
}
