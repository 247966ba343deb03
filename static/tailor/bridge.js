/*
 * window.sidecar inside Tailor: the Smart Context panel talks to its host through
 * window.sidecar (static/panel/js/transport.js); Tailor offers window.request (JSON-RPC over its
 * WebSocket) for commands and dispatches each backend event as a CustomEvent on window, its
 * payload in event.detail. This script, sent before the panel by smart_context/tailor/host.py,
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
})();
