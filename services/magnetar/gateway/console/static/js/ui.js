// Small DOM helpers shared by the pages: no framework, no build step (docs/console.md).

// h("a", {href: "#/x", class: "y", onclick: fn}, "text", child, ...) -> Element
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// table([{label, value: row => node|string, num}], rows, {caption, empty}) -> <div class=scroll><table>
export function table(columns, rows, { caption, empty = "None." } = {}) {
  if (!rows.length) return h("p", { class: "muted" }, empty);
  return h("div", { class: "scroll" }, h("table", {},
    caption ? h("caption", { class: "muted" }, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : null }, c.value(r))))))));
}

export const fmt = {
  count: (n) => (n === undefined || n === null ? "–" : Number(n).toLocaleString("en-US")),
  rate: (n) => (n === undefined || n === null ? "–" : `${Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 })}/s`),
  bytes(n) {
    if (n === undefined || n === null) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = Number(n), i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${v.toLocaleString("en-US", { maximumFractionDigits: i ? 1 : 0 })} ${units[i]}`;
  },
  age(ms) {
    if (ms === undefined || ms === null || ms < 0) return "–";
    const s = Math.round(ms / 1000);
    if (s < 90) return `${s} s`;
    if (s < 5400) return `${Math.round(s / 60)} min`;
    if (s < 172800) return `${Math.round(s / 3600)} h`;
    return `${Math.round(s / 86400)} d`;
  },
  time: (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "–"),
};

// A message in the notice area (role=status): errors stay until the next navigation.
export function notify(text, { error = false } = {}) {
  const box = document.getElementById("notice");
  box.className = error ? "error" : "";
  box.textContent = text;
}

// confirmDialog("Purge 50 messages? This cannot be undone.", {confirm: "Purge"}) -> Promise<boolean>
export function confirmDialog(message, { confirm = "Confirm", cancel = "Cancel" } = {}) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { "aria-label": "Confirm" },
      h("p", {}, message),
      h("form", { method: "dialog", class: "row" },
        h("button", { value: "cancel" }, cancel),
        h("button", { value: "confirm", class: "danger" }, confirm)));
    dialog.addEventListener("close", () => { resolve(dialog.returnValue === "confirm"); dialog.remove(); });
    document.body.append(dialog);
    dialog.showModal();
  });
}
