/*
 * Talking to the host. The panel always goes through window.sidecar: the host's own when the page
 * has one (the chat page loads app/bridge.js; other hosts supply theirs); otherwise the HTTP
 * fallback of app/bridge.js (inlined before this file), installed as window.sidecar so that every
 * panel on the page shares its one event stream. Commands always resolve, never reject.
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

/**
 * The page's bridge, or else the HTTP fallback at `apiBase`, installed as window.sidecar (unless
 * something that is not a bridge already holds that name: it is left alone).
 */
const hostBridge = (apiBase) => {
  if (isBridge(window.sidecar)) return window.sidecar;
  const bridge = createSidecarBridge(apiBase);
  if (!window.sidecar) window.sidecar = bridge;
  return bridge;
};

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
