/*
 * window.sidecar: the bridge between this page, the sidecar's HTTP API and the panels.
 *
 * Loaded as a classic, blocking script in <head> so it exists before any panel's inline script
 * runs. Commands are POST /api/commands/{name}; events come from ONE EventSource on /api/events,
 * shared by every listener on the page (a panel must not open its own when this bridge exists).
 */
(function () {
  "use strict";

  if (window.sidecar) return; // another host already supplied one

  var listeners = new Map(); // event name -> Set of functions
  var source = null;
  var retryDelay = 1000;
  var retryTimer = null;

  function deliver(name, message) {
    var data = null;
    try {
      data = message.data ? JSON.parse(message.data) : null;
    } catch (err) {
      console.warn("sidecar: event " + name + " carried data that is not JSON", err);
      return;
    }
    var fns = listeners.get(name);
    if (!fns) return;
    // Copy first: a listener may unsubscribe itself while we iterate.
    Array.from(fns).forEach(function (fn) {
      try {
        fn(data, name);
      } catch (err) {
        console.error("sidecar: a listener for " + name + " failed", err);
      }
    });
  }

  function subscribe(name) {
    if (source) {
      source.addEventListener(name, function (message) {
        deliver(name, message);
      });
    }
  }

  function connect() {
    retryTimer = null;
    if (typeof EventSource === "undefined") return;
    source = new EventSource("/api/events");
    source.addEventListener("open", function () {
      retryDelay = 1000;
    });
    source.addEventListener("error", function () {
      // The browser retries by itself while the stream is CONNECTING; once it gives up
      // (CLOSED, e.g. the server answered an error) we reconnect with a growing delay.
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        if (!retryTimer) retryTimer = setTimeout(connect, retryDelay);
        retryDelay = Math.min(retryDelay * 2, 30000);
      }
    });
    listeners.forEach(function (_fns, name) {
      subscribe(name);
    });
  }

  function ensureConnected() {
    if (!source && !retryTimer) connect();
  }

  /** Call a command; resolves to its JSON result ({status: "success" | "error", ...}). */
  function command(name, args) {
    return fetch("/api/commands/" + encodeURIComponent(name), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(args || {}),
    }).then(function (response) {
      return response.json().catch(function () {
        return {
          status: "error",
          error: "The sidecar answered " + response.status + " without a JSON body.",
        };
      });
    });
  }

  /** Listen to a sidecar event; returns a function that stops listening. */
  function on(name, fn) {
    var fns = listeners.get(name);
    if (!fns) {
      fns = new Set();
      listeners.set(name, fns);
      subscribe(name);
    }
    fns.add(fn);
    ensureConnected();
    return function off() {
      fns.delete(fn);
    };
  }

  // The panel may report the filter while the page's deferred modules are still loading;
  // keep the latest report so the chat view can apply it when it starts.
  var lastFilter = null;
  document.addEventListener("smart_context:filter_changed", function (event) {
    lastFilter = event.detail || null;
  });

  window.sidecar = {
    command: command,
    on: on,
    /** The detail of the latest smart_context:filter_changed event on this page, or null. */
    lastFilter: function () {
      return lastFilter;
    },
    /** The id of the chat open in this page, or null. */
    chatId: function () {
      return (document.body && document.body.dataset.chatId) || null;
    },
  };

  // Open the stream now rather than on first use, so events are not missed while scripts load.
  ensureConnected();
})();
