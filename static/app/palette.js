// The command palette (Ctrl/Cmd+K): a dialog with a filterable listbox, driven by the keyboard.
//
// A "view" is {title, placeholder, load?(), items(query) -> [{id, label, hint?, checked?, keywords?,
// run(palette)}], filters?}. The palette keeps the rows whose label or keywords hold every word
// typed, unless the view says `filters: false` (its rows answer the query themselves). Commands
// may push a sub-view (the topic picker) or close the palette.

import { h, restoreFocus } from "./dom.js";

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
    this.opener = null;

    this.input.addEventListener("input", () => this.#refresh(0));
    this.input.addEventListener("keydown", (event) => this.#onKey(event));
    this.list.addEventListener("click", (event) => {
      const option = event.target.closest("[role='option']");
      if (option) this.#run(Number(option.dataset.index));
    });
    this.list.addEventListener("mousemove", (event) => {
      const option = event.target.closest("[role='option']");
      const index = option ? Number(option.dataset.index) : -1;
      if (option && index !== this.active) this.#setActive(index);
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
    this.#refresh(0);
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

  #refresh(active) {
    const query = this.input.value;
    const words = this.view.filters === false ? [] : query.toLowerCase().split(/\s+/).filter(Boolean);
    this.items = this.view.items(query).filter((item) => {
      const hay = `${item.label} ${item.keywords || ""}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    });
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
    this.#setActive(Math.min(active, Math.max(0, this.items.length - 1)));
  }

  #setActive(index) {
    const previous = this.list.querySelector("[aria-selected='true']");
    if (previous) previous.setAttribute("aria-selected", "false");
    this.active = index;
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
      this.#setActive((this.active + 1) % count);
    } else if (event.key === "ArrowUp" && count) {
      event.preventDefault();
      this.#setActive((this.active - 1 + count) % count);
    } else if (event.key === "Home" && count && !this.input.value) {
      event.preventDefault();
      this.#setActive(0);
    } else if (event.key === "End" && count && !this.input.value) {
      event.preventDefault();
      this.#setActive(count - 1);
    } else if (event.key === "Enter") {
      event.preventDefault();
      this.#run(this.active);
    } else if (event.key === "Backspace" && !this.input.value && this.view !== this.rootView) {
      event.preventDefault();
      this.show(this.rootView);
    }
  }
}
