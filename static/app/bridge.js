/*
 * window.sidecar: the bridge between a page, the sidecar's HTTP API and its panels.
 *
 * Commands are POST {base}/api/commands/{name}; events come from ONE EventSource on
 * {base}/api/events, shared by every listener on the page (a panel must not open its own when
 * this bridge exists).
 *
 * One implementation with two users, which is why this stays a classic script (no import/export):
 * - the chat page loads it as a classic, blocking script in <head> (static/app/index.html.j2), so
 *   window.sidecar exists before any panel's inline script runs. Loaded by its own <script src>,
 *   it installs window.sidecar at once (the last line);
 * - the Smart Context panel inlines it inside its own script (smart_context/panel.py,
 *   PANEL_SCRIPTS) as the fallback for hosts without a bridge. There it only declares
 *   createSidecarBridge, inside the panel's enclosing function, and static/panel/js/transport.js
 *   calls it when the panel starts, with the panel's api_base. Being inlined in a script element,
 *   this file must never contain a closing script tag or an HTML comment opener.
 */

/**
 * A bridge to the sidecar at `apiBase` ("": this page's origin), with the event stream already
 * opening, so that no event is missed while the page's other scripts load.
 */
const createSidecarBridge = (apiBase = "") => {
  const listeners = new Map(); // event name -> Set of functions
  let source = null;
  let retryDelay = 1000;
  let retryTimer = null;

  const deliver = (name, message) => {
    let data = null;
    try {
      data = message.data ? JSON.parse(message.data) : null;
    } catch (err) {
      console.warn(`sidecar: event ${name} carried data that is not JSON`, err);
      return;
    }
    const fns = listeners.get(name);
    if (!fns) return;
    // Copy first: a listener may unsubscribe itself while we iterate.
    for (const fn of [...fns]) {
      try {
        fn(data, name);
      } catch (err) {
        console.error(`sidecar: a listener for ${name} failed`, err);
      }
    }
  };

  const subscribe = (name) => {
    if (source) source.addEventListener(name, (message) => deliver(name, message));
  };

  const connect = () => {
    retryTimer = null;
    if (typeof EventSource === "undefined") return;
    source = new EventSource(`${apiBase}/api/events`);
    source.addEventListener("open", () => {
      retryDelay = 1000;
    });
    source.addEventListener("error", () => {
      // The browser retries by itself while the stream is CONNECTING; once it gives up
      // (CLOSED, e.g. the server answered an error) we reconnect with a growing delay.
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        if (!retryTimer) retryTimer = setTimeout(connect, retryDelay);
        retryDelay = Math.min(retryDelay * 2, 30000);
      }
    });
    for (const name of listeners.keys()) subscribe(name);
  };

  const ensureConnected = () => {
    if (!source && !retryTimer) connect();
  };

  /** Call a command; resolves to its JSON result ({status: "success" | "error", ...}). */
  const command = async (name, args) => {
    const response = await fetch(`${apiBase}/api/commands/${encodeURIComponent(name)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(args || {}),
    });
    return response.json().catch(() => ({
      status: "error",
      error: `The sidecar answered ${response.status} without a JSON body.`,
    }));
  };

  /** Listen to a sidecar event; returns a function that stops listening. */
  const on = (name, fn) => {
    let fns = listeners.get(name);
    if (!fns) {
      fns = new Set();
      listeners.set(name, fns);
      subscribe(name);
    }
    fns.add(fn);
    ensureConnected();
    return () => {
      fns.delete(fn);
    };
  };

  // The panel may report the filter while the page's deferred modules are still loading;
  // keep the latest report so the chat view can apply it when it starts.
  let lastFilter = null;
  document.addEventListener("smart_context:filter_changed", (event) => {
    lastFilter = event.detail || null;
  });

  ensureConnected();
  return {
    command,
    on,
    /** The detail of the latest smart_context:filter_changed event on this page, or null. */
    lastFilter: () => lastFilter,
    /** The id of the chat open in this page, or null. */
    chatId: () => (document.body && document.body.dataset.chatId) || null,
  };
};

// Loaded by its own <script src> (the chat page), unless another host already supplied a bridge.
if (document.currentScript?.src && !window.sidecar) window.sidecar = createSidecarBridge();
