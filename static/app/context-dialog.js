// "View context": the rules, references and tools a reply was sent with (its request_context,
// drawn by context-items.js), then which messages, and why (the smart_context record; its token
// budget, summaries, memory and vault notes are drawn by context-budget.js, its tokens, cache
// and bill by usage-bill.js).

import { h, excerpt, fmtScore, restoreFocus } from "./dom.js";
import { detailsFrom, requestContextSection } from "./context-items.js";
import {
  budgetCut,
  budgetFacts,
  explainBudget,
  fillDetails,
  memorySection,
  notesSection,
  placedSummaries,
  reasonBadge,
  summaryItem,
} from "./context-budget.js";
import { usageFacts } from "./usage-bill.js";

const ROLE_NAMES = { user: "You", assistant: "Assistant", system: "System", tool: "Tool" };

/**
 * What the record says was sent. The record keeps only the shorter of included_ids and
 * excluded_ids, so the full set is rebuilt from the messages that came before the reply.
 */
export function contextOf(messages, replyIndex, record) {
  const history = messages.slice(0, Math.max(0, replyIndex));
  // The message that asked for this reply is ctx.message: always sent, never part of the
  // filtered history — unless the host counted it there, which total_messages tells us.
  let prompt = null;
  if (history.length && history[history.length - 1].role === "user") {
    const counted = Number.isInteger(record.total_messages) && record.total_messages === history.length;
    if (!counted) prompt = history.pop();
  }
  let included;
  let missing = 0;
  if (Array.isArray(record.included_ids)) {
    const ids = new Set(record.included_ids.map(String));
    included = history.filter((m) => ids.has(String(m.id)));
    missing = Math.max(0, ids.size - included.length);
  } else if (Array.isArray(record.excluded_ids)) {
    const ids = new Set(record.excluded_ids.map(String));
    included = history.filter((m) => !ids.has(String(m.id)));
  } else {
    included = history;
  }
  const total = Number.isInteger(record.total_messages) ? record.total_messages : history.length;
  return { prompt, included, total, missing };
}

/**
 * The similarity cut the record's filter used, in words: the fixed `threshold`, or under "auto"
 * the cut each selected topic computed (`cuts`); "" when the record has neither.
 */
export function cutText(record) {
  if (typeof record.threshold === "number") return record.threshold.toFixed(2);
  const cuts = record.cuts && typeof record.cuts === "object" ? Object.entries(record.cuts) : [];
  const known = cuts.filter(([, cut]) => typeof cut === "number" && Number.isFinite(cut));
  if (!known.length) return "";
  if (known.length === 1) return known[0][1].toFixed(2);
  return known.map(([label, cut]) => `${label} ${cut.toFixed(2)}`).join(", ");
}

/** A sentence a person understands for the record's mode. */
export function explainMode(record, sent, total) {
  const threshold = cutText(record) || "the threshold";
  if (record.error) {
    return "Smart Context ran into a problem, so the full history was sent unchanged.";
  }
  if (record.mode === "filtered") {
    return (
      `Filtered by topic: only the ${sent} of ${total} earlier messages whose similarity to the ` +
      `selected topics reached ${threshold} were sent, together with any sticky instructions.`
    );
  }
  if (record.mode === "fallback") {
    const best =
      typeof record.best_score === "number" ? ` (the best score was ${fmtScore(record.best_score)})` : "";
    return (
      `Fallback to the full history: a topic filter was active, but no message reached the ` +
      `similarity threshold of ${threshold}${best}, so every message was sent rather than none.`
    );
  }
  if (budgetCut(record)) return "No topic filter was applied.";
  return "Full history: no topic filter was applied, so every earlier message was sent.";
}

const MODE_NAMES = { full: "Full history", filtered: "Filtered", fallback: "Fallback" };

export class ContextDialog {
  /**
   * `onJump(messageId)`: show a message in the chat; `loadItems()`: resolves to the vault's
   * items with their text (a smart_context.list_items result), for the items' details;
   * `loadMemory()`: resolves to the chat's summaries and memories (context-budget.js's
   * loadDetails), for the texts of those the record names.
   */
  constructor(dialog, { onJump, loadItems, loadMemory } = {}) {
    this.dialog = dialog;
    this.body = dialog.querySelector("[data-role='body']");
    this.onJump = onJump;
    this.loadItems = loadItems;
    this.loadMemory = loadMemory;
    this.opener = null;
    this.showing = 0; // which opening the items' details arrive for
    dialog.addEventListener("click", (event) => {
      if (event.target === dialog || event.target.closest("[data-close]")) dialog.close(); // backdrop or ×
      const jump = event.target.closest("[data-jump]");
      if (jump) {
        dialog.close();
        if (this.onJump) this.onJump(jump.dataset.jump);
      }
    });
    dialog.addEventListener("close", () => restoreFocus(dialog, this.opener)); // a jump keeps its focus
  }

  /** Show the records of the reply `replyId`, found among `messages`, under `title`. */
  open(messages, replyId, opener, title = "What this reply was sent with") {
    const index = messages.findIndex((m) => String(m.id) === String(replyId));
    const reply = messages[index];
    if (!reply || !(reply.smart_context || reply.request_context)) return;
    this.opener = opener || document.activeElement;
    const showing = ++this.showing;
    this.dialog.querySelector("#context-dialog-title").textContent = title;
    const sentTools = reply.smart_context ? reply.smart_context.tools : null;
    const items = requestContextSection(reply.request_context, { sentTools });
    const parts = [items];
    if (reply.smart_context) parts.push(this.#content(messages, index, reply.smart_context, reply.usage));
    this.body.replaceChildren(...parts);
    this.dialog.showModal();
    this.dialog.querySelector("[data-close]").focus();
    if (reply.request_context) this.#fillItems(showing, reply.request_context, items, sentTools);
    if (this.body.querySelector("[data-summary-text], [data-memory-kind]")) this.#fillMemory(showing);
  }

  /** Put the texts of the summaries and memories the record names in, once they come. */
  async #fillMemory(showing) {
    const none = (error) => ({ error, summaries: new Map(), memories: new Map(), direct: new Map() });
    let details;
    try {
      details = this.loadMemory ? await this.loadMemory() : none("This page cannot read the texts.");
    } catch (err) {
      details = none(err.message || String(err));
    }
    if (showing !== this.showing) return; // another reply is shown now
    fillDetails(this.body, details);
  }

  /** Draw the items again with the vault's descriptions, priorities and texts once they come. */
  async #fillItems(showing, record, section, sentTools) {
    let result;
    try {
      result = this.loadItems ? await this.loadItems() : null;
    } catch (err) {
      result = { status: "error", error: err.message || String(err) };
    }
    if (showing !== this.showing || !section.isConnected) return; // another reply is shown now
    const details = detailsFrom(result);
    const error = details ? "" : (result && result.error) || "Smart Context did not answer.";
    const opened = new Set(
      [...section.querySelectorAll(".ctx-ci__item")]
        .filter((node) => node.querySelector("details").open)
        .map((node) => node.dataset.itemKey),
    );
    const focused = section.contains(document.activeElement)
      ? document.activeElement.closest(".ctx-ci__item")
      : null;
    const fresh = requestContextSection(record, { details: details || new Map(), error, opened, sentTools });
    section.replaceWith(fresh);
    if (focused) {
      // the same item's summary in the new drawing keeps the keyboard's place
      const again = [...fresh.querySelectorAll(".ctx-ci__item")].find(
        (node) => node.dataset.itemKey === focused.dataset.itemKey,
      );
      if (again) again.querySelector("summary").focus();
    }
  }

  #content(messages, index, record, server) {
    const { prompt, included, total, missing } = contextOf(messages, index, record);
    const sticky = new Set((record.sticky_ids || []).map(String));
    const scores = record.scores || {};
    const mode = record.error ? "full" : record.mode || "full";
    const topics = record.active_topics || [];

    const summary = h(
      "dl",
      { class: "ctx-facts" },
      fact("Mode", h("span", { class: `mode-badge mode-badge--${mode}`, text: MODE_NAMES[mode] || mode })),
      fact("Sent", `${included.length} of ${total} earlier messages`),
      ...budgetFacts(record, fact),
      ...usageFacts(record, server, fact),
      fact("Threshold", thresholdFact(record)),
      fact(
        "Topics",
        topics.length
          ? h("span", { class: "topic-list" }, topics.map((t) => h("span", { class: "topic-chip", text: t })))
          : "none selected",
      ),
    );

    const explain = explainMode(record, included.length, total);
    const parts = [h("p", { class: "ctx-explain", text: explain })];
    const budgetText = record.error ? "" : explainBudget(record);
    if (budgetText) parts.push(h("p", { class: "ctx-explain", text: budgetText }));
    parts.push(summary);
    if (record.error) {
      const error = h("p", { class: "ctx-error", attrs: { role: "note" } }, h("strong", { text: "Error: " }));
      error.append(record.error);
      parts.push(error);
    }
    if (prompt) {
      parts.push(
        h("h3", { class: "ctx-heading", text: "The message being answered (always sent)" }),
        h("ol", { class: "ctx-list" }, entry(prompt, { note: "current" })),
      );
    }
    const positions = new Map(messages.map((m, i) => [String(m.id), i]));
    const summaries = placedSummaries(record, positions).sort((a, b) => a.start - b.start);
    const heading = summaries.length
      ? `History sent with it (${included.length} messages, ${summaries.length} summaries)`
      : `History sent with it (${included.length})`;
    parts.push(h("h3", { class: "ctx-heading", text: heading }));
    if (included.length || summaries.length) {
      const list = h("ol", { class: "ctx-list" });
      const fragment = document.createDocumentFragment();
      let next = 0; // each summary goes before the first message at or after its start, as sent
      for (const m of included) {
        const at = positions.get(String(m.id));
        while (next < summaries.length && summaries[next].start <= at) fragment.append(summaryItem(summaries[next++]));
        const why = reasonBadge(record, String(m.id), positions);
        fragment.append(
          entry(m, { score: scores[m.id], sticky: sticky.has(String(m.id)), threshold: record.threshold, why }),
        );
      }
      while (next < summaries.length) fragment.append(summaryItem(summaries[next++]));
      list.append(fragment);
      parts.push(list);
    } else {
      parts.push(h("p", { class: "ctx-empty", text: "No earlier messages were sent with this reply." }));
    }
    if (missing) {
      const text = `${missing} included message(s) are no longer in this chat.`;
      parts.push(h("p", { class: "ctx-empty", text }));
    }
    const memory = memorySection(record);
    if (memory) parts.push(memory);
    const notes = notesSection(record);
    if (notes) parts.push(notes);
    const fragment = document.createDocumentFragment();
    fragment.append(...parts);
    return fragment;
  }
}

/** "0.40" for a fixed threshold; under "auto", the cut it chose ("auto: 0.56"). */
function thresholdFact(record) {
  const cut = cutText(record);
  if (record.threshold === "auto") return cut ? `auto: ${cut}` : "auto";
  return cut || "—";
}

function fact(label, value) {
  return h("div", { class: "ctx-fact" }, h("dt", { text: label }), h("dd", {}, value));
}

function entry(message, { score, sticky, note, threshold, why } = {}) {
  const badges = h("span", { class: "ctx-badges" });
  if (typeof score === "number") {
    const below = typeof threshold === "number" && score < threshold;
    badges.append(
      h("span", {
        class: below ? "score score--below" : "score",
        title: below
          ? "Similarity below the threshold: sent because it is sticky"
          : "Similarity to the selected topics",
        text: fmtScore(score),
      }),
    );
  }
  if (message.notice || message.error) {
    const title = "A note from the sidecar: never sent to the model";
    badges.append(h("span", { class: "badge", title, text: "host note" }));
  }
  if (sticky) badges.append(h("span", { class: "badge badge--sticky", text: "sticky" }));
  if (why) badges.append(why);
  if (note) badges.append(h("span", { class: "badge", text: note }));
  return h(
    "li",
    { class: "ctx-item" },
    h(
      "button",
      {
        type: "button",
        class: "ctx-item__jump",
        dataset: { jump: String(message.id) },
        title: "Show this message in the chat",
      },
      h("span", {
        class: `role-pill role-pill--${message.role}`,
        text: ROLE_NAMES[message.role] || message.role,
      }),
      h("span", { class: "ctx-item__text", text: excerpt(message.content, 120) }),
      badges,
    ),
  );
}
