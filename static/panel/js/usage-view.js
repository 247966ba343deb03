/*
 * The budget and usage section (#sc-usage): the last request's budget as a stacked bar with
 * its sections, the chat's totals (tokens sent against the whole history, the ratio, the
 * server's own count, the tokens cached and the bill beside the plain client's), and a small
 * chart over its replies; all drawn from usage.js's numbers.
 * UsageController loads smart_context.usage_stats for the open chat, and again after each reply
 * (the page's sidecar:message_added, the host's chat.updated), coalesced like the topics.
 */

const SVG_NS = "http://www.w3.org/2000/svg";
const CHAT_UPDATED = "chat.updated";
const CHART_WIDTH = 280;
const CHART_HEIGHT = 64;

const svgNode = (name, attributes = {}) => {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  return node;
};

const svgTitle = (text) => {
  const title = svgNode("title");
  title.textContent = text;
  return title;
};

const sectionName = (s) => (s.known ? USAGE_SECTION_NAMES[s.name] : s.name);

/** The chat's cached tokens, and whose count they are: the server's, our estimate, or both. */
const cachedWords = (stats) => {
  const n = formatTokens(stats.cached);
  if (stats.cachedReplies >= stats.measured) return `${n} (server)`;
  if (!stats.cachedReplies) return `${n} (estimate)`;
  return `${n} (server: ${stats.cachedReplies} of ${stats.measured})`;
};

class UsageView {
  /** `root`: the panel element holding the #sc-usage section. */
  constructor(root) {
    const find = (id) => root.querySelector(`#${id}`);
    this.section = find("sc-usage");
    this.note = find("sc-usage-note");
    this.budget = find("sc-budget");
    this.budgetLine = find("sc-budget-line");
    this.over = find("sc-budget-over");
    this.bar = find("sc-budget-bar");
    this.legend = find("sc-budget-legend");
    this.totals = find("sc-usage-totals");
    this.chart = find("sc-usage-chart");
    this.error = find("sc-usage-error");
  }

  /** Show `model` (a UsageController's snapshot). */
  render(model) {
    if (!this.section) return;
    this.section.hidden = !model.available || !model.chatId;
    this.section.setAttribute("aria-busy", String(model.pending > 0));
    this.error.hidden = !model.error;
    this.error.textContent = model.error;
    const stats = model.stats;
    const measured = stats !== null && stats.measured > 0;
    this.note.hidden = measured;
    this.note.textContent = this.#note(stats);
    this.#renderBudget(measured ? stats : null);
    this.#renderTotals(measured ? stats : null);
    this.#renderChart(measured ? stats : null);
  }

  #note(stats) {
    if (stats === null) return "Loading usage…";
    if (!stats.replies) {
      return "No replies yet: the budget and the token figures show after the first.";
    }
    return "These replies were stored before usage was recorded; the next one shows it.";
  }

  #renderBudget(stats) {
    const budget = stats && stats.budget;
    this.budget.hidden = !stats;
    this.bar.replaceChildren();
    this.legend.replaceChildren();
    this.over.hidden = !(budget && budget.over && budget.note);
    this.over.textContent = this.over.hidden ? "" : budget.note;
    if (!stats) return;
    if (!budget) {
      this.budgetLine.textContent =
        "No token budget: the history goes as the topic filter leaves it.";
      this.bar.hidden = true;
      return;
    }
    const share = budget.limit ? Math.round((budget.used / budget.limit) * 100) : 0;
    const counted = counterWords(budget.countedWith, budget.exact);
    this.budgetLine.textContent =
      `Last request: ${formatTokens(budget.used)} of ${formatTokens(budget.limit)} tokens ` +
      `(${share}%)${counted ? `, ${counted}` : ""}.`;
    this.bar.hidden = false;
    const parts = budgetSegments(budget);
    const words = parts.map((s) => `${sectionName(s)} ${formatTokens(s.tokens)}`).join(", ");
    this.bar.setAttribute(
      "aria-label",
      `Budget used: ${formatTokens(budget.used)} of ${formatTokens(budget.limit)} tokens` +
        (words ? `: ${words}` : ""),
    );
    const svg = svgNode("svg", {
      viewBox: "0 0 1000 12",
      preserveAspectRatio: "none",
      "aria-hidden": "true",
    });
    svg.append(svgNode("rect", { class: "sc-budget-track", x: 0, y: 0, width: 1000, height: 12 }));
    for (const part of parts) {
      const rect = svgNode("rect", { x: part.x, y: 0, width: part.width, height: 12 });
      rect.setAttribute("class", `sc-seg sc-seg-${part.known ? part.name : "other"}`);
      rect.append(svgTitle(`${sectionName(part)}: ${formatTokens(part.tokens)} tokens`));
      svg.append(rect);
      const item = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = `sc-swatch sc-seg-${part.known ? part.name : "other"}`;
      swatch.setAttribute("aria-hidden", "true");
      item.dataset.section = part.name;
      item.append(swatch, `${sectionName(part)} ${formatTokens(part.tokens)}`);
      this.legend.append(item);
    }
    this.bar.append(svg);
  }

  #renderTotals(stats) {
    this.totals.hidden = !stats;
    this.totals.replaceChildren();
    if (!stats) return;
    const replies =
      stats.measured === stats.replies
        ? `${stats.replies}`
        : `${stats.measured} of ${stats.replies} measured`;
    const rows = [
      ["Replies", replies],
      ["Tokens sent", formatTokens(stats.sent)],
      ["Whole history", formatTokens(stats.full)],
      ["Smaller by", formatRatio(stats.full, stats.sent)],
    ];
    if (stats.reportedReplies) {
      const n = stats.reportedReplies;
      const counted = `${formatTokens(stats.reported)} (${n} ${n === 1 ? "reply" : "replies"})`;
      rows.push(["Server counted", counted]);
    }
    if (stats.cached !== null) rows.push(["Cached", cachedWords(stats)]);
    if (stats.bill) {
      rows.push(["Bill", `${formatTokens(stats.bill.billed)} (plain ${formatTokens(stats.bill.plain)})`]);
      const saved = savedShare(stats.bill);
      if (saved) rows.push(saved);
    }
    const last = stats.lastReply;
    if (last && last.reported !== null) {
      const how = last.exact ? "" : " (estimate)";
      const both = `ours ${formatTokens(last.sent)}${how}, server ${formatTokens(last.reported)}`;
      rows.push(["Last request", both]);
    }
    if (last && last.cached !== null) {
      rows.push(["Last cached", `${formatTokens(last.cached)} (${last.cachedReported ? "server" : "estimate"})`]);
    }
    if (last && last.bill) {
      rows.push(["Last bill", `${formatTokens(last.bill.billed)} (plain ${formatTokens(last.bill.plain)})`]);
    }
    for (const [label, value] of rows) {
      const term = document.createElement("dt");
      const detail = document.createElement("dd");
      term.textContent = label;
      detail.textContent = value;
      this.totals.append(term, detail);
    }
  }

  #renderChart(stats) {
    const series = stats ? stats.series : [];
    this.chart.hidden = series.length === 0;
    this.chart.replaceChildren();
    if (!series.length) return;
    const text = usageChartText(series, stats.omitted);
    const svg = svgNode("svg", {
      viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": text,
    });
    svg.append(svgTitle(text));
    for (const bar of usageBars(series, CHART_WIDTH, CHART_HEIGHT)) {
      const group = svgNode("g", { class: "sc-usage-reply" });
      group.dataset.replyId = bar.reply.id;
      const { x, width } = bar;
      const rect = (kind, height) =>
        svgNode("rect", { class: kind, x, y: CHART_HEIGHT - height, width, height });
      const bill = bar.reply.bill ? `; bill ${formatBill(bar.reply.bill)}` : "";
      group.append(
        svgTitle(`${formatTokens(bar.reply.sent)} sent of ${formatTokens(bar.reply.full)}${bill}`),
        rect("sc-usage-full", bar.full),
        rect("sc-usage-sent", bar.sent),
      );
      svg.append(group);
    }
    const caption = document.createElement("figcaption");
    caption.textContent = "Per reply: tokens sent (solid) against the whole history (pale)";
    this.chart.append(svg, caption);
  }
}

class UsageController {
  /** `view`: a UsageView; `host`: from connectHost(). */
  constructor(view, host) {
    this.view = view;
    this.host = host;
    this.chatId = null;
    this.stats = null;
    this.error = "";
    this.available = true;
    this.pending = 0;
    this.seq = 0;
    this.timer = 0;
  }

  /** Follow the page's chat and the host's news of new messages. */
  listen() {
    document.addEventListener(EVENTS.chatSelected, (event) => {
      this.selectChat(detailOf(event).chat_id);
    });
    document.addEventListener(EVENTS.messageAdded, (event) => this.#soon(detailOf(event).chat_id));
    this.host.on(CHAT_UPDATED, (payload) => {
      this.#soon(isObject(payload) ? payload.chat_id : null);
    });
  }

  /** Show another chat's usage (null: none). */
  selectChat(chatId) {
    const id = typeof chatId === "string" && chatId ? chatId : null;
    if (id !== this.chatId) {
      this.chatId = id;
      this.stats = null;
      this.error = "";
    }
    this.render();
    return id ? this.load() : Promise.resolve({ status: "error", error: "No chat is open." });
  }

  /** Read the chat's figures again. */
  async load() {
    const chat = this.chatId;
    if (!chat || !this.available) return { status: "error", error: "No chat is open." };
    const ticket = ++this.seq;
    this.pending++;
    this.render();
    let result;
    try {
      result = await this.host.command("smart_context.usage_stats", { chat_id: chat });
    } finally {
      this.pending--;
    }
    if (ticket !== this.seq || chat !== this.chatId) return result;
    if (result.status === "success") {
      this.stats = readUsageStats(result);
      this.error = "";
    } else if (isUnknownCommand(result)) {
      this.available = false; // a host without the command: the section stays hidden
    } else {
      this.error = result.error;
    }
    this.render();
    return result;
  }

  snapshot() {
    const { chatId, available, pending, error, stats } = this;
    return { chatId, available, pending, error, stats };
  }

  render() {
    this.view.render(this.snapshot());
  }

  #soon(chatId) {
    if (!this.chatId || (chatId && chatId !== this.chatId)) return;
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.load(), REFRESH_DELAY_MS);
  }
}
