/*
 * window.sidecar inside Tailor: the Smart Context panel talks to its host through
 * window.sidecar (static/panel/js/transport.js); Tailor offers window.request (JSON-RPC over its
 * WebSocket) for commands and dispatches each backend event as a CustomEvent on window, its
 * payload in event.detail. This script, sent before the panel by smart_context_hosts/tailor/host.py,
 * joins the two. Outside Tailor (no window.request) it does nothing and the panel's own
 * fallback applies. Being inlined in a script element, it must never contain a closing script
 * tag or an HTML comment opener.
 */
(() => {
  "use strict";
  const present = window.sidecar;
  if (present && typeof present.command === "function" && typeof present.on === "function") return;
  if (typeof window.request !== "function") return;

  /** Tailor answers {result} or {error: {message}}; the panel wants the command's own result. */
  const unwrap = (reply) => {
    if (reply && reply.error) {
      const text = typeof reply.error.message === "string" ? reply.error.message : "";
      return { status: "error", error: text || "Tailor could not run the command." };
    }
    return reply ? reply.result : undefined;
  };

  window.sidecar = {
    command: (name, args) => Promise.resolve(window.request(name, args || {})).then(unwrap),
    on: (name, fn) => {
      window.addEventListener(name, (event) => fn(event.detail));
    },
  };

  /* The panel follows the chat the page shows (sidecar:chat_selected on document). Tailor's chat
   * view says which chat it opened with chat:historyLoaded ({chatId}) on window, and keeps the
   * open one in window.activeChatId: announced once the panel has started. */
  const select = (chatId) => {
    if (typeof chatId !== "string" || !chatId) return;
    const detail = { chat_id: chatId };
    document.dispatchEvent(new CustomEvent("sidecar:chat_selected", { detail }));
  };
  window.addEventListener("chat:historyLoaded", (event) => select((event.detail || {}).chatId));
  const announce = () => window.setTimeout(() => select(window.activeChatId), 0);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", announce); // the panel starts on it too
  } else {
    announce();
  }
})();
