// Live status: polls /status.json and fills the elements marked data-field.
"use strict";
(function () {
  const EVERY_MS = 1000;
  const fields = document.querySelectorAll("[data-field]");
  const updated = document.querySelector("[data-updated]");
  const skips = document.getElementById("skips");
  function showSkips(list) {
    const items = list.length ? list.slice().reverse().map(function (s) {
      const li = document.createElement("li");
      const path = document.createElement("span");
      path.className = "path";
      path.textContent = s.path;
      li.append(path, ": " + s.reason);
      return li;
    }) : [Object.assign(document.createElement("li"), {textContent: "none"})];
    const before = skips.textContent;
    const next = document.createElement("ul");
    next.append(...items);
    if (next.textContent !== before) skips.replaceChildren(...items);
  }
  function show(value) {
    if (value === null || value === undefined) return "–";
    if (value === true) return "yes";
    if (value === false) return "no";
    return String(value);
  }
  async function poll() {
    try {
      const response = await fetch("/status.json", {cache: "no-store", credentials: "same-origin"});
      if (response.ok) {
        const data = await response.json();
        for (const el of fields) {
          const key = el.dataset.field;
          if (key in data) {
            const text = key === "last_error" && !data[key] ? "none" : show(data[key]);
            if (el.textContent !== text) el.textContent = text;
          }
        }
        if (skips && Array.isArray(data.recent_skips)) showSkips(data.recent_skips);
        if (updated) updated.hidden = false;
      }
    } catch (err) {
      // The server may be restarting: try again on the next tick.
    }
    setTimeout(poll, EVERY_MS);
  }
  setTimeout(poll, EVERY_MS);
})();
