// Produce a test message: topic, key, properties, payload; shows the id it was stored at.
// REST: POST /topics/persistent/{t}/{ns}/{topic} (Pulsar's REST producer, docs/gateway.md).
// A topic with a schema gets the payload as text in its latest schema version (the gateway
// encodes it); without one, the payload's UTF-8 bytes.
import { parseTopic, permissions, topicName } from "../access.js";

export const routes = ["/produce", "/produce/:domain/:tenant/:namespace/:topic"];
export const nav = "Produce";
export const title = "Produce a message";

const enc = encodeURIComponent;

function base64Utf8(text) {
  const bytes = new TextEncoder().encode(text);
  let raw = "";
  for (const b of bytes) raw += String.fromCharCode(b);
  return btoa(raw);
}

// "k=v" lines -> {k: v}; throws on a line without "=".
function parseProperties(text) {
  const out = {};
  text.split("\n").map((l) => l.trim()).filter(Boolean).forEach((line, i) => {
    const at = line.indexOf("=");
    if (at < 1) throw new Error(`property line ${i + 1} is not key=value: ${line}`);
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  });
  return out;
}

export async function render(view, params, ctx) {
  const { h } = ctx;
  const topic = h("input", { id: "produce-topic", name: "topic", required: true, size: 50, autocomplete: "off",
    placeholder: "persistent://tenant/namespace/topic", value: params.topic ? topicName(params) : "" });
  const key = h("input", { id: "produce-key", name: "key", autocomplete: "off" });
  const props = h("textarea", { id: "produce-properties", name: "properties", rows: 3, cols: 40, placeholder: "key=value, one a line" });
  const payload = h("textarea", { id: "produce-payload", name: "payload", rows: 6, cols: 60, required: true });
  const send = h("button", { class: "primary", type: "submit", id: "produce-send" }, "Send");
  const allowed = h("p", { id: "produce-allowed", class: "muted", "aria-live": "polite" });
  const result = h("div", { id: "produced", "aria-live": "polite" });

  async function check() {
    const t = parseTopic(topic.value);
    if (!t || t.domain !== "persistent") { allowed.textContent = ""; send.disabled = false; return null; }
    try {
      const may = await permissions(ctx.api, { topic: topicName(t) });
      const ok = may.can("Topics_produceOnPersistentTopic");
      send.disabled = !ok;
      allowed.textContent = ok ? "" : `Your role (${may.role}) may not produce to ${topicName(t)}.`;
    } catch (err) { allowed.textContent = `${err.reason || err.message}`; }
    return t;
  }
  topic.addEventListener("change", check);

  const form = h("form", { onsubmit: async (e) => {
    e.preventDefault();
    const t = parseTopic(topic.value);
    if (!t || t.domain !== "persistent") { ctx.notify("Give a persistent topic: persistent://tenant/namespace/topic or tenant/namespace/topic.", { error: true }); return; }
    let properties;
    try { properties = parseProperties(props.value); } catch (err) { ctx.notify(err.message, { error: true }); return; }
    const path = `/${enc(t.tenant)}/${enc(t.namespace)}/${enc(t.topic)}`;
    let schemaVersion;
    try {
      const schema = await ctx.api(`/admin/v2/schemas${path}/schema`);
      if (!["NONE", "BYTES"].includes(schema.type)) schemaVersion = schema.version;
    } catch (err) {
      if (err.status !== 404) { ctx.notify(`${err.reason || err.message}`, { error: true }); return; }
    }
    const message = { payload: schemaVersion === undefined ? base64Utf8(payload.value) : payload.value, properties };
    if (key.value) message.key = key.value;
    const body = { messages: [message] };
    if (schemaVersion !== undefined) body.schemaVersion = schemaVersion;
    try {
      const acks = await ctx.api(`/topics/persistent${path}`, { method: "POST", body });
      const r = acks.messagePublishResults[0];
      if (r.messageId) {
        result.replaceChildren(h("p", {}, "Stored as message ", h("code", { id: "produced-id" }, r.messageId),
          ` on ${topicName(t)}`, schemaVersion === undefined ? "" : ` (schema version ${schemaVersion})`, "."));
        ctx.notify(`Message ${r.messageId} stored.`);
      } else {
        result.replaceChildren(h("p", { class: "state-bad" }, `Not stored: ${r.errorMsg}`));
      }
    } catch (err) {
      result.replaceChildren(h("p", { class: "state-bad" }, `Refused: ${err.reason || err.message} (HTTP ${err.status || "?"})`));
    }
  } },
  h("div", { class: "row" }, h("label", { for: "produce-topic" }, "Topic", topic)),
  allowed,
  h("div", { class: "row" }, h("label", { for: "produce-key" }, "Key (optional)", key),
    h("label", { for: "produce-properties" }, "Properties (optional)", props)),
  h("div", { class: "row" }, h("label", { for: "produce-payload" }, "Payload (text; with a schema, its value as text, e.g. JSON)", payload)),
  h("div", { class: "row" }, send));
  view.append(h("h1", {}, "Produce a message"), form, result);
  if (params.topic) await check();
}
