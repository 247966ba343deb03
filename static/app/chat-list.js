// The list of chats in the sidebar: links that work without scripts, opened in place with them.

import { h, relativeTime, toDate } from "./dom.js";

export class ChatList {
  /** `onOpen(id)` is called when a chat is picked with a plain click. */
  constructor(element, { onOpen }) {
    this.element = element;
    this.chats = [];
    this.current = null;
    element.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-chat-id]");
      // Ctrl/Cmd/Shift-click keeps the browser's own behaviour (a new tab or window).
      if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      onOpen(link.dataset.chatId);
    });
  }

  find(id) {
    return this.chats.find((c) => c.id === id) || null;
  }

  /** Show `chats` ({id, title, message_count, updated_at}), newest first as the sidecar sends. */
  render(chats) {
    this.chats = chats;
    const fragment = document.createDocumentFragment();
    for (const chat of chats) fragment.append(this.#item(chat));
    if (!chats.length) fragment.append(h("li", { class: "chat-list__empty", text: "No chats yet." }));
    this.element.replaceChildren(fragment);
  }

  /** Add a chat at the top (a new one, before the sidecar's list is read again). */
  prepend(chat) {
    this.render([chat, ...this.chats.filter((c) => c.id !== chat.id)]);
  }

  /** Mark chat `id` as the open one. */
  select(id) {
    this.current = id;
    for (const link of this.element.querySelectorAll("a[data-chat-id]")) {
      if (link.dataset.chatId === id) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  #item(chat) {
    const date = toDate(chat.updated_at);
    const count = chat.message_count || 0;
    return h(
      "li",
      {},
      h(
        "a",
        {
          class: "chat-link",
          href: `/?chat=${encodeURIComponent(chat.id)}`,
          dataset: { chatId: chat.id },
          attrs: { "aria-current": chat.id === this.current ? "page" : null },
        },
        h("span", { class: "chat-link__title", text: chat.title || "Untitled chat" }),
        h(
          "span",
          { class: "chat-link__meta" },
          h("span", { class: "chat-link__count", text: `${count} message${count === 1 ? "" : "s"}` }),
          date ? h("span", { text: ` · ${relativeTime(date)}` }) : null,
        ),
      ),
    );
  }
}
