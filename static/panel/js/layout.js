/*
 * The bubble cloud's geometry and colours, as pure functions: numbers and labels in, circles,
 * hues and font sizes out. No DOM, no state; the view measures text and passes the measure in.
 */

const GAP_PX = 6; // between two bubbles
const PAD_PX = 10; // around the cloud
const MIN_FONT = 8;
const MAX_FONT = 15;
const HUES = [214, 262, 332, 24, 152, 188, 44, 292, 4, 122];

/**
 * Deterministic circle packing: largest first; every next circle goes to the free spot,
 * touching one or two placed circles, that keeps the bounding box smallest for the target
 * aspect ratio (ties go to the spot nearest the middle). Returns the circles ({x, y, r}, in the
 * order of `radii`) and their bounding box ({x0, y0, x1, y1}), in the units of `radii`.
 */
const packCircles = (radii, gap, aspect) => {
  const placed = [];
  let box = null;
  radii.forEach((r, index) => {
    if (index === 0) {
      placed.push({ x: 0, y: 0, r });
      box = { x0: -r, y0: -r, x1: r, y1: r };
      return;
    }
    let best = null;
    const cx = (box.x0 + box.x1) / 2;
    const cy = (box.y0 + box.y1) / 2;
    const consider = (x, y) => {
      for (const p of placed) {
        if (Math.hypot(x - p.x, y - p.y) < p.r + r + gap - 1e-9) return;
      }
      const x0 = Math.min(box.x0, x - r);
      const x1 = Math.max(box.x1, x + r);
      const y0 = Math.min(box.y0, y - r);
      const y1 = Math.max(box.y1, y + r);
      const score =
        Math.max((x1 - x0) / aspect, y1 - y0) + 0.1 * Math.hypot((x - cx) / aspect, y - cy);
      if (best === null || score < best.score - 1e-9) best = { x, y, score };
    };
    // Spots touching one circle: twelve directions around each.
    for (const a of placed) {
      const d = a.r + r + gap;
      for (let k = 0; k < 12; k++) {
        const angle = (k * Math.PI) / 6;
        consider(a.x + d * Math.cos(angle), a.y + d * Math.sin(angle));
      }
    }
    // Spots touching two circles: where the two enlarged circles cross.
    for (let i = 0; i < placed.length; i++) {
      for (let j = i + 1; j < placed.length; j++) {
        const a = placed[i];
        const b = placed[j];
        const da = a.r + r + gap;
        const db = b.r + r + gap;
        const dx = b.x - a.x;
        const dy = b.y - a.y;
        const dist = Math.hypot(dx, dy);
        if (dist === 0 || dist > da + db || dist < Math.abs(da - db)) continue;
        const along = (da * da - db * db + dist * dist) / (2 * dist);
        const across = Math.sqrt(Math.max(da * da - along * along, 0));
        const mx = a.x + (along * dx) / dist;
        const my = a.y + (along * dy) / dist;
        consider(mx + (across * dy) / dist, my - (across * dx) / dist);
        consider(mx - (across * dy) / dist, my + (across * dx) / dist);
      }
    }
    placed.push({ x: best.x, y: best.y, r });
    box = {
      x0: Math.min(box.x0, best.x - r),
      y0: Math.min(box.y0, best.y - r),
      x1: Math.max(box.x1, best.x + r),
      y1: Math.max(box.y1, best.y + r),
    };
  });
  return { circles: placed, box };
};

/**
 * The cloud for topics of these message `counts` (largest first) in a panel `width` pixels
 * wide: circles ({x, y, r} in pixels, in the order of `counts`) whose areas are proportional to
 * the counts, about GAP_PX apart, and the cloud's height.
 */
const bubbleLayout = (counts, width) => {
  if (!counts.length) return { circles: [], height: 0 };
  const availW = Math.max(width - 2 * PAD_PX, 120);
  const maxH = Math.min(Math.max(availW * 0.95, 170), 360);
  const aspect = availW / maxH;
  const radii = counts.map((n) => Math.sqrt(Math.max(n, 0.25)));
  const maxR = Math.min(availW * 0.3, 80);
  const scaleOf = ({ box }) =>
    Math.min(availW / (box.x1 - box.x0), maxH / (box.y1 - box.y0), maxR / radii[0]);
  // Pack once to learn the scale, then again with a gap of GAP_PX at (about) that scale.
  const first = packCircles(radii, 0, aspect);
  const { circles, box } = packCircles(radii, GAP_PX / scaleOf(first), aspect);
  const s = scaleOf({ box });
  const w = (box.x1 - box.x0) * s;
  const h = (box.y1 - box.y0) * s;
  const left = PAD_PX + (availW - w) / 2 - box.x0 * s;
  const top = PAD_PX - box.y0 * s;
  return {
    circles: circles.map((c) => ({ x: left + c.x * s, y: top + c.y * s, r: c.r * s })),
    height: h + 2 * PAD_PX,
  };
};

/** FNV-1a over the label's UTF-16 code units: a stable number per label. */
const hashLabel = (label) => {
  let h = 2166136261;
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
};

/**
 * A hue per label (Map label -> hue): stable for a label, and all different while there are
 * no more labels than HUES (labels are served in sorted order, each from its hash onwards).
 */
const assignHues = (labels) => {
  const used = new Set();
  const hues = new Map();
  for (const label of [...labels].sort()) {
    const start = hashLabel(label) % HUES.length;
    let pick = start;
    for (let k = 0; k < HUES.length; k++) {
      const candidate = (start + k) % HUES.length;
      if (!used.has(candidate)) {
        pick = candidate;
        break;
      }
    }
    used.add(pick);
    hues.set(label, HUES[pick]);
  }
  return hues;
};

/**
 * The label's font size in a bubble of radius `r`, and whether the label has to be clipped:
 * the widest word must fit the label box (88% of the diameter) with a little room; when it
 * would need a font smaller than MIN_FONT the label goes on one line with an ellipsis, and the
 * full label shows on hover and focus. `wordWidth(word)` is a word's width at a 100px font.
 */
const labelFit = (label, r, wordWidth) => {
  const widest = label.split(/\s+/).reduce((m, word) => Math.max(m, wordWidth(word)), 1);
  const fit = (1.6 * r * 100) / widest;
  const size = Math.min(r * 0.34, fit, MAX_FONT);
  if (fit >= MIN_FONT) return { size: Math.max(size, MIN_FONT), clip: false };
  return { size: Math.max(Math.min(r * 0.34, 11), 9), clip: true };
};
