// "View context", the long-memory part: what a token budget kept and why (the record's
// recent_ids and reasons), the summaries that stood in for the rest, at their place in time,
// and the memory section (direct messages, stored memories). The record names these by id;
// their texts are read from the host when the dialog opens (list_summaries, list_memories,
// list_direct_messages), so a summary or memory changed since says so instead of guessing.

import { fmtScore, h, longTime, plural, toDate } from "./dom.js";

const REASONS = {
  recent: ["recent", "One of the last messages: always sent while it fits"],
  pinned: ["pinned", "You pinned it: sent with every request while it fits"],
  relevant: ["relevant", "The search found it relevant to the message being answered (its score)"],
  turn: ["turn", "The question or answer of a relevant message, so the pair stays together"],
  important: ["important", "Its importance score (recency, relevance, names, pins) filled the room left"],
};


/** Whether the budget cut the history (a chat that fits is sent whole, with no reasons). */
export function budgetCut(record) {
  return Boolean(record.budget) && Array.isArray(record.recent_ids) && record.recent_ids.length > 0;
}

/** Why message `id` was sent, as a badge (null: no reason recorded, e.g. sticky says it). */
export function reasonBadge(record, id, positions) {
  const reasons = record.reasons && typeof record.reasons === "object" ? record.reasons : {};
  let reason = reasons[id];
  if (!reason && (record.recent_ids || []).map(String).includes(id)) reason = { why: "recent" };
  if (!reason || !REASONS[reason.why]) return null;
  const [label, title] = REASONS[reason.why];
  let text = label;
  if (typeof reason.score === "number") text = `${label} ${fmtScore(reason.score)}`;
  if (reason.why === "turn" && reason.of !== undefined && positions.has(String(reason.of))) {
    text = `turn of #${positions.get(String(reason.of)) + 1}`;
  }
  return h("span", { class: `badge badge--why badge--${reason.why}`, title, text, dataset: { why: reason.why } });
}

/** The budget's facts for the dialog's summary grid: used of limit, and how it was counted. */
export function budgetFacts(record, fact) {
  const budget = record.budget;
  if (!budget || typeof budget.limit !== "number") return [];
  const counted = budget.exact ? `counted with ${budget.counted_with}` : "estimated";
  return [fact("Budget", `${budget.used} of ${budget.limit} tokens (${counted})`)];
}

/** A sentence for a request the budget shaped ("" for a record without a usable budget). */
export function explainBudget(record) {
  const budget = record.budget;
  if (!budget || typeof budget.limit !== "number") return "";
  const gaveWay = Array.isArray(budget.left_out_items) ? budget.left_out_items : [];
  const names = gaveWay.map((i) => (i && typeof i.name === "string" ? i.name : "")).filter(Boolean);
  const trimmed = names.length
    ? ` To make room, ${plural(names.length, "item")} chosen by search ${names.length === 1 ? "was" : "were"} left out: ${names.join(", ")}.`
    : "";
  if (typeof budget.note === "string" && budget.note) return budget.note + trimmed;
  if (!budgetCut(record)) {
    // the budget cut nothing; what it was given is the topic filter's choice when one applied
    const given = record.mode === "filtered" && !record.error ? "What the topic filter kept" : "The chat";
    const whole = given === "The chat" ? "it was sent whole" : "all of it was sent";
    return `${given} fits the token budget of ${budget.limit} tokens, so ${whole}.${trimmed}`;
  }
  const kinds = { pinned: 0, relevant: 0, turn: 0, important: 0 };
  for (const reason of Object.values(record.reasons || {})) {
    if (reason && reason.why in kinds) kinds[reason.why] += 1;
  }
  const parts = [`the last ${plural(record.recent_ids.length, "message")}`];
  if (kinds.pinned) parts.push(`${kinds.pinned} pinned`);
  if (kinds.relevant) parts.push(`${kinds.relevant} relevant to the message (with ${kinds.turn} turn partners)`);
  if (kinds.important) parts.push(`${kinds.important} by importance`);
  const summaries = (record.summaries || []).length;
  if (summaries) parts.push(`${plural(summaries, "summary", "summaries")} of the stretches left out`);
  return `A token budget of ${budget.limit} tokens cut the history to ${parts.join(", ")}.${trimmed}`;
}

const summaryKey = (s) => `${s.level}\u0000${s.from_id}\u0000${s.to_id}`;

/** The record's summaries, each with the positions of its span in `messages` (or -1). */
export function placedSummaries(record, positions) {
  return (Array.isArray(record.summaries) ? record.summaries : []).map((s) => ({
    summary: s,
    start: positions.has(String(s.from_id)) ? positions.get(String(s.from_id)) : -1,
    end: positions.has(String(s.to_id)) ? positions.get(String(s.to_id)) : -1,
  }));
}

/** One summary as the history list shows it, at its place in time; its text comes later. */
export function summaryItem({ summary, start, end }) {
  const kind = summary.level <= 2 ? "Summary" : "Key facts";
  const span =
    start >= 0 && end >= 0
      ? `messages ${start + 1}–${end + 1} (${end - start + 1})`
      : "messages no longer in this chat";
  const text = h("p", { class: "ctx-summary__text", dataset: { summaryText: summaryKey(summary) }, text: "Loading the summary…" });
  return h(
    "li",
    { class: "ctx-item ctx-summary", dataset: { level: String(summary.level) } },
    h(
      "div",
      { class: "ctx-summary__head" },
      h("span", { class: "badge badge--summary", text: `${kind} · level ${summary.level}` }),
      h("span", { class: "ctx-summary__span", text: span }),
      start >= 0
        ? h("button", { type: "button", class: "link-button", dataset: { jump: String(summary.from_id) }, text: "Show" })
        : null,
    ),
    text,
  );
}

/** The memory section a request was sent with: placeholders filled by fillDetails. */
export function memorySection(record) {
  const memory = record.memory;
  if (!memory || typeof memory !== "object") return null;
  const direct = (memory.direct_ids || []).map(String);
  const stored = (memory.memory_ids || []).map(String);
  const section = h("section", { class: "ctx-memory", dataset: { role: "memory" } });
  section.append(h("h3", { class: "ctx-heading", text: `Memory sent with it (${direct.length + stored.length})` }));
  if (direct.length) {
    section.append(h("h4", { class: "ctx-subheading", text: "Direct messages, by priority" }));
    section.append(h("ul", { class: "ctx-list" }, direct.map((id) => memoryRow("direct", id))));
  }
  if (stored.length) {
    section.append(h("h4", { class: "ctx-subheading", text: "Stored memories" }));
    section.append(h("ul", { class: "ctx-list" }, stored.map((id) => memoryRow("memory", id))));
  }
  if (memory.left_out) {
    section.append(h("p", { class: "ctx-empty", text: `${memory.left_out} more stored did not fit and were left out.` }));
  }
  return section;
}

/** The vault notes a request was sent with (the record's `knowledge`: path, score, passages). */
export function notesSection(record) {
  const notes = Array.isArray(record.knowledge) ? record.knowledge : [];
  const rows = notes.filter((n) => n && typeof n === "object" && typeof n.path === "string");
  if (!rows.length) return null;
  const section = h("section", { class: "ctx-notes", dataset: { role: "notes" } });
  section.append(h("h3", { class: "ctx-heading", text: `Notes from the vault (${rows.length})` }));
  const items = rows.map((note) => {
    const passages = Number.isInteger(note.passages) ? plural(note.passages, "passage") : "";
    const badges = h("span", { class: "ctx-badges" });
    if (typeof note.score === "number") {
      badges.append(h("span", { class: "badge badge--why", title: "How close the note came to the message", text: `score ${fmtScore(note.score)}` }));
    }
    if (passages) badges.append(h("span", { class: "badge", text: passages }));
    return h("li", { class: "ctx-item ctx-note", dataset: { notePath: note.path } }, h("span", { class: "ctx-item__text", text: note.path }), badges);
  });
  section.append(h("ul", { class: "ctx-list" }, items));
  return section;
}

function memoryRow(kind, id) {
  return h(
    "li",
    { class: "ctx-item ctx-memory__item", dataset: { memoryKind: kind, memoryId: id } },
    h("span", { class: "ctx-item__text", text: "Loading…" }),
    h("span", { class: "ctx-badges" }),
  );
}

/**
 * What the dialog shows besides ids: the chat's summaries, memories and live direct messages,
 * as Maps, or an `error` to show. `command(name, args)`: the page's bridge.
 */
export async function loadDetails(command, chatId) {
  const ask = (name) =>
    Promise.resolve()
      .then(() => command(name, { chat_id: chatId }))
      .catch((err) => ({ status: "error", error: err.message }));
  const [summaries, memories, direct] = await Promise.all([
    ask("smart_context.list_summaries"),
    ask("smart_context.list_memories"),
    ask("smart_context.list_direct_messages"),
  ]);
  const failed = [summaries, memories, direct].find((r) => !r || r.status !== "success");
  const rows = (result, key) => (result && result.status === "success" && Array.isArray(result[key]) ? result[key] : []);
  return {
    error: failed ? (failed && failed.error) || "Smart Context did not answer." : "",
    summaries: new Map(rows(summaries, "summaries").map((s) => [summaryKey(s), s])),
    memories: new Map(rows(memories, "memories").map((m) => [String(m.id), m])),
    direct: new Map(rows(direct, "direct_messages").map((d) => [String(d.id), d])),
  };
}

/** Put the loaded `details` into the placeholders under `root`. */
export function fillDetails(root, details) {
  for (const node of root.querySelectorAll("[data-summary-text]")) {
    const found = details.summaries.get(node.dataset.summaryText);
    node.classList.toggle("is-missing", !found);
    node.textContent = found
      ? found.text
      : details.error || "This summary has been replaced since (a message it covered changed).";
  }
  for (const row of root.querySelectorAll("[data-memory-kind]")) {
    const direct = row.dataset.memoryKind === "direct";
    const found = (direct ? details.direct : details.memories).get(row.dataset.memoryId);
    const text = row.querySelector(".ctx-item__text");
    const badges = row.querySelector(".ctx-badges");
    row.classList.toggle("is-missing", !found);
    if (!found) {
      const gone = direct ? "This direct message has expired or was removed since." : "This memory was deleted since.";
      text.textContent = details.error || gone;
      badges.replaceChildren();
      continue;
    }
    text.textContent = found.content;
    badges.replaceChildren(...(direct ? directBadges(found) : memoryBadges(found)));
  }
}

function directBadges(message) {
  const out = [h("span", { class: "badge", title: "Priority, 0 to 1", text: `priority ${fmtScore(message.priority)}` })];
  if (message.source) out.push(h("span", { class: "badge", title: "Who posted it", text: `from ${message.source}` }));
  const expires = toDate(message.expires_at);
  out.push(h("span", { class: "badge", text: expires ? `until ${longTime(expires)}` : "no expiry" }));
  return out;
}

function memoryBadges(memory) {
  return [
    h("span", { class: "badge", text: memory.chat_id ? "this chat" : "all chats" }),
    h("span", { class: "badge", title: "Importance, 0 to 1", text: `importance ${fmtScore(memory.importance)}` }),
  ];
}
