// How the palette orders its rows for what was typed, and which row Enter may run unpicked.
//
// A row's title (its label) decides: exact title > title prefix > word prefixes > substring >
// loose (every word in the title or keywords, or the letters in order). A row that changes a
// setting (`changesSetting`) runs on Enter only for an exact or clear prefix match of its own
// title: "search" must open "Search context items…", never turn the similarity filter off
// because "embedding search" is among the toggle's keywords.

export const MATCH = { exact: 0, prefix: 1, words: 2, substring: 3, loose: 4 };

const CLEAR_PREFIX_CHARS = 3; // "s" is no one's clear choice; "sim" is

/** Lower case, "…"/":"/"," dropped, one space between words. */
export function normalize(text) {
  return String(text || "")
    .toLowerCase()
    .replace(/…|\.\.\./g, "")
    .replace(/[:,]/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

function inOrder(letters, text) {
  let at = 0;
  for (const ch of letters) {
    at = text.indexOf(ch, at) + 1;
    if (at === 0) return false;
  }
  return true;
}

/** How well `query` (normalized, not empty) matches `item`; null when it does not. */
function matchOf(item, query) {
  const title = normalize(item.label);
  if (title === query) return MATCH.exact;
  if (title.startsWith(query)) return MATCH.prefix;
  const words = query.split(" ");
  const titleWords = title.split(" ");
  if (words.every((w) => titleWords.some((t) => t.startsWith(w)))) return MATCH.words;
  if (title.includes(query)) return MATCH.substring;
  const hay = `${title} ${normalize(item.keywords)}`;
  if (words.every((w) => hay.includes(w))) return MATCH.loose;
  if (query.length >= 2 && inOrder(query.replace(/ /g, ""), title)) return MATCH.loose;
  return null;
}

/**
 * The rows that match `query`, best first (ties keep the view's order), each as
 * {item, match}. An empty query keeps every row, in order, as a loose match.
 */
export function rankItems(items, query) {
  const q = normalize(query);
  if (!q) return items.map((item) => ({ item, match: MATCH.loose }));
  const ranked = [];
  items.forEach((item, index) => {
    const match = matchOf(item, q);
    if (match !== null) ranked.push({ item, match, index });
  });
  ranked.sort((a, b) => a.match - b.match || a.index - b.index);
  return ranked.map(({ item, match }) => ({ item, match }));
}

/** Whether Enter may run this row without the user picking it (arrow keys, mouse). */
export function runsUnpicked({ item, match }, query) {
  if (!item.changesSetting) return true;
  if (match === MATCH.exact) return true;
  return match === MATCH.prefix && normalize(query).length >= CLEAR_PREFIX_CHARS;
}
