// The command palette (Ctrl/Cmd+K): a dialog with a filterable listbox, driven by the keyboard.
//
// A "view" is {title, placeholder, load?(), items(query) -> [{id, label, hint?, checked?, keywords?,
// changesSetting?, run(palette)}], filters?}. The palette keeps the rows that match what was
// typed, best title match first (palette-match.js), unless the view says `filters: false` (its
// rows answer the query themselves). Enter runs the highlighted row; a row that changes a setting
// is highlighted by itself only when the typing names it clearly, else the user picks it with the
// arrow keys or the mouse. Commands may push a sub-view (the topic picker) or close the palette.

import { h, restoreFocus } from "./dom.js";
import { rankItems, runsUnpicked } from "./palette-match.js";

export class Palette {
  constructor(dialog, rootView) {
    this.dialog = dialog;
    this.input = dialog.querySelector("input");
    this.list = dialog.querySelector("[role='listbox']");
    this.title = dialog.querySelector("[data-role='title']");
    this.message = dialog.querySelector("[data-role='message']");
    this.rootView = rootView;
    this.view = rootView;
    this.items = [];
    this.active = 0;
    this.picked = false; // whether the user chose the highlighted row (arrow keys, mouse)
    this.opener = null;

    this.input.addEventListener("input", () => {
      if (!this.message.classList.contains("is-error")) this.setMessage("");
      this.#refresh();
    });
    this.input.addEventListener("keydown", (event) => this.#onKey(event));
    this.list.addEventListener("click", (event) => {
      const option = event.target.closest("[role='option']");
      if (option) this.#run(Number(option.dataset.index));
    });
    this.list.addEventListener("mousemove", (event) => {
      const option = event.target.closest("[role='option']");
      const index = option ? Number(option.dataset.index) : -1;
      if (option && index !== this.active) this.#setActive(index, true);
    });
    dialog.addEventListener("click", (event) => {
      if (event.target === dialog) this.close();
    });
    dialog.addEventListener("close", () => restoreFocus(dialog, this.opener));
  }

  get isOpen() {
    return this.dialog.open;
  }

  open() {
    if (this.dialog.open) return;
    this.opener = document.activeElement;
    this.dialog.showModal();
    this.show(this.rootView);
  }

  close() {
    if (this.dialog.open) this.dialog.close();
  }

  /** Switch to `view`, loading its data first when it has a loader. */
  async show(view) {
    this.view = view;
    this.input.value = "";
    this.input.placeholder = view.placeholder || "Type a command…";
    this.title.textContent = view.title || "Commands";
    this.setMessage("");
    this.input.focus();
    if (view.load) {
      this.items = [];
      this.list.replaceChildren(h("li", { class: "palette__empty", text: "Loading…" }));
      this.list.setAttribute("aria-busy", "true");
      try {
        await view.load();
      } catch (err) {
        this.setMessage(err.message || String(err), true);
      } finally {
        this.list.removeAttribute("aria-busy");
      }
      if (this.view !== view) return; // the user moved on meanwhile
    }
    this.#refresh();
  }

  /** A status line under the list; `isError` makes it an alert. */
  setMessage(text, isError = false) {
    this.message.textContent = text;
    this.message.hidden = !text;
    this.message.classList.toggle("is-error", isError);
    if (isError) this.message.setAttribute("role", "alert");
    else this.message.setAttribute("role", "status");
  }

  /** Re-read the view's items (after a toggle) keeping the highlighted row. */
  rerender() {
    this.#refresh(this.active);
  }

  /** Show the view's rows for the query; `kept`: the row to keep highlighted (a rerender). */
  #refresh(kept) {
    const query = this.input.value;
    const rows = this.view.items(query);
    const ranked = this.view.filters === false ? rows.map((item) => ({ item })) : rankItems(rows, query);
    this.items = ranked.map(({ item }) => item);
    const fragment = document.createDocumentFragment();
    this.items.forEach((item, index) => {
      const option = h(
        "li",
        {
          id: `palette-opt-${index}`,
          class: "palette__option",
          dataset: { index: String(index) },
          attrs: { role: "option", "aria-selected": "false" },
        },
        item.checked === undefined
          ? null
          : h("span", {
              class: "palette__check",
              attrs: { "aria-hidden": "true" },
              text: item.checked ? "✓" : "",
            }),
        h("span", { class: "palette__label", text: item.label }),
        item.hint ? h("span", { class: "palette__hint", text: item.hint }) : null,
      );
      if (item.checked !== undefined) option.setAttribute("aria-checked", String(Boolean(item.checked)));
      fragment.append(option);
    });
    if (!this.items.length) {
      fragment.append(h("li", { class: "palette__empty", text: this.view.empty || "No matching commands" }));
    }
    this.list.replaceChildren(fragment);
    if (kept !== undefined && kept >= 0 && this.items.length) {
      this.#setActive(Math.min(kept, this.items.length - 1), this.picked);
    } else {
      this.#setActive(ranked.findIndex((row) => runsUnpicked(row, query)), false);
    }
  }

  /** Highlight row `index` (-1: none); `picked`: the user chose it (arrow keys, mouse). */
  #setActive(index, picked) {
    const previous = this.list.querySelector("[aria-selected='true']");
    if (previous) previous.setAttribute("aria-selected", "false");
    this.active = index;
    this.picked = picked;
    const option = this.list.querySelector(`#palette-opt-${index}`);
    if (!option) {
      this.input.removeAttribute("aria-activedescendant");
      return;
    }
    option.setAttribute("aria-selected", "true");
    this.input.setAttribute("aria-activedescendant", option.id);
    option.scrollIntoView({ block: "nearest" });
  }

  async #run(index) {
    const item = this.items[index];
    if (!item) return;
    this.active = index;
    this.picked = true;
    try {
      await item.run(this);
    } catch (err) {
      this.setMessage(err.message || String(err), true);
    }
  }

  #onKey(event) {
    const count = this.items.length;
    if (event.key === "ArrowDown" && count) {
      event.preventDefault();
      this.#setActive((this.active + 1) % count, true);
    } else if (event.key === "ArrowUp" && count) {
      event.preventDefault();
      this.#setActive(this.active < 0 ? count - 1 : (this.active - 1 + count) % count, true);
    } else if (event.key === "Home" && count && !this.input.value) {
      event.preventDefault();
      this.#setActive(0, true);
    } else if (event.key === "End" && count && !this.input.value) {
      event.preventDefault();
      this.#setActive(count - 1, true);
    } else if (event.key === "Enter") {
      event.preventDefault();
      if (this.active < 0 && count) {
        this.setMessage(`Choose with ↑ ↓, then Enter: “${this.items[0].label}” changes a setting.`);
      } else this.#run(this.active);
    } else if (event.key === "Backspace" && !this.input.value && this.view !== this.rootView) {
      event.preventDefault();
      this.show(this.rootView);
    }
  }
}
