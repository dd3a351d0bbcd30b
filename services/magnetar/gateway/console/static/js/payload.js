// A message's payload shown three ways (text, pretty JSON, hex), chosen with one toggle
// the peek and dead-letter pages share. Payloads arrive base64 (the REST API's form).

export const VIEWS = ["text", "json", "hex"];

export function bytesOf(b64) {
  const raw = atob(b64 || "");
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) out[i] = raw.charCodeAt(i);
  return out;
}

export function utf8Of(b64) {
  return new TextDecoder("utf-8", { fatal: false }).decode(bytesOf(b64));
}

// "00000000  7b 22 61 22 …  {"a"…" lines of 16 bytes.
export function hexOf(b64) {
  const bytes = bytesOf(b64);
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ").padEnd(47, " ");
    const ascii = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${i.toString(16).padStart(8, "0")}  ${hex}  ${ascii}`);
  }
  return lines.join("\n") || "(empty)";
}

// The payload as `view` shows it; `value` is the schema-decoded value when the API gave one.
export function render(view, b64, value) {
  if (view === "hex") return hexOf(b64);
  if (view === "json") {
    if (value !== undefined && value !== null) return JSON.stringify(value, null, 2);
    try { return JSON.stringify(JSON.parse(utf8Of(b64)), null, 2); } catch (_) { return `(not JSON) ${utf8Of(b64)}`; }
  }
  if (value !== undefined && value !== null && typeof value !== "string") return JSON.stringify(value);
  return typeof value === "string" ? value : utf8Of(b64);
}

// A radio group "Show payload as: text / JSON / hex"; onChange(view).
export function viewToggle(h, current, onChange) {
  return h("fieldset", { class: "row toggle" },
    h("legend", {}, "Show payloads as"),
    VIEWS.map((v) => h("label", { class: "inline" },
      h("input", { type: "radio", name: "payload-view", value: v, checked: v === current,
                   onchange: () => onChange(v) }),
      v === "json" ? "pretty JSON" : v)));
}
