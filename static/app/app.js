// The chat page: chat list, messages, composer, highlights, "View context" and the palette.

import * as api from "./api.js";
import { h, announce, excerpt } from "./dom.js";
import { ChatList } from "./chat-list.js";
import { MessageList } from "./messages.js";
import { closeDrawers, notify, setUpDrawers } from "./shell.js";
import { ContextDialog } from "./context-dialog.js";
import { loadDetails } from "./context-budget.js";
import { Palette } from "./palette.js";
import { rootView, setFilter } from "./commands.js";
import { finishToolCall, liveToolCall } from "./tool-calls.js";
import { Pins } from "./pins.js";

const $ = (id) => document.getElementById(id);

const boot = JSON.parse($("sc-boot").textContent || "{}");
/** Whether the host answers command `name` (a host that does not list them: assume it does). */
const hasCommand = (name) => !Array.isArray(boot.commands) || boot.commands.includes(name);
const state = {
  chatId: boot.chat_id || document.body.dataset.chatId || null,
  sending: false,
  loadToken: 0,
};

const ui = {
  title: $("chat-title"),
  subtitle: $("chat-subtitle"),
  messages: $("messages"),
  scroller: $("message-scroller"),
  empty: $("empty-state"),
  form: $("composer"),
  input: $("composer-input"),
  send: $("composer-send"),
  filter: $("filter-summary"),
};

const chatList = new ChatList($("chat-list"), {
  onOpen: (id) => {
    openChat(id);
    closeDrawers();
  },
});
chatList.current = state.chatId;
const list = new MessageList(ui.messages, {
  onViewContext: (id, button) => contextDialog.open(list.messages, id, button),
  onPin: hasCommand("smart_context.mark_important") ? (id) => pins.toggle(id) : null,
});
const pins = new Pins(list, { command: (name, args) => window.sidecar.command(name, args), notify });
const contextDialog = new ContextDialog($("context-dialog"), {
  onJump: jumpTo,
  loadItems: () =>
    window.sidecar.command("smart_context.list_items", { chat_id: state.chatId, with_text: true }),
  loadMemory: hasCommand("smart_context.list_summaries")
    ? () => loadDetails((name, args) => window.sidecar.command(name, args), state.chatId)
    : null,
});
const palette = new Palette(
  $("palette"),
  rootView({
    chatId: () => state.chatId,
    chats: () => chatList.chats,
    openChat: (id) => openChat(id),
    newChat: () => newChat(),
    focusInput: () => ui.input.focus(),
    previewContext: () => previewContext(ui.input),
    notify,
  }),
);

// ---- chat list -------------------------------------------------------------------------------

async function refreshChats() {
  try {
    const { chats, damaged } = await api.chatIndex();
    chatList.render(chats);
    showDamaged(damaged);
    const current = chatList.find(state.chatId);
    const idle = !state.sending && !ui.messages.hasAttribute("aria-busy");
    if (current && current.title && idle) setChatHeader(current, list.messages);
  } catch (err) {
    console.warn("Could not refresh the chat list:", err);
  }
}

/** Chat files that could not be read: which, and where their content was kept. */
const damagedNotice = h("div", { class: "damaged-files", attrs: { role: "alert" }, hidden: true });
$("chat-list").after(damagedNotice);

function showDamaged(damaged) {
  damagedNotice.hidden = !damaged.length;
  if (!damaged.length) return damagedNotice.replaceChildren();
  const n = damaged.length;
  damagedNotice.replaceChildren(
    h("p", {
      text:
        `${n} chat file${n === 1 ? " was" : "s were"} damaged and set aside, unchanged. ` +
        "Open it in a text editor to recover what it holds, then delete it:",
    }),
    h("ul", {}, damaged.map((d) => h("li", {}, h("code", { text: d.file })))),
  );
}

/** Warnings the sidecar gave with a chat (a damaged earlier file, a value JSON cannot carry). */
const chatWarnings = h("div", { class: "chat-warnings", attrs: { role: "alert" }, hidden: true });
$("filter-summary").after(chatWarnings);

function showChatWarnings(warnings) {
  const list = Array.isArray(warnings) ? warnings.filter((w) => typeof w === "string") : [];
  chatWarnings.hidden = !list.length;
  chatWarnings.replaceChildren(...list.map((text) => h("p", { class: "banner", text })));
}

// ---- opening a chat --------------------------------------------------------------------------

/**
 * How many of `messages` are the chat's own: what the user wrote and the model answered. The
 * sidecar's notices ("no model is configured") and failed replies are shown but were never part
 * of the conversation; the panel's "N of M in context" counts the same way.
 */
function chatMessageCount(messages) {
  const real = (m) => (m.role === "user" || m.role === "assistant") && !("notice" in m) && !("error" in m);
  return messages ? messages.filter((m) => m && real(m)).length : 0;
}

function setChatHeader(chat, messages) {
  const title = (chat && chat.title) || (state.chatId ? "Untitled chat" : "Smart Context");
  ui.title.textContent = title;
  document.title = state.chatId ? `${title} · Smart Context` : "Smart Context";
  const n = chatMessageCount(messages);
  ui.subtitle.textContent = state.chatId ? `${n} message${n === 1 ? "" : "s"}` : "No chat open";
}

function showEmpty(on) {
  ui.empty.hidden = !on;
}

/** Open chat `id`: load it, update URL and body, tell the panels. */
async function openChat(id, { push = true } = {}) {
  const token = ++state.loadToken;
  const changed = id !== state.chatId;
  state.chatId = id;
  document.body.dataset.chatId = id || "";
  if (changed) list.setHighlight(null); // the panel reports the new chat's filter
  if (list.pins) pins.load(id);
  if (push) {
    const url = new URL(location.href);
    url.searchParams.set("chat", id);
    if (url.href !== location.href) history.pushState({ chatId: id }, "", url);
    else history.replaceState({ chatId: id }, "");
  }
  chatList.select(id);
  if (changed) document.dispatchEvent(new CustomEvent("sidecar:chat_selected", { detail: { chat_id: id } }));

  const meta = chatList.find(id);
  setChatHeader(meta, null);
  ui.subtitle.textContent = "Loading…";
  ui.messages.setAttribute("aria-busy", "true");
  showEmpty(false);
  try {
    const chat = await api.loadChat(id);
    if (token !== state.loadToken) return; // another chat was opened meanwhile
    const messages = Array.isArray(chat.messages) ? chat.messages : [];
    showChatWarnings(chat.warnings);
    const start = performance.now();
    list.render(messages);
    performance.measure("sc:render-chat", { start }); // building the message list (benchmarks)
    setChatHeader({ title: chat.title || (meta && meta.title) }, messages);
    showEmpty(!messages.length);
    scrollToBottom(true);
  } catch (err) {
    if (token !== state.loadToken) return;
    list.render([]);
    showChatWarnings([]);
    ui.messages.append(h("p", { class: "load-error", attrs: { role: "alert" }, text: err.message }));
    ui.subtitle.textContent = "Could not open this chat";
  } finally {
    if (token === state.loadToken) ui.messages.removeAttribute("aria-busy");
  }
}

async function newChat(title) {
  try {
    const chat = await api.createChat(title);
    chatList.prepend({ id: chat.id, title: chat.title || title || "New chat", message_count: 0 });
    await openChat(chat.id);
    refreshChats();
    ui.input.focus();
    return chat.id;
  } catch (err) {
    notify(`Could not create a chat: ${err.message}`, true);
    return null;
  }
}

$("new-chat").addEventListener("click", () => newChat());

window.addEventListener("popstate", (event) => {
  const fromUrl = new URL(location.href).searchParams.get("chat");
  const id = (event.state && event.state.chatId) || fromUrl || boot.chat_id;
  if (id && id !== state.chatId) openChat(id, { push: false });
});

/**
 * View context before sending: a dry run of the message box's text shown in the View context
 * dialog, as if it were the reply's record. The relevant messages depend on the message, so an
 * empty box asks for one instead of previewing a placeholder.
 */
async function previewContext(opener) {
  if (!state.chatId) return notify("Open or start a chat first.", true);
  const content = ui.input.value.trim();
  if (!content) {
    ui.input.focus();
    return notify("Write the message first: what is sent depends on it.", true);
  }
  let result;
  try {
    result = await api.dryRun(state.chatId, content);
  } catch (err) {
    return notify(`Could not preview the context: ${err.message}`, true);
  }
  if (result.aborted) return notify(`This message would not be sent: ${result.aborted}`, true);
  const ask = { id: "preview:message", role: "user", content };
  const reply = {
    id: "preview:reply",
    role: "assistant",
    smart_context: result.smart_context || { mode: "full" },
    request_context: result.request_context || null,
  };
  contextDialog.open([...list.messages, ask, reply], reply.id, opener, "What this message would be sent with");
}

// ---- scrolling ---------------------------------------------------------------------------------

// Messages off screen are laid out at an estimated height (content-visibility in app.css), so
// the list grows as the ones near the end are drawn: a chat scrolled to its end once stopped
// short of it. Until the user scrolls, the view stays at the end while the list grows.
let pinnedToEnd = false;
new ResizeObserver(() => {
  if (pinnedToEnd) ui.scroller.scrollTop = ui.scroller.scrollHeight;
}).observe(ui.messages);
for (const name of ["wheel", "touchstart", "pointerdown", "keydown"]) {
  ui.scroller.addEventListener(name, () => { pinnedToEnd = false; }, { passive: true });
}

function nearBottom() {
  const s = ui.scroller;
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

function scrollToBottom(force = false) {
  if (force) pinnedToEnd = true;
  if (force || nearBottom()) ui.scroller.scrollTop = ui.scroller.scrollHeight;
}

/** After a bubble click: when no message in context is in view, the latest one is brought in. */
function showInContext() {
  const kept = ui.messages.querySelectorAll(".msg[data-in-context]");
  if (!kept.length) return;
  const view = ui.scroller.getBoundingClientRect();
  const seen = [...kept].some((el) => {
    const box = el.getBoundingClientRect();
    return box.bottom > view.top && box.top < view.bottom;
  });
  if (seen) return;
  pinnedToEnd = false;
  kept[kept.length - 1].scrollIntoView({ block: "center" });
}

function jumpTo(id) {
  const el = list.element(id);
  if (!el) return;
  pinnedToEnd = false;
  el.scrollIntoView({ block: "center" });
  el.setAttribute("tabindex", "-1");
  el.focus({ preventScroll: true });
  el.classList.remove("is-flash");
  void el.offsetWidth; // restart the animation
  el.classList.add("is-flash");
}

// ---- sending -----------------------------------------------------------------------------------

function setBusy(busy) {
  state.sending = busy;
  ui.input.disabled = busy;
  ui.send.disabled = busy;
  ui.form.setAttribute("aria-busy", String(busy));
  ui.send.textContent = busy ? "Sending…" : "Send";
}

async function send(content) {
  if (state.sending || !content.trim()) return;
  setBusy(true);
  let chatId = state.chatId;
  if (!chatId) {
    chatId = await newChat(excerpt(content, 60));
    if (!chatId) return setBusy(false);
    setBusy(true);
  }
  ui.input.value = "";
  autosize();
  showEmpty(false);
  const pending = list.pending(content);
  scrollToBottom(true);
  announce("Thinking…");
  try {
    const done = await api.sendMessage(chatId, content, {
      token: (data) => {
        pending.append(data.text || "");
        scrollToBottom();
      },
      tool_call: (data) => {
        pending.toolCall(data, (callId, approve) => api.answerToolCall(chatId, callId, approve));
        if (data.needs_approval) announce("A tool call is waiting for your approval.");
        scrollToBottom();
      },
      tool_result: (data) => {
        pending.toolResult(data);
        scrollToBottom();
      },
    });
    if (state.chatId === chatId) {
      list.replace(pending.elements(), [done.user_message, done.assistant_message].filter(Boolean));
      setChatHeader({ title: ui.title.textContent }, list.messages);
      scrollToBottom(true);
    }
    const reply = done.assistant_message || {};
    announce(reply.notice ? "No model is configured: no reply was generated." : "Reply received.");
    messageAdded(chatId);
  } catch (err) {
    // The sidecar stores the user's message before the model runs: when the error says so,
    // the bubbles take the stored ids, and "Try again" sends the text as a new message.
    const stored = err.data && err.data.user_message;
    if (stored && state.chatId === chatId) {
      list.adopt(pending.user, err.data.user_message);
      list.adopt(pending.assistant, err.data.assistant_message);
    }
    pending.fail(err.message, () => {
      if (!stored) for (const el of pending.elements()) el.remove();
      send(content);
    });
    scrollToBottom(true);
    announce(`The reply failed: ${err.message}`);
    if (stored) messageAdded(chatId);
  } finally {
    setBusy(false);
    refreshChats();
    if (state.chatId === chatId) ui.input.focus();
  }
}

/** Tell the panels that chat `chatId` has new messages (the "N of M" count changed). */
function messageAdded(chatId) {
  document.dispatchEvent(new CustomEvent("sidecar:message_added", { detail: { chat_id: chatId } }));
}

function autosize() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 240)}px`;
}

ui.form.addEventListener("submit", (event) => {
  event.preventDefault();
  send(ui.input.value);
});
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send(ui.input.value);
  }
});
ui.input.addEventListener("input", autosize);

// ---- highlights from the Smart Context panel ---------------------------------------------------

function applyFilter(detail) {
  if (!detail) return;
  if (detail.chat_id && state.chatId && detail.chat_id !== state.chatId) return;
  const topics = Array.isArray(detail.active_topics) ? detail.active_topics : [];
  const ids = topics.length ? new Set((detail.included_ids || []).map(String)) : null;
  const start = performance.now();
  list.setHighlight(ids);
  performance.measure("sc:highlight", { start }); // how long the DOM work took (benchmarks)
  if (ids && ids.size) showInContext();
  // a click that kept nothing, or that the embedding model could not score, says why
  const unfiltered = detail.mode === "fallback" || detail.mode === "full";
  const note = unfiltered && typeof detail.note === "string" ? detail.note : "";
  renderFilterSummary(topics, ids, detail.total_messages, note);
}

function renderFilterSummary(topics, ids, total, note) {
  if (!topics.length) {
    ui.filter.hidden = true;
    ui.filter.replaceChildren();
    return;
  }
  const count = typeof total === "number" ? `${ids.size} of ${total}` : `${ids.size}`;
  // A click that kept nothing says so: never "N of N in context" for a filter that did nothing.
  const text = note
    ? `${note.charAt(0).toUpperCase()}${note.slice(1)}`
    : `Filtered by ${topics.join(", ")} · ${count} in context`;
  ui.filter.classList.toggle("is-fallback", Boolean(note));
  ui.filter.replaceChildren(
    h("span", { class: "filter-summary__dot", attrs: { "aria-hidden": "true" } }),
    h("span", { class: "filter-summary__text" }, text),
    h("button", {
      type: "button",
      class: "link-button",
      text: "Clear",
      on: { click: () => setFilter([], state.chatId).catch((err) => notify(err.message, true)) },
    }),
  );
  ui.filter.hidden = false;
}

document.addEventListener("smart_context:filter_changed", (event) => applyFilter(event.detail));

// ---- live: messages written by other pages and clients ------------------------------------------

let liveToken = 0;

/** chat.updated: a chat's messages changed somewhere; the open one is reloaded in place. */
async function onChatUpdated(data) {
  if (!data || typeof data.chat_id !== "string") return;
  const ours = data.chat_id === state.chatId && state.sending;
  if (ours) return; // our own reply is on its way; sending refreshes the list when it is done
  refreshChats();
  if (data.chat_id !== state.chatId) return;
  if (data.message_count === list.messages.length) return; // nothing this page lacks
  const token = ++liveToken;
  const loadToken = state.loadToken;
  let chat;
  try {
    chat = await api.loadChat(data.chat_id);
  } catch (err) {
    console.warn("Could not load the chat's new messages:", err);
    return;
  }
  if (token !== liveToken || loadToken !== state.loadToken || state.sending) return;
  const messages = Array.isArray(chat.messages) ? chat.messages : [];
  const atBottom = nearBottom();
  list.render(messages); // keeps the highlight of the filter in force
  for (const el of othersCalls.values()) {
    if (el.dataset.chatId === data.chat_id) ui.messages.append(el); // still waiting: keep it
  }
  setChatHeader({ title: chat.title || ui.title.textContent }, messages);
  showEmpty(!messages.length);
  if (atBottom) scrollToBottom(true);
  messageAdded(data.chat_id); // the panel's counts and highlight follow
}

// A tool call waiting for approval in a reply another page (or a script) sent: every page on
// that chat can answer it, not only the one that is streaming the reply.
const othersCalls = new Map(); // call_id -> its block, while it is shown here

function onToolCall(data) {
  if (!data || data.chat_id !== state.chatId || !data.needs_approval) return;
  if (state.sending) return; // this page sent it: the streamed reply shows the call
  const chatId = data.chat_id;
  const el = liveToolCall(data, (callId, approve) => api.answerToolCall(chatId, callId, approve));
  el.classList.add("tool-call--elsewhere");
  el.dataset.chatId = chatId;
  othersCalls.set(String(data.call_id), el);
  ui.messages.append(el);
  announce("A tool call is waiting for your approval.");
  scrollToBottom();
}

function onToolResult(data) {
  const el = data && othersCalls.get(String(data.call_id));
  if (!el) return;
  othersCalls.delete(String(data.call_id));
  finishToolCall(el, data);
}

if (window.sidecar && typeof window.sidecar.on === "function") {
  window.sidecar.on("chat.updated", onChatUpdated);
  window.sidecar.on("tool_call", onToolCall);
  window.sidecar.on("tool_result", onToolResult);
  window.sidecar.on("smart_context.memory_changed", (data) => pins.onChanged(data));
  window.sidecar.on("sidecar.chat_damaged", (data) => {
    notify((data && data.message) || "A chat file was damaged and set aside.", true);
    refreshChats();
  });
}

// ---- keyboard and small-screen toggles --------------------------------------------------------

document.addEventListener(
  "keydown",
  (event) => {
    if ((event.ctrlKey || event.metaKey) && !event.altKey && event.key.toLowerCase() === "k") {
      event.preventDefault();
      if (palette.isOpen) palette.close();
      else if (!document.querySelector("dialog[open]")) palette.open();
    }
  },
  true,
);
$("open-palette").addEventListener("click", () => palette.open());

setUpDrawers();

// ---- start -------------------------------------------------------------------------------------

applyFilter(window.sidecar && window.sidecar.lastFilter ? window.sidecar.lastFilter() : null);
history.replaceState({ chatId: state.chatId }, "");
refreshChats();
if (state.chatId) {
  openChat(state.chatId, { push: false });
} else {
  setChatHeader(null, null);
  showEmpty(true);
}
