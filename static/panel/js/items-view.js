/*
 * The context section's DOM (#sc-items in panel.html.j2): the session's items grouped as Rules,
 * References and Tools with their mode badges and remove buttons, the Add list (filtered as
 * you type), the vault's problems, and the selection settings row. It renders an ItemsState and
 * turns clicks into the intents it was given; it never changes the state itself.
 */

const SETTING_INPUTS = [
  "context_top_k",
  "context_top_n",
  "context_include_score",
  "context_tools_top_k",
  "context_tools_top_n",
  "context_tools_include_score",
];
const isScore = (key) => key.endsWith("include_score");

const itemLabel = (item) => `${itemPrefix(item) ? `${itemPrefix(item)} ` : ""}${item.name}`;

const formatSetting = (key, value) =>
  isScore(key) ? Number(value).toFixed(2) : String(Math.round(value));

const settingsNote = (state) => {
  if (state.settingsAvailable === false) return NOT_SETTABLE;
  if (!state.settingsKnown) return "Defaults: change one to set it for this chat.";
  if (state.settings.context_expansion_depth > 0) {
    const depth = state.settings.context_expansion_depth;
    return `Expansion: ${depth} ${depth === 1 ? "pass" : "passes"}.`;
  }
  return "";
};

class ItemsView {
  /**
   * `root`: the panel element; `state`: the ItemsState to show; `intents`: add(item),
   * remove(item), setSettings(change), dismissError().
   */
  constructor(root, state, intents) {
    this.state = state;
    this.intents = intents;
    const section = root.querySelector("#sc-items");
    this.el = {
      section,
      count: section.querySelector(".sc-items-count"),
      add: section.querySelector("#sc-items-add"),
      picker: section.querySelector("#sc-items-picker"),
      search: section.querySelector("#sc-items-search"),
      choices: section.querySelector("#sc-items-choices"),
      groups: section.querySelector("#sc-items-groups"),
      empty: section.querySelector("#sc-items-empty"),
      error: section.querySelector("#sc-items-error"),
      errorText: section.querySelector("#sc-items-error .sc-error-text"),
      errorClose: section.querySelector("#sc-items-error .sc-error-close"),
      problems: section.querySelector("#sc-items-problems"),
      preset: section.querySelector("#sc-preset"),
      note: section.querySelector("#sc-settings-note"),
      numbers: [...section.querySelectorAll("[data-setting]")],
    };
    const { el } = this;
    el.add.addEventListener("click", () => this.#togglePicker());
    el.search.addEventListener("input", () => {
      state.query = el.search.value;
      this.#renderChoices();
    });
    el.search.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.#togglePicker(false);
        el.add.focus();
      }
    });
    el.errorClose.addEventListener("click", () => intents.dismissError());
    el.preset.addEventListener("change", () => {
      if (el.preset.value) intents.setSettings({ preset: el.preset.value });
    });
    for (const input of el.numbers) {
      input.addEventListener("change", () => this.#numberChanged(input));
    }
  }

  render() {
    const { state, el } = this;
    el.section.hidden = !state.available || !state.chatId;
    el.section.setAttribute("aria-busy", state.loaded ? "false" : "true");
    el.count.textContent = state.loaded ? `· ${state.sessionCount}` : "";
    this.#renderGroups();
    this.#renderChoices();
    el.error.hidden = !state.error;
    el.errorText.textContent = state.error;
    this.#renderProblems();
    this.#renderSettings();
  }

  #togglePicker(open = this.el.picker.hidden) {
    const { el } = this;
    el.picker.hidden = !open;
    el.add.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      this.#renderChoices();
      el.search.focus();
    }
  }

  #renderGroups() {
    const { state, el } = this;
    const hadFocus = el.groups.contains(document.activeElement);
    const fragment = document.createDocumentFragment();
    for (const group of state.sessionGroups) {
      if (!group.items.length) continue;
      const box = itemsEl("div", "sc-items-group");
      box.dataset.group = group.type;
      const heading = itemsEl("h3", "sc-items-group-title", `${group.title} (${group.items.length})`);
      const list = itemsEl("ul", "sc-items-list");
      list.setAttribute("aria-label", group.title);
      for (const item of group.items) list.append(this.#sessionRow(item));
      box.append(heading, list);
      fragment.append(box);
    }
    el.groups.replaceChildren(fragment);
    const empty = state.loaded && !state.sessionCount;
    el.empty.hidden = !empty;
    el.empty.textContent = empty ? "No rules, references or tools in this chat yet." : "";
    if (hadFocus && !el.groups.contains(document.activeElement)) el.add.focus();
  }

  #sessionRow(item) {
    const row = itemsEl("li", "sc-item");
    row.dataset.itemKey = itemKey(item);
    row.dataset.type = item.type;
    if (item.description) row.title = item.description;
    const prefix = itemPrefix(item);
    if (prefix) row.append(itemsEl("span", "sc-item-prefix", prefix));
    row.append(itemsEl("span", "sc-item-name", item.name));
    const mode = item.include_mode || "manual";
    const badge = itemsEl("span", "sc-badge", MODE_NAMES[mode] || mode);
    badge.dataset.mode = mode;
    row.append(badge);
    const remove = itemsEl("button", "sc-item-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", `Remove ${itemLabel(item)} from this chat`);
    remove.title = "Remove from this chat";
    remove.disabled = this.state.busy.has(itemKey(item));
    remove.addEventListener("click", () => this.intents.remove(item));
    row.append(remove);
    return row;
  }

  #renderChoices() {
    const { state, el } = this;
    if (el.picker.hidden) return;
    const fragment = document.createDocumentFragment();
    const choices = state.choices;
    for (const item of choices) {
      const row = itemsEl("li", "sc-choice");
      row.dataset.itemKey = itemKey(item);
      const button = itemsEl("button", "sc-choice-button");
      button.type = "button";
      button.disabled = state.busy.has(itemKey(item));
      button.setAttribute("aria-label", `Add ${itemLabel(item)} to this chat`);
      const prefix = itemPrefix(item);
      if (prefix) button.append(itemsEl("span", "sc-item-prefix", prefix));
      button.append(itemsEl("span", "sc-item-name", item.name));
      const kind = itemsEl("span", "sc-choice-type", item.type);
      button.append(kind);
      if (item.description) button.append(itemsEl("span", "sc-choice-description", item.description));
      button.addEventListener("click", () => {
        this.intents.add(item);
        el.search.focus();
      });
      row.append(button);
      fragment.append(row);
    }
    if (!choices.length) {
      const none = state.query.trim() ? "No item matches." : "Every item of the vault is in this chat.";
      fragment.append(itemsEl("li", "sc-choice-empty", none));
    }
    el.choices.replaceChildren(fragment);
  }

  #renderProblems() {
    const { state, el } = this;
    const sources = state.problems.map((p) => p.source);
    el.problems.hidden = !sources.length;
    el.problems.textContent = sources.length
      ? `${plural(sources.length, "problem")} with item files: ${[...new Set(sources)].join(", ")}`
      : "";
    el.problems.title = state.problems.map((p) => `${p.source}: ${asText(p.message)}`).join("\n");
  }

  #renderSettings() {
    const { state, el } = this;
    const off = state.settingsAvailable === false;
    el.preset.disabled = off;
    el.preset.value = state.settings.preset || "";
    for (const input of el.numbers) {
      input.disabled = off;
      if (off || document.activeElement !== input) {
        input.value = formatSetting(input.dataset.setting, state.settings[input.dataset.setting]);
      }
    }
    const note = settingsNote(state);
    el.note.hidden = !note;
    el.note.textContent = note;
  }

  #numberChanged(input) {
    const key = input.dataset.setting;
    const value = Number(input.value);
    const valid = input.value !== "" && Number.isFinite(value) && input.checkValidity();
    if (!valid || !SETTING_INPUTS.includes(key)) {
      input.value = formatSetting(key, this.state.settings[key]); // back to what is in effect
      return;
    }
    this.intents.setSettings({ [key]: isScore(key) ? value : Math.round(value) });
  }
}
