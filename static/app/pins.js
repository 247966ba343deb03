// Pins: the user marks a message important (smart_context.mark_important) so a token budget
// sends it while it fits. The pin button on each message is drawn by messages.js; this module
// keeps the chat's pinned ids, loads them (list_marks), follows other tabs (memory_changed) and
// reverts a pin whose command failed.

import { announce } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

/** The pin icon, as an element built from constants (never markup). */
export function pinIcon() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "14");
  svg.setAttribute("height", "14");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", "M10.2 1.6 14.4 5.8 12.6 6.3 9.9 9 9.6 12.2 8.4 13.4 5.7 10.7 2.3 14.1 1.9 13.7 5.3 10.3 2.6 7.6 3.8 6.4 7 6.1 9.7 3.4z");
  path.setAttribute("fill", "currentColor");
  svg.append(path);
  return svg;
}

/** Show `button` as pinned or not: its pressed state and its title say the same. */
export function showPin(button, pinned) {
  button.setAttribute("aria-pressed", String(pinned));
  button.title = pinned
    ? "Pinned: sent with every request while it fits. Press to unpin."
    : "Pin: send this message with every request while it fits";
}

export class Pins {
  /**
   * `list`: the MessageList (its setPinned(ids) draws the buttons); `command(name, args)`: the
   * page's bridge; `notify(text, isError)`: the page's toast.
   */
  constructor(list, { command, notify }) {
    this.list = list;
    this.command = command;
    this.notify = notify;
    this.chatId = null;
    this.pinned = new Set();
    this.wanted = new Map(); // message id -> the state a command in flight asks for
    this.loads = 0;
  }

  /** Load the pins of chat `chatId` (null: none). */
  async load(chatId) {
    if (chatId !== this.chatId) {
      this.chatId = chatId;
      this.wanted.clear();
      this.#apply(new Set());
    }
    if (!chatId) return;
    const ticket = ++this.loads;
    let result;
    try {
      result = await this.command("smart_context.list_marks", { chat_id: chatId });
    } catch (err) {
      result = { status: "error", error: err.message };
    }
    if (ticket !== this.loads || chatId !== this.chatId) return; // overtaken
    if (!result || result.status !== "success") {
      // a host without long memory has no pins: the buttons stay, a press says why it fails
      console.warn("Could not load the pinned messages:", result && result.error);
      return;
    }
    const ids = new Set((result.important_ids || []).map(String));
    for (const [id, on] of this.wanted) {
      if (on) ids.add(id);
      else ids.delete(id); // a command in flight wins over what the host had before it
    }
    this.#apply(ids);
  }

  /** Pin or unpin message `id` (its button's press); a failure reverts and says why. */
  async toggle(id) {
    const chatId = this.chatId;
    if (!chatId || this.wanted.has(id)) return; // one command per message at a time
    const on = !this.pinned.has(id);
    this.wanted.set(id, on);
    this.#set(id, on);
    let result;
    try {
      result = await this.command("smart_context.mark_important", {
        chat_id: chatId,
        message_id: id,
        important: on,
      });
    } catch (err) {
      result = { status: "error", error: err.message };
    }
    if (chatId !== this.chatId) return;
    this.wanted.delete(id);
    if (result && result.status === "success") {
      announce(on ? "Message pinned." : "Message unpinned.");
      return;
    }
    this.#set(id, !on);
    const why = (result && result.error) || "Smart Context did not answer.";
    this.notify(`Could not ${on ? "pin" : "unpin"} the message: ${why}`, true);
  }

  /** smart_context.memory_changed: another tab (or this one) changed the open chat's pins. */
  onChanged(payload) {
    if (!payload || payload.what !== "marks" || !this.chatId) return;
    if (payload.chat_id && payload.chat_id !== this.chatId) return;
    this.load(this.chatId);
  }

  #set(id, on) {
    const ids = new Set(this.pinned);
    if (on) ids.add(id);
    else ids.delete(id);
    this.#apply(ids);
  }

  #apply(ids) {
    this.pinned = ids;
    this.list.setPinned(ids);
  }
}
