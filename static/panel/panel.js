/* Smart Context panel: the topic bubble cloud, the sticky indicator, the status line and the
 * similarity switch. Plain JS, no framework; inlined by smart_context.panel.render_panel().
 *
 * Topic labels are hostile (model output derived from user text): they are only ever written
 * with textContent, dataset and setAttribute, and looked up in a Map, never put into markup or
 * selectors. This file is inlined inside a script element, so it must never contain a closing
 * script tag or an HTML comment opener (render_panel refuses to inline it if it does).
 */
(function () {
  "use strict";

  var root = document.getElementById("smart-context-panel");
  if (!root || root.dataset.scReady === "true") {
    return;
  }
  root.dataset.scReady = "true";

  var EVENT_FILTER_DOM = "smart_context:filter_changed";
  var EVENT_TOPICS = "smart_context.topics_updated";
  var EVENT_FILTER = "smart_context.filter_changed";
  var HUES = [214, 262, 332, 24, 152, 188, 44, 292, 4, 122];
  var GAP_PX = 6;
  var PAD_PX = 10;
  var LEAVE_MS = 420;
  var MIN_FONT = 8;
  // Arrow keys walk the bubbles from the largest to the smallest; Home and End jump to the ends.
  var ARROW_STEPS = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1, Home: -Infinity, End: Infinity };
  var MAX_FONT = 15;

  var el = {
    cloud: root.querySelector("#sc-cloud"),
    status: root.querySelector("#sc-status"),
    toggle: root.querySelector("#sc-similarity-toggle"),
    clear: root.querySelector("#sc-clear"),
    sticky: root.querySelector("[data-sticky-count]"),
    stickyCount: root.querySelector(".sc-sticky-count"),
    error: root.querySelector("#sc-error"),
    errorText: root.querySelector(".sc-error-text"),
    errorClose: root.querySelector(".sc-error-close"),
    empty: root.querySelector("#sc-empty"),
    hint: root.querySelector("#sc-hint"),
  };

  var state = {
    chatId: null,
    loaded: false,
    loading: false,
    topics: [], // regular topics, [{label, count}], largest first
    stickyCount: 0,
    totalMessages: 0,
    activeTopics: [], // as confirmed by the host
    includedIds: [],
    embeddingSearch: true,
    selection: null, // the selection asked for while set_filter is in flight
    modeRequested: null, // the mode asked for while set_similarity_mode is in flight
    error: "",
  };
  var seq = { filter: 0, mode: 0, load: 0 };
  var bubbles = new Map(); // label -> {node, label, count}
  var lastLayoutKey = "";
  var lastDispatchKey = "";
  var bridge = null;

  // ---------------------------------------------------------------- small helpers

  function isObject(value) {
    return value !== null && typeof value === "object" && !Array.isArray(value);
  }

  function stringList(value) {
    var out = [];
    if (!Array.isArray(value)) {
      return out;
    }
    value.forEach(function (item) {
      if (typeof item === "string" && out.indexOf(item) === -1) {
        out.push(item);
      }
    });
    return out;
  }

  function count(value) {
    var n = Number(value);
    return isFinite(n) && n > 0 ? n : 0;
  }

  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  function reducedMotion() {
    return !!(window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches);
  }

  function hashLabel(label) {
    var h = 2166136261;
    for (var i = 0; i < label.length; i++) {
      h ^= label.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  function readInitial() {
    var node = document.getElementById("sc-initial");
    if (!node) {
      return {};
    }
    try {
      var data = JSON.parse(node.textContent || "{}");
      return isObject(data) ? data : {};
    } catch (err) {
      return {};
    }
  }

  // ---------------------------------------------------------------- host bridge

  function errorMessage(err) {
    if (err && typeof err.message === "string" && err.message) {
      return err.message;
    }
    return "The Smart Context service could not be reached.";
  }

  function normalizeResult(result) {
    if (!isObject(result)) {
      return { status: "error", error: "The host sent an unexpected reply." };
    }
    if (result.status !== "success") {
      var text = typeof result.error === "string" && result.error ? result.error : "";
      return { status: "error", error: text || "The command failed." };
    }
    return result;
  }

  function eventPayload(arg) {
    // Hosts hand listeners the payload; be lenient with a raw MessageEvent.
    if (arg && typeof arg.data === "string") {
      try {
        return JSON.parse(arg.data);
      } catch (err) {
        return null;
      }
    }
    return arg;
  }

  function httpBridge(apiBase) {
    var source = null;
    return {
      command: function (name, args) {
        return fetch(apiBase + "/api/commands/" + encodeURIComponent(name), {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify(args || {}),
        }).then(function (response) {
          return response.json().catch(function () {
            return { status: "error", error: "HTTP " + response.status + " from the host." };
          });
        });
      },
      on: function (name, fn) {
        if (typeof EventSource === "undefined") {
          return;
        }
        if (!source) {
          source = new EventSource(apiBase + "/api/events");
        }
        source.addEventListener(name, fn);
      },
    };
  }

  function makeBridge(initial) {
    var host = window.sidecar;
    if (host && typeof host.command === "function" && typeof host.on === "function") {
      return {
        command: function (name, args) {
          return host.command(name, args);
        },
        on: function (name, fn) {
          host.on(name, fn);
        },
      };
    }
    var base = typeof initial.api_base === "string" ? initial.api_base.replace(/\/+$/, "") : "";
    return httpBridge(base);
  }

  function call(name, args) {
    var pending;
    try {
      pending = Promise.resolve(bridge.command(name, args));
    } catch (err) {
      pending = Promise.reject(err);
    }
    return pending.then(normalizeResult, function (err) {
      return { status: "error", error: errorMessage(err) };
    });
  }

  // ---------------------------------------------------------------- derived state

  function similarityOn() {
    return state.modeRequested === null ? state.embeddingSearch : state.modeRequested;
  }

  function selectedTopics() {
    return state.selection === null ? state.activeTopics : state.selection;
  }

  function filterOn() {
    return similarityOn() && selectedTopics().length > 0;
  }

  function view() {
    if (!state.chatId) {
      return "no-chat";
    }
    if (!state.loaded) {
      return "loading";
    }
    return state.topics.length ? "topics" : "empty";
  }

  function snapshot() {
    return {
      chat_id: state.chatId,
      view: view(),
      topics: state.topics.map(function (t) {
        return { label: t.label, count: t.count };
      }),
      sticky_count: state.stickyCount,
      total_messages: state.totalMessages,
      active_topics: selectedTopics().slice(),
      included_ids: state.includedIds.slice(),
      embedding_search: similarityOn(),
      filter_active: filterOn(),
      pending: state.selection !== null || state.modeRequested !== null || state.loading,
      error: state.error,
    };
  }

  // ---------------------------------------------------------------- applying host data

  function applyTopics(result) {
    var regular = [];
    var seen = new Set();
    var sticky = 0;
    (Array.isArray(result.topics) ? result.topics : []).forEach(function (topic) {
      if (!isObject(topic) || typeof topic.label !== "string" || !topic.label) {
        return;
      }
      if (topic.sticky === true) {
        var ids = Array.isArray(topic.message_ids) ? topic.message_ids.length : 0;
        sticky = count(topic.count) || ids;
        return;
      }
      if (!seen.has(topic.label)) {
        seen.add(topic.label);
        regular.push({ label: topic.label, count: count(topic.count) });
      }
    });
    regular.sort(function (a, b) {
      return b.count - a.count || (a.label < b.label ? -1 : a.label > b.label ? 1 : 0);
    });
    state.topics = regular;
    state.stickyCount = sticky;
    if (result.total_messages !== undefined) {
      state.totalMessages = count(result.total_messages);
    }
  }

  function applyFilter(result) {
    if (Array.isArray(result.active_topics)) {
      state.activeTopics = stringList(result.active_topics);
    }
    if (Array.isArray(result.included_ids)) {
      state.includedIds = stringList(result.included_ids);
    }
    if (result.total_messages !== undefined) {
      state.totalMessages = count(result.total_messages);
    }
  }

  function dispatchFilterChanged(skipIfUnchanged) {
    if (!state.chatId) {
      return;
    }
    var detail = {
      chat_id: state.chatId,
      active_topics: state.embeddingSearch ? state.activeTopics.slice() : [],
      included_ids: state.includedIds.slice(),
      total_messages: state.totalMessages,
      embedding_search: state.embeddingSearch,
    };
    var key = JSON.stringify(detail);
    if (skipIfUnchanged && key === lastDispatchKey) {
      return;
    }
    lastDispatchKey = key;
    document.dispatchEvent(new CustomEvent(EVENT_FILTER_DOM, { detail: detail }));
  }

  function showError(text) {
    state.error = text;
    renderError();
  }

  function clearError() {
    state.error = "";
    renderError();
  }

  // ---------------------------------------------------------------- layout

  /* Deterministic circle packing: largest first; every next circle goes to the free spot,
   * touching one or two placed circles, that keeps the bounding box smallest for the target
   * aspect ratio (ties go to the spot nearest the middle). Radii are sqrt(count), so areas are
   * proportional to counts; the caller scales the result to the panel. */
  function pack(radii, gap, aspect) {
    var placed = [];
    var box = null;
    radii.forEach(function (r, index) {
      if (index === 0) {
        placed.push({ x: 0, y: 0, r: r });
        box = { x0: -r, y0: -r, x1: r, y1: r };
        return;
      }
      var best = null;
      var cx = (box.x0 + box.x1) / 2;
      var cy = (box.y0 + box.y1) / 2;
      function consider(x, y) {
        for (var i = 0; i < placed.length; i++) {
          var p = placed[i];
          if (Math.hypot(x - p.x, y - p.y) < p.r + r + gap - 1e-9) {
            return;
          }
        }
        var x0 = Math.min(box.x0, x - r);
        var x1 = Math.max(box.x1, x + r);
        var y0 = Math.min(box.y0, y - r);
        var y1 = Math.max(box.y1, y + r);
        var score =
          Math.max((x1 - x0) / aspect, y1 - y0) + 0.1 * Math.hypot((x - cx) / aspect, y - cy);
        if (best === null || score < best.score - 1e-9) {
          best = { x: x, y: y, score: score };
        }
      }
      placed.forEach(function (a) {
        var d = a.r + r + gap;
        for (var k = 0; k < 12; k++) {
          var angle = (k * Math.PI) / 6;
          consider(a.x + d * Math.cos(angle), a.y + d * Math.sin(angle));
        }
      });
      for (var i = 0; i < placed.length; i++) {
        for (var j = i + 1; j < placed.length; j++) {
          var a = placed[i];
          var b = placed[j];
          var da = a.r + r + gap;
          var db = b.r + r + gap;
          var dx = b.x - a.x;
          var dy = b.y - a.y;
          var dist = Math.hypot(dx, dy);
          if (dist === 0 || dist > da + db || dist < Math.abs(da - db)) {
            continue;
          }
          var along = (da * da - db * db + dist * dist) / (2 * dist);
          var across = Math.sqrt(Math.max(da * da - along * along, 0));
          var mx = a.x + (along * dx) / dist;
          var my = a.y + (along * dy) / dist;
          consider(mx + (across * dy) / dist, my - (across * dx) / dist);
          consider(mx - (across * dy) / dist, my + (across * dx) / dist);
        }
      }
      placed.push({ x: best.x, y: best.y, r: r });
      box = {
        x0: Math.min(box.x0, best.x - r),
        y0: Math.min(box.y0, best.y - r),
        x1: Math.max(box.x1, best.x + r),
        y1: Math.max(box.y1, best.y + r),
      };
    });
    return { circles: placed, box: box };
  }

  function layout(topics, width) {
    if (!topics.length) {
      return { circles: [], height: 0 };
    }
    var availW = Math.max(width - 2 * PAD_PX, 120);
    var maxH = Math.min(Math.max(availW * 0.95, 170), 360);
    var aspect = availW / maxH;
    var radii = topics.map(function (t) {
      return Math.sqrt(Math.max(t.count, 0.25));
    });
    var maxR = Math.min(availW * 0.3, 80);
    function scaleOf(result) {
      var w = result.box.x1 - result.box.x0;
      var h = result.box.y1 - result.box.y0;
      return Math.min(availW / w, maxH / h, maxR / radii[0]);
    }
    // Pack once to learn the scale, then again with a gap of GAP_PX at (about) that scale.
    var first = pack(radii, 0, aspect);
    var result = pack(radii, GAP_PX / scaleOf(first), aspect);
    var s = scaleOf(result);
    var w = (result.box.x1 - result.box.x0) * s;
    var h = (result.box.y1 - result.box.y0) * s;
    var left = PAD_PX + (availW - w) / 2 - result.box.x0 * s;
    var top = PAD_PX - result.box.y0 * s;
    return {
      circles: result.circles.map(function (c) {
        return { x: left + c.x * s, y: top + c.y * s, r: c.r * s };
      }),
      height: h + 2 * PAD_PX,
    };
  }

  function assignHues(topics) {
    var used = new Set();
    var hues = new Map();
    topics
      .map(function (t) {
        return t.label;
      })
      .sort()
      .forEach(function (label) {
        var start = hashLabel(label) % HUES.length;
        var pick = start;
        for (var k = 0; k < HUES.length; k++) {
          var candidate = (start + k) % HUES.length;
          if (!used.has(candidate)) {
            pick = candidate;
            break;
          }
        }
        used.add(pick);
        hues.set(label, HUES[pick]);
      });
    return hues;
  }

  var measure = null;

  function wordWidth(word) {
    // The width of a word at 100px in the bubble font (canvas: no layout, no reflow).
    if (measure === null) {
      measure = document.createElement("canvas").getContext("2d") || false;
      if (measure) {
        measure.font = "600 100px " + (getComputedStyle(root).fontFamily || "sans-serif");
      }
    }
    return measure ? measure.measureText(word).width : word.length * 62;
  }

  /* The label's font size in a bubble of radius r, and whether the label has to be clipped:
   * the widest word must fit the label box (88% of the diameter) with a little room; when it
   * would need a font smaller than MIN_FONT the label goes on one line with an ellipsis, and the
   * full label shows on hover and focus. */
  function labelFit(label, r) {
    var widest = label.split(/\s+/).reduce(function (m, w) {
      return Math.max(m, wordWidth(w));
    }, 1);
    var fit = (1.6 * r * 100) / widest;
    var size = Math.min(r * 0.34, fit, MAX_FONT);
    if (fit >= MIN_FONT) {
      return { size: Math.max(size, MIN_FONT), clip: false };
    }
    return { size: Math.max(Math.min(r * 0.34, 11), 9), clip: true };
  }

  // ---------------------------------------------------------------- rendering

  function createBubble(label) {
    var node = document.createElement("div");
    node.className = "sc-bubble";
    node.dataset.topic = label;
    node.setAttribute("role", "button");
    var text = document.createElement("span");
    text.className = "sc-bubble-label";
    text.textContent = label;
    var num = document.createElement("span");
    num.className = "sc-bubble-count";
    num.setAttribute("aria-hidden", "true");
    node.appendChild(text);
    node.appendChild(num);
    node.addEventListener("click", function () {
      toggleTopic(label);
    });
    node.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " " || event.key === "Spacebar") {
        event.preventDefault();
        if (!event.repeat) {
          toggleTopic(label);
        }
      } else if (Object.prototype.hasOwnProperty.call(ARROW_STEPS, event.key)) {
        event.preventDefault();
        focusNeighbour(label, ARROW_STEPS[event.key]);
      }
    });
    return { node: node, label: label, count: null, countNode: num };
  }

  function focusNeighbour(label, step) {
    if (!similarityOn()) {
      return;
    }
    var order = state.topics
      .map(function (t) {
        return t.label;
      })
      .filter(function (l) {
        return bubbles.has(l);
      });
    var at = order.indexOf(label);
    if (at === -1 || !order.length) {
      return;
    }
    var next;
    if (step === -Infinity) {
      next = 0;
    } else if (step === Infinity) {
      next = order.length - 1;
    } else {
      next = (at + step + order.length) % order.length;
    }
    bubbles.get(order[next]).node.focus();
  }

  function retireBubble(bubble) {
    var node = bubble.node;
    delete node.dataset.topic;
    node.removeAttribute("role");
    node.removeAttribute("aria-pressed");
    node.removeAttribute("aria-label");
    node.setAttribute("aria-hidden", "true");
    node.tabIndex = -1;
    node.classList.add("sc-leaving");
    if (document.activeElement === node) {
      el.cloud.focus();
    }
    if (reducedMotion()) {
      node.remove();
    } else {
      window.setTimeout(function () {
        node.remove();
      }, LEAVE_MS);
    }
  }

  function clearBubbles() {
    bubbles.forEach(function (bubble) {
      bubble.node.remove();
    });
    bubbles.clear();
    lastLayoutKey = "";
  }

  function placeBubbles() {
    var width = el.cloud.clientWidth || 280;
    var key = width + "|" + JSON.stringify(state.topics);
    if (key === lastLayoutKey) {
      return;
    }
    lastLayoutKey = key;
    var plan = layout(state.topics, width);
    var hues = assignHues(state.topics);
    var entering = [];
    var keep = new Set();
    state.topics.forEach(function (topic, i) {
      var c = plan.circles[i];
      var bubble = bubbles.get(topic.label);
      var transform = "translate(" + (c.x - c.r).toFixed(2) + "px, " + (c.y - c.r).toFixed(2) + "px)";
      if (!bubble) {
        bubble = createBubble(topic.label);
        bubbles.set(topic.label, bubble);
        bubble.node.classList.add("sc-entering");
        entering.push(bubble);
        el.cloud.appendChild(bubble.node);
      }
      keep.add(topic.label);
      var node = bubble.node;
      var size = (2 * c.r).toFixed(2) + "px";
      node.style.width = size;
      node.style.height = size;
      node.style.transform = transform;
      var fit = labelFit(topic.label, c.r);
      node.style.fontSize = fit.size.toFixed(1) + "px";
      node.dataset.fit = fit.clip ? "clip" : "full";
      node.style.setProperty("--sc-hue", String(hues.get(topic.label)));
      node.dataset.size = c.r < 24 ? "s" : c.r < 40 ? "m" : "l";
      bubble.count = topic.count;
      bubble.countNode.textContent = String(topic.count);
      var name = topic.label + ", " + plural(topic.count, "message");
      node.setAttribute("aria-label", name);
    });
    bubbles.forEach(function (bubble, label) {
      if (!keep.has(label)) {
        bubbles.delete(label);
        retireBubble(bubble);
      }
    });
    el.cloud.style.height = plan.height.toFixed(1) + "px";
    if (entering.length) {
      void el.cloud.offsetWidth; // commit the entering style so the entrance transitions
      entering.forEach(function (bubble) {
        bubble.node.classList.remove("sc-entering");
      });
    }
  }

  function renderBubbleStates() {
    var interactive = similarityOn();
    var selected = new Set(selectedTopics());
    var focused = document.activeElement;
    if (!interactive && focused && focused.parentNode === el.cloud) {
      el.toggle.focus(); // the bubbles are leaving the tab order: keep focus somewhere useful
    }
    bubbles.forEach(function (bubble, label) {
      var node = bubble.node;
      node.setAttribute("aria-pressed", selected.has(label) ? "true" : "false");
      if (interactive) {
        node.removeAttribute("aria-disabled");
        node.tabIndex = 0;
      } else {
        node.setAttribute("aria-disabled", "true");
        node.tabIndex = -1;
      }
    });
  }

  function statusText() {
    if (!state.chatId) {
      return "No chat open";
    }
    if (!state.loaded) {
      return "Loading topics…";
    }
    if (state.totalMessages === 0) {
      return "No messages yet";
    }
    if (!state.embeddingSearch || !state.activeTopics.length) {
      return "All messages in context";
    }
    return state.includedIds.length + " of " + state.totalMessages + " messages in context";
  }

  function hintText(current) {
    if (current !== "topics") {
      return "";
    }
    if (!similarityOn()) {
      return "Similarity filter is off: every message is sent. Topics are shown for reference.";
    }
    if (filterOn()) {
      return "Only messages about the selected topics are sent with your next message.";
    }
    return "Select topics to send only the messages about them.";
  }

  function emptyText(current) {
    if (current === "no-chat") {
      return "Open a chat to see its topics.";
    }
    if (current === "empty") {
      return state.totalMessages
        ? "Topics appear after the first replies."
        : "Topics appear after the first replies. Start the conversation!";
    }
    return "";
  }

  function renderError() {
    el.error.hidden = !state.error;
    el.errorText.textContent = state.error;
  }

  function render() {
    var current = view();
    root.dataset.view = current;
    root.dataset.filter = filterOn() ? "on" : "off";
    root.dataset.similarity = similarityOn() ? "on" : "off";
    root.setAttribute("aria-busy", state.loading || state.selection !== null ? "true" : "false");

    el.toggle.checked = similarityOn();

    el.sticky.hidden = !(state.stickyCount > 0 && current !== "no-chat");
    el.sticky.dataset.stickyCount = String(state.stickyCount);
    el.stickyCount.textContent = String(state.stickyCount);
    el.sticky.setAttribute(
      "aria-label",
      "Instructions & Preferences: " + plural(state.stickyCount, "message") + ", always in context"
    );

    if (current === "topics") {
      placeBubbles();
    } else if (current !== "loading") {
      // "loading" keeps the old bubbles only while refreshing the same chat
      clearBubbles();
      el.cloud.style.height = "0px";
    }
    renderBubbleStates();

    var empty = emptyText(current);
    el.empty.hidden = !empty;
    el.empty.textContent = empty;
    el.status.textContent = statusText();
    el.clear.hidden = !filterOn();
    var hint = hintText(current);
    el.hint.hidden = !hint;
    el.hint.textContent = hint;
    renderError();
  }

  // ---------------------------------------------------------------- actions

  function loadTopics() {
    var chat = state.chatId;
    var ticket = ++seq.load;
    state.loading = true;
    render();
    return call("smart_context.get_topics", chat ? { chat_id: chat } : {}).then(function (result) {
      if (ticket !== seq.load || chat !== state.chatId) {
        return result; // a newer load, or another chat, has taken over
      }
      state.loading = false;
      if (result.status === "success") {
        if (!chat && typeof result.chat_id === "string" && result.chat_id) {
          state.chatId = result.chat_id;
        }
        applyTopics(result);
        if (state.selection === null) {
          applyFilter(result);
        }
        if (typeof result.embedding_search === "boolean" && state.modeRequested === null) {
          state.embeddingSearch = result.embedding_search;
        }
        state.loaded = !!state.chatId;
        dispatchFilterChanged(false);
      } else if (chat) {
        showError(result.error);
      }
      render();
      return result;
    });
  }

  function setFilter(topics) {
    var chosen = stringList(topics);
    if (!state.chatId) {
      return Promise.resolve({ status: "error", error: "Open a chat to filter its topics." });
    }
    if (!similarityOn() && chosen.length) {
      var off = "Turn on the similarity filter to filter by topic.";
      showError(off);
      return Promise.resolve({ status: "error", error: off });
    }
    var chat = state.chatId;
    var ticket = ++seq.filter;
    state.selection = chosen;
    render();
    return call("smart_context.set_filter", { topics: chosen, chat_id: chat }).then(
      function (result) {
        if (ticket !== seq.filter || chat !== state.chatId) {
          return result; // superseded by a later click or a chat switch
        }
        state.selection = null;
        if (result.status === "success") {
          applyFilter(result);
          clearError();
          dispatchFilterChanged(false);
        } else {
          showError(result.error);
        }
        render();
        return result;
      }
    );
  }

  function toggleTopic(label) {
    if (!similarityOn() || !bubbles.has(label)) {
      return;
    }
    var current = selectedTopics().slice();
    var at = current.indexOf(label);
    if (at === -1) {
      current.push(label);
    } else {
      current.splice(at, 1);
    }
    setFilter(current);
  }

  function setSimilarityMode(enabled) {
    var wanted = !!enabled;
    var ticket = ++seq.mode;
    state.modeRequested = wanted;
    render();
    return call("smart_context.set_similarity_mode", { enabled: wanted }).then(function (result) {
      if (ticket !== seq.mode) {
        return result;
      }
      state.modeRequested = null;
      if (result.status === "success") {
        state.embeddingSearch =
          typeof result.embedding_search === "boolean" ? result.embedding_search : wanted;
        clearError();
        if (state.chatId) {
          loadTopics(); // what is in context changed: refresh it and tell the chat view
        }
      } else {
        showError(result.error);
      }
      render();
      return result;
    });
  }

  function selectChat(chatId) {
    var id = typeof chatId === "string" && chatId ? chatId : null;
    if (id !== state.chatId) {
      seq.filter++;
      seq.load++;
      state.chatId = id;
      state.loaded = false;
      state.loading = false;
      state.topics = [];
      state.stickyCount = 0;
      state.totalMessages = 0;
      state.activeTopics = [];
      state.includedIds = [];
      state.selection = null;
      state.error = "";
      clearBubbles();
    }
    render();
    return id ? loadTopics() : Promise.resolve({ status: "error", error: "No chat is open." });
  }

  // ---------------------------------------------------------------- host events

  function onTopicsUpdated(arg) {
    var payload = eventPayload(arg);
    if (!isObject(payload)) {
      return;
    }
    var chat = typeof payload.chat_id === "string" ? payload.chat_id : null;
    if (!state.chatId && chat && !document.body.hasAttribute("data-chat-id")) {
      state.chatId = chat; // a host that does not announce chats: follow its events
    }
    if (!chat || chat !== state.chatId) {
      return;
    }
    applyTopics(payload);
    state.loaded = true;
    render();
  }

  function onFilterChanged(arg) {
    var payload = eventPayload(arg);
    if (!isObject(payload) || payload.chat_id !== state.chatId || !state.chatId) {
      return;
    }
    if (state.selection !== null) {
      return; // our own set_filter is in flight; its reply is the newer truth
    }
    applyFilter(payload);
    render();
    dispatchFilterChanged(true);
  }

  var refreshTimer = 0;
  function onMessageAdded(event) {
    var detail = event && isObject(event.detail) ? event.detail : {};
    if (detail.chat_id && detail.chat_id !== state.chatId) {
      return;
    }
    window.clearTimeout(refreshTimer);
    refreshTimer = window.setTimeout(function () {
      if (state.chatId) {
        loadTopics();
      }
    }, 120);
  }

  // ---------------------------------------------------------------- start

  function start() {
    var initial = readInitial();
    bridge = makeBridge(initial);

    el.toggle.addEventListener("change", function () {
      setSimilarityMode(el.toggle.checked);
    });
    el.clear.addEventListener("click", function () {
      setFilter([]);
    });
    el.errorClose.addEventListener("click", clearError);
    el.cloud.tabIndex = -1;

    bridge.on(EVENT_TOPICS, onTopicsUpdated);
    bridge.on(EVENT_FILTER, onFilterChanged);
    document.addEventListener("sidecar:chat_selected", function (event) {
      var detail = event && isObject(event.detail) ? event.detail : {};
      selectChat(detail.chat_id);
    });
    document.addEventListener("sidecar:message_added", onMessageAdded);

    if (typeof ResizeObserver === "function") {
      var lastWidth = el.cloud.clientWidth;
      new ResizeObserver(function () {
        if (el.cloud.clientWidth !== lastWidth) {
          lastWidth = el.cloud.clientWidth;
          if (view() === "topics") {
            placeBubbles();
          }
        }
      }).observe(el.cloud);
    }

    window.SmartContextPanel = {
      setFilter: setFilter,
      getTopics: loadTopics,
      setSimilarityMode: setSimilarityMode,
      selectChat: selectChat,
      state: snapshot,
    };

    var announced = document.body.dataset.chatId;
    state.chatId = announced || (typeof initial.chat_id === "string" && initial.chat_id) || null;
    if (typeof initial.embedding_search === "boolean") {
      state.embeddingSearch = initial.embedding_search;
    }
    if (state.chatId && initial.chat_id === state.chatId && Array.isArray(initial.topics)) {
      applyTopics(initial);
      applyFilter(initial);
      state.loaded = true;
    }
    render();
    if (state.chatId || !document.body.hasAttribute("data-chat-id")) {
      loadTopics(); // without an announced chat, ask the host for its current one
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
