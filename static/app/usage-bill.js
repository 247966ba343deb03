// "View context", the usage part: the tokens a reply's request sent, those the upstream served
// from its prompt cache, and the bill beside the plain client's (who sends the whole
// conversation). The same rule as smart_context/usage_bill.py, on the same record: its `usage`
// (with the server's reported_* figures after the reply) and its `cache` part; the reply's own
// `usage` (the server's count as the host stored it) where the record lacks them. A record is
// data from disk: a figure that is not a count or a price is not read.

import { h } from "./dom.js";

// A cache's prices against a new token [read, write], by kind, where a record's part gives
// none (smart_context/budget/cache.py KINDS; tests/test_usage_bill.py checks they agree).
const CACHE_PRICES = {
  "none": [1, 1],
  "openai": [0.5, 1],
  "anthropic": [0.1, 1.25],
  "deepseek": [0.1, 1],
  "gemini": [0.25, 1],
  "local": [0, 1]
};
const MAX_PRICE = 100;

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const count = (value) =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.trunc(value) : null;
const price = (value) =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= MAX_PRICE ? value : null;
const first = (...values) => values.find((v) => v !== null) ?? null;
const tokens = (n) => Math.round(n).toLocaleString("en-US");

/** What a server's `usage` says its cache read and wrote, in any provider's shape. */
function cacheReport(usage) {
  if (!isObject(usage)) return { cached: null, written: null };
  const details = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  let cached = first(
    count(usage.cached_tokens),
    count(details.cached_tokens),
    count(usage.cache_read_input_tokens),
    count(details.cache_read_input_tokens),
    count(usage.prompt_cache_hit_tokens),
  );
  const prompt = count(usage.prompt_tokens);
  const missed = count(usage.prompt_cache_miss_tokens);
  if (cached === null && prompt !== null && missed !== null) cached = Math.max(prompt - missed, 0);
  const written = first(
    count(usage.cache_write_tokens),
    count(details.cache_write_tokens),
    count(usage.cache_creation_input_tokens),
    count(details.cache_creation_input_tokens),
  );
  return { cached, written };
}

const billed = ([read, write], sent, cached, written = 0) =>
  Math.max(sent - cached - written, 0) + read * cached + write * written;

/** The bill of a reply's request (null without a usage that has counts). */
export function billOf(record, server) {
  const usage = isObject(record) && isObject(record.usage) ? record.usage : null;
  const ours = usage ? count(usage.sent_tokens) : null;
  const full = usage ? count(usage.full_tokens) : null;
  if (ours === null || full === null) return null;
  // the record's figures when the plugin took the report, else the reply's copy of the usage
  const taken = "reported_prompt_tokens" in usage || "reported_cached_tokens" in usage;
  const said = !taken && isObject(server) ? server : null;
  const fromServer = said ? cacheReport(said) : null;
  const reported = (said ? count(said.prompt_tokens) : count(usage.reported_prompt_tokens)) || null;
  const cachedSaid = said ? fromServer.cached : count(usage.reported_cached_tokens);
  const writtenSaid = (said ? fromServer.written : count(usage.reported_cache_write_tokens)) ?? 0;
  const part = isObject(record.cache) ? record.cache : {};
  const kind = typeof part.kind === "string" && part.kind in CACHE_PRICES ? part.kind : "none";
  const [read, write] = CACHE_PRICES[kind];
  const prices = kind === "none" ? [1, 1] : [price(part.read) ?? read, price(part.write) ?? write];
  const sent = reported || ours;
  // the plain client's figures are ours: in the server's units when it counted ours
  const scale = reported && ours ? sent / ours : 1;
  const plain = Math.round((count(part.plain_tokens) ?? full) * scale);
  const plainCached = Math.min(Math.round((count(part.plain_cached_estimate) ?? 0) * scale), plain);
  const estimate = Math.min(Math.round((count(part.cached_estimate) ?? 0) * scale), sent);
  const cached = cachedSaid !== null ? Math.min(cachedSaid, sent) : estimate;
  const bill = billed(prices, sent, cached, Math.min(writtenSaid, sent - cached));
  const plainBill = billed(prices, plain, plainCached);
  return {
    kind,
    sent,
    cached,
    cachedReported: cachedSaid !== null,
    billed: bill,
    plainBilled: plainBill,
    saved: plainBill - bill,
  };
}

/** The dialog's facts for a reply's usage: tokens sent, cached, and the bill beside plain. */
export function usageFacts(record, server, fact) {
  const bill = billOf(record, server);
  if (!bill) return [];
  const ours = count(record.usage.sent_tokens);
  const full = count(record.usage.full_tokens);
  const counted = bill.sent !== ours ? `; the server counted ${tokens(bill.sent)}` : "";
  const rows = [fact("Tokens sent", `${tokens(ours)} of ${tokens(full)} (the whole conversation)${counted}`)];
  const whose = bill.cachedReported ? "the server's count" : "estimated";
  if (bill.kind !== "none" || bill.cachedReported) {
    rows.push(fact("Cached", `${tokens(bill.cached)} (${whose})`));
  }
  let text = `${tokens(bill.billed)} vs plain ${tokens(bill.plainBilled)}`;
  if (bill.plainBilled > 0) {
    const share = Math.round((Math.abs(bill.saved) / bill.plainBilled) * 100);
    text += ` (${bill.saved >= 0 ? "saved" : "lost"} ${share}%)`;
  }
  const unit = bill.kind === "none" ? "tokens" : "new-token units: a cached token counts at its read price";
  rows.push(fact("Bill", h("span", { title: `In ${unit}`, text })));
  return rows;
}
