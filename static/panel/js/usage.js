/*
 * The budget and usage section's data: what smart_context.usage_stats answers, read into plain
 * numbers (the budget of the chat's last request by section, the chat's totals, one entry per
 * reply), and the geometry of the two small drawings. No DOM here.
 *
 * The answer comes from records stored on disk, through any host: every figure that is not a
 * finite count is dropped, and a section name is only ever text. The bills are in new-token
 * units (a cached token counts at its read price), shown rounded.
 */

const USAGE_SECTIONS = [
  "system",
  "memory",
  "knowledge",
  "tools",
  "history",
  "summaries",
  "message",
];
const USAGE_SECTION_NAMES = {
  system: "Rules",
  memory: "Memory",
  knowledge: "References and notes",
  tools: "Tools",
  history: "History",
  summaries: "Summaries",
  message: "Message",
};

/** A token count: a finite number of at least 0, rounded; anything else is null. */
const tokenCount = (value) =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.round(value) : null;

/**
 * A bill beside the plain client's (the record's usage_bill figures): `billed` and `plain` in
 * new-token units, `saved` their difference. Null when either bill is missing.
 */
const readBill = (value) => {
  const billed = tokenCount(value.billed);
  const plain = tokenCount(value.plain_billed);
  if (billed === null || plain === null) return null;
  return { billed, plain, saved: plain - billed };
};

/**
 * ["Saved", "50%"], or ["Lost", "12%"] when it cost more than the plain client's; null without
 * a plain bill to compare with.
 */
const savedShare = (bill) => {
  if (!(bill.plain > 0)) return null;
  const share = `${Math.round((Math.abs(bill.saved) / bill.plain) * 100)}%`;
  return bill.saved >= 0 ? ["Saved", share] : ["Lost", share];
};

/** "1,400 vs plain 2,800 (saved 50%)". */
const formatBill = (bill) => {
  const text = `${formatTokens(bill.billed)} vs plain ${formatTokens(bill.plain)}`;
  const saved = savedShare(bill);
  return saved ? `${text} (${saved[0].toLowerCase()} ${saved[1]})` : text;
};

/** full / sent, as "5.2×" (one decimal; "1×" when everything was sent). */
const formatRatio = (full, sent) => {
  if (!sent) return "–";
  const ratio = full / sent;
  return `${ratio >= 10 ? Math.round(ratio) : Math.round(ratio * 10) / 10}×`;
};

/** What the budget's `counted_with` says, in words. */
const counterWords = (countedWith, exact) => {
  if (!countedWith) return "";
  if (exact) return `counted with the ${countedWith.split("@")[0]} tokenizer`;
  return "estimated (no tokenizer for this model ships offline)";
};

/** A stored budget: limit, used, and its sections in the order they are sent. */
const readBudget = (value) => {
  if (!isObject(value)) return null;
  const limit = tokenCount(value.limit);
  const used = tokenCount(value.used);
  if (limit === null || used === null) return null;
  const raw = isObject(value.by_section) ? value.by_section : {};
  const sections = Object.entries(raw)
    .map(([name, n]) => ({ name, tokens: tokenCount(n) }))
    .filter((s) => s.tokens)
    .map((s) => ({ ...s, known: USAGE_SECTIONS.includes(s.name) }));
  const rank = (s) => (s.known ? USAGE_SECTIONS.indexOf(s.name) : USAGE_SECTIONS.length);
  sections.sort((a, b) => rank(a) - rank(b));
  return {
    limit,
    used,
    sections,
    countedWith: typeof value.counted_with === "string" ? value.counted_with : "",
    exact: value.exact === true,
    // a request that went over: what must be sent did not fit, in the record's words
    over: tokenCount(value.over) || 0,
    note: typeof value.note === "string" ? value.note : "",
  };
};

/** One reply's figures, or null. */
const readReply = (value) => {
  if (!isObject(value)) return null;
  const sent = tokenCount(value.sent_tokens);
  const full = tokenCount(value.full_tokens);
  if (sent === null || full === null) return null;
  return {
    id: typeof value.id === "string" ? value.id : "",
    sent,
    full,
    reported: tokenCount(value.reported_prompt_tokens),
    cached: tokenCount(value.cached_tokens),
    cachedReported: value.cached_reported === true,
    bill: readBill(value),
    countedWith: typeof value.counted_with === "string" ? value.counted_with : "",
    exact: value.exact === true,
  };
};

/** smart_context.usage_stats's answer as the section shows it. */
const readUsageStats = (result) => {
  const last = isObject(result.last) ? result.last : {};
  return {
    replies: tokenCount(result.replies) ?? 0,
    measured: tokenCount(result.measured) ?? 0,
    sent: tokenCount(result.sent_tokens) ?? 0,
    full: tokenCount(result.full_tokens) ?? 0,
    reported: tokenCount(result.reported_prompt_tokens) ?? 0,
    reportedReplies: tokenCount(result.reported_replies) ?? 0,
    cached: tokenCount(result.cached_tokens),
    cachedReplies: tokenCount(result.cached_reported_replies) ?? 0,
    bill: readBill(result),
    budget: readBudget(last.budget),
    lastReply: readReply(last.usage),
    series: (Array.isArray(result.series) ? result.series : []).map(readReply).filter(Boolean),
    omitted: tokenCount(result.series_omitted) ?? 0,
  };
};

/** The budget bar's segments: x and width in 0..1000 of the larger of the limit and the use. */
const budgetSegments = (budget) => {
  const scale = Math.max(budget.limit, budget.used, 1);
  let x = 0;
  return budget.sections.map((s) => {
    const width = (s.tokens / scale) * 1000;
    const segment = { ...s, x, width };
    x += width;
    return segment;
  });
};

/** The replies chart's bars in a width × height box: the whole history's, and what was sent. */
const usageBars = (series, width, height) => {
  const top = Math.max(1, ...series.map((r) => Math.max(r.full, r.sent)));
  const step = series.length ? width / series.length : 0;
  const gap = step > 4 ? 1 : 0;
  return series.map((r, i) => ({
    reply: r,
    x: i * step,
    width: Math.max(step - gap, 0.5),
    full: (r.full / top) * height,
    sent: (r.sent / top) * height,
  }));
};

/** The chart in one sentence, for those who do not see it. */
const usageChartText = (series, omitted) => {
  if (!series.length) return "";
  const first = series[0];
  const last = series[series.length - 1];
  const earlier = omitted ? ` (the last ${series.length}; ${omitted} earlier not drawn)` : "";
  return (
    `Tokens per reply over ${series.length} replies${earlier}: the whole history grew from ` +
    `${formatTokens(first.full)} to ${formatTokens(last.full)}; ` +
    `the requests sent ${formatTokens(first.sent)} then ${formatTokens(last.sent)}.`
  );
};
