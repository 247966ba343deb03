// Tool calls in a reply: a small block per call (server.tool, its arguments, its state), with
// Approve / Decline while the reply waits on the user. Names and arguments come from the model
// and the vault's servers: they are hostile, so every piece goes in as text.

import { h } from "./dom.js";

const STATE_TEXT = {
  waiting: "Waiting for your approval",
  answering: "Sending your answer…",
  running: "Running…",
  done: "Done",
  failed: "Failed",
  declined: "Declined",
};

function title(server, name) {
  return server ? `${server}.${name}` : String(name ?? "");
}

function prettyArguments(args) {
  if (typeof args === "string") return args; // arguments the model sent that are not JSON
  try {
    return JSON.stringify(args ?? {}, null, 2);
  } catch {
    return String(args);
  }
}

/** The block of one call; `record`: {call_id, server_name, name, arguments}. */
function block(record, state) {
  const status = h("span", { class: "tool-call__status" });
  const el = h(
    "div",
    {
      class: "tool-call",
      dataset: { callId: String(record.call_id ?? "") },
      attrs: { role: "group", "aria-label": `Tool call ${title(record.server_name, record.name)}` },
    },
    h(
      "div",
      { class: "tool-call__head" },
      h("span", { class: "tool-call__icon", attrs: { "aria-hidden": "true" }, text: "⚙" }),
      h("code", { class: "tool-call__name", text: title(record.server_name, record.name) }),
      status,
    ),
    h("pre", { class: "tool-call__args", attrs: { tabindex: "0" } }, h("code", { text: prettyArguments(record.arguments) })),
  );
  setState(el, state);
  return el;
}

function setState(el, state) {
  el.dataset.state = state;
  el.querySelector(".tool-call__status").textContent = STATE_TEXT[state] || state;
}

function showSummary(el, summary) {
  let line = el.querySelector(".tool-call__summary");
  if (!line) {
    line = h("p", { class: "tool-call__summary" });
    el.append(line);
  }
  line.textContent = String(summary ?? "");
}

function storedState(record) {
  if (record.approved === false) return "declined";
  return record.ok ? "done" : "failed";
}

/** The stored record of a finished call (the assistant message's `tool_calls`). */
export function toolCallElement(record) {
  const el = block(record, storedState(record));
  if (record.summary) showSummary(el, record.summary);
  if (record.result) {
    const result = h("pre", { class: "tool-call__result", attrs: { tabindex: "0" } }, h("code", { text: String(record.result) }));
    el.append(h("details", { class: "tool-call__details" }, h("summary", { text: "Result" }), result));
  }
  return el;
}

/** The stored calls of a message, or null when it made none. */
export function toolCallList(records) {
  const valid = Array.isArray(records) ? records.filter((r) => r && typeof r === "object") : [];
  if (!valid.length) return null;
  return h("div", { class: "msg__tools" }, valid.map(toolCallElement));
}

/**
 * A call of the reply in flight, from its `tool_call` event. `onAnswer(callId, approve)`
 * posts the user's answer and returns a promise.
 */
export function liveToolCall(data, onAnswer) {
  const el = block(data, data.needs_approval ? "waiting" : "running");
  if (!data.needs_approval) return el;
  const answer = async (approve) => {
    for (const button of actions.querySelectorAll("button")) button.disabled = true;
    setState(el, "answering");
    try {
      await onAnswer(String(data.call_id), approve);
      actions.remove();
      if (el.dataset.state === "answering") setState(el, approve ? "running" : "declined");
    } catch (err) {
      setState(el, "failed");
      showSummary(el, `Your answer did not arrive: ${err.message}`);
      actions.remove();
    }
  };
  const actions = h(
    "div",
    { class: "tool-call__actions" },
    h("button", {
      type: "button",
      class: "button button--primary tool-call__approve",
      dataset: { action: "approve-tool" },
      text: "Approve",
      on: { click: () => answer(true) },
    }),
    h("button", {
      type: "button",
      class: "button button--ghost tool-call__decline",
      dataset: { action: "decline-tool" },
      text: "Decline",
      on: { click: () => answer(false) },
    }),
  );
  el.append(actions);
  return el;
}

/** Show the `tool_result` event on the call's block. */
export function finishToolCall(el, data) {
  const actions = el.querySelector(".tool-call__actions");
  if (actions) actions.remove(); // answered elsewhere, or it timed out
  const declined = el.dataset.state === "declined" || /declined/i.test(String(data.summary ?? ""));
  setState(el, data.ok ? "done" : declined ? "declined" : "failed");
  showSummary(el, data.summary);
}
