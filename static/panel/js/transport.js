/*
 * Talking to the host: through its window.sidecar when the page has one (the chat page loads
 * app/bridge.js; other hosts supply theirs), else over the sidecar's HTTP API and server-sent
 * events. Commands always resolve, never reject.
 */

const UNREACHABLE = "The Smart Context service could not be reached.";

const errorMessage = (err) =>
  err && typeof err.message === "string" && err.message ? err.message : UNREACHABLE;

/** A command's result as {status: "success", ...} or {status: "error", error: "<text>"}. */
const normalizeResult = (result) => {
  if (!isObject(result)) {
    return { status: "error", error: "The host sent an unexpected reply." };
  }
  if (result.status !== "success") {
    const text = typeof result.error === "string" && result.error ? result.error : "";
    return { status: "error", error: text || "The command failed." };
  }
  return result;
};

/** An event's payload. Hosts hand listeners the payload; be lenient with a raw MessageEvent. */
const eventPayload = (arg) => {
  if (arg && typeof arg.data === "string") {
    try {
      return JSON.parse(arg.data);
    } catch {
      return null;
    }
  }
  return arg;
};

const isBridge = (host) =>
  Boolean(host) && typeof host.command === "function" && typeof host.on === "function";

/** Commands over POST {apiBase}/api/commands/{name}, events from {apiBase}/api/events. */
const httpBridge = (apiBase) => {
  let source = null;
  return {
    command: async (name, args) => {
      const response = await fetch(`${apiBase}/api/commands/${encodeURIComponent(name)}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(args || {}),
      });
      return response.json().catch(() => ({
        status: "error",
        error: `HTTP ${response.status} from the host.`,
      }));
    },
    on: (name, fn) => {
      if (typeof EventSource === "undefined") return;
      if (!source) source = new EventSource(`${apiBase}/api/events`);
      source.addEventListener(name, fn);
    },
  };
};

/** The page's bridge, or the HTTP fallback at `apiBase`. */
const hostBridge = (apiBase) => (isBridge(window.sidecar) ? window.sidecar : httpBridge(apiBase));

/**
 * The panel's connection to its host: `command(name, args)` resolves to a normalized result,
 * `on(name, fn)` calls `fn(payload)` for each host event. `apiBase` (from the initial data) may
 * prefix the fallback's /api/... URLs.
 */
const connectHost = (apiBase) => {
  const base = typeof apiBase === "string" ? apiBase.replace(/\/+$/, "") : "";
  const bridge = hostBridge(base);
  return {
    command: async (name, args) => {
      try {
        return normalizeResult(await bridge.command(name, args));
      } catch (err) {
        return { status: "error", error: errorMessage(err) };
      }
    },
    on: (name, fn) => {
      bridge.on(name, (arg) => fn(eventPayload(arg)));
    },
  };
};
