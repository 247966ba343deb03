// The window around the chat: drawers on small screens, and short notifications.

import { h } from "./dom.js";

const DRAWERS = { sidebar: "sidebar", panels: "panels" }; // toggle name -> element id

function setDrawer(name, open) {
  document.body.classList.toggle(`${name}-open`, open);
  for (const button of document.querySelectorAll(`[data-toggle="${name}"]`)) {
    button.setAttribute("aria-expanded", String(open));
  }
  const drawer = document.getElementById(DRAWERS[name]);
  if (open && drawer) {
    const target =
      drawer.querySelector(".chat-link[aria-current='page']") ||
      drawer.querySelector(".chat-link, [role='button'], input, button:not([data-toggle])");
    if (target) target.focus();
  }
}

/** Close the chat list and the panels when they are drawers over the chat. */
export function closeDrawers() {
  for (const name of Object.keys(DRAWERS)) {
    if (document.body.classList.contains(`${name}-open`)) setDrawer(name, false);
  }
}

/** Wire the [data-toggle] buttons, the scrim and Escape. */
export function setUpDrawers() {
  for (const button of document.querySelectorAll("[data-toggle]")) {
    button.addEventListener("click", () => {
      const name = button.dataset.toggle;
      const open = !document.body.classList.contains(`${name}-open`);
      closeDrawers();
      setDrawer(name, open);
    });
  }
  document.getElementById("scrim").addEventListener("click", closeDrawers);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !document.querySelector("dialog[open]")) closeDrawers();
  });
}

let toastTimer = 0;

/**
 * Put the toast at the top of the chat column, under its header: never over the composer and
 * its Send button, which must stay usable while a message shows.
 */
function placeToast(toast) {
  const chat = document.getElementById("chat");
  const header = chat && chat.querySelector(".chat__header");
  if (!chat || !header) return;
  const column = chat.getBoundingClientRect();
  toast.style.top = `${Math.round(header.getBoundingClientRect().bottom + 12)}px`;
  toast.style.left = `${Math.round(column.left + column.width / 2)}px`;
  toast.style.maxWidth = `${Math.max(Math.min(560, column.width - 32), 200)}px`;
}

/** A short message under the chat's header; errors are alerts and stay longer. */
export function notify(text, isError = false) {
  const toast = document.getElementById("toast");
  clearTimeout(toastTimer);
  const dismiss = () => {
    toast.hidden = true;
  };
  toast.replaceChildren(
    h("span", { class: "toast__text", text }),
    h("button", { type: "button", class: "link-button", text: "Dismiss", on: { click: dismiss } }),
  );
  toast.classList.toggle("toast--error", isError);
  toast.setAttribute("role", isError ? "alert" : "status");
  placeToast(toast);
  toast.hidden = false;
  toastTimer = setTimeout(dismiss, isError ? 10000 : 4000);
}

window.addEventListener("resize", () => {
  const toast = document.getElementById("toast");
  if (toast && !toast.hidden) placeToast(toast);
});
