// One subscription of a topic: its backlog, type, unacked and consumers (live), the
// actions on it (skip N, clear backlog, reset to a time, delete), and a peek at its first
// unacknowledged messages; and the form that creates a subscription on a topic. Every
// action is one REST call (docs/console-operations.md); those the role may not do are not
// offered (js/access.js), and the API refuses them anyway.
import { permissions, topicName } from "../access.js";
import { href } from "../links.js";
import { render as showPayload, viewToggle } from "../payload.js";

export const routes = [
  "/subscriptions/:domain/:tenant/:namespace/:topic/:subscription",
  "/new-subscription/:domain/:tenant/:namespace/:topic",
];
export const title = (p) => (p.subscription ? `Subscription ${p.subscription}` : `New subscription on ${p.topic}`);

const enc = encodeURIComponent;
const PEEK_COUNT = 10;

function topicHref(p) {
  return href.topic(p.domain, p.tenant, p.namespace, p.topic);
}

function crumbs(h, p) {
  return h("p", { class: "muted" },
    h("a", { href: topicHref(p) }, topicName(p)), p.subscription ? ` › ${p.subscription}` : "");
}

// A time in the page's <input type=datetime-local> (local time) as ms since the epoch.
function inputTimeMs(value) {
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms : null;
}

export async function render(view, params, ctx) {
  return params.subscription ? renderSubscription(view, params, ctx) : renderNew(view, params, ctx);
}

async function renderNew(view, params, ctx) {
  const { h } = ctx;
  const topic = topicName(params);
  // Creating needs consume on the subscription: asked for a name that no subscription
  // permission lists, so a role limited to some subscriptions is offered the form (the API decides).
  const may = await permissions(ctx.api, { topic, subscription: "console-new-subscription" });
  const name = h("input", { id: "sub-name", name: "name", required: true, autocomplete: "off" });
  const start = h("select", { id: "sub-start", name: "start" },
    h("option", { value: "latest" }, "latest (only new messages)"),
    h("option", { value: "earliest" }, "earliest (every retained message)"));
  const form = h("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    const sub = name.value.trim();
    if (!sub) { ctx.notify("Name the subscription.", { error: true }); return; }
    try {
      await ctx.api(`${ctx.paths.topic(params.domain, params.tenant, params.namespace, params.topic)}/subscription/${enc(sub)}`,
        { method: "PUT", body: JSON.stringify(start.value), headers: { "Content-Type": "application/json" } });
      location.hash = href.subscription(params.domain, params.tenant, params.namespace, params.topic, sub);
    } catch (err) {
      ctx.notify(`Not created: ${err.reason || err.message}`, { error: true });
    }
  } },
  h("label", { for: "sub-name" }, "Name", name),
  h("label", { for: "sub-start" }, "Starts at", start),
  h("button", { class: "primary", type: "submit", id: "create-subscription" }, "Create"));
  view.append(h("h1", {}, "New subscription"), crumbs(h, params),
    may.can("PersistentTopics_createSubscription") ? form
      : h("p", {}, `Your role (${may.role}) may not create subscriptions on this topic.`));
}

async function renderSubscription(view, params, ctx) {
  const { h, fmt } = ctx;
  const topic = topicName(params);
  const sub = params.subscription;
  const base = `${ctx.paths.topic(params.domain, params.tenant, params.namespace, params.topic)}/subscription/${enc(sub)}`;
  const topicPath = ctx.paths.topic(params.domain, params.tenant, params.namespace, params.topic);
  const [may, meta] = await Promise.all([
    permissions(ctx.api, { topic, subscription: sub }),
    ctx.api(`${topicPath}/partitions`),
  ]);
  const statsPath = `${topicPath}/${meta.partitions > 0 ? "partitioned-stats" : "stats"}`;

  const summary = h("div", { class: "cards", id: "summary" });
  const consumers = h("div", { id: "consumers" });
  async function refresh() {
    const stats = await ctx.api(statsPath);
    const s = stats.subscriptions && stats.subscriptions[sub];
    if (!s) { summary.replaceChildren(h("p", { class: "state-bad" }, "This subscription does not exist (any more).")); consumers.replaceChildren(); return; }
    const card = (label, value, id, extra) => h("div", { class: "card" },
      h("div", { class: "muted" }, label), h("div", { id, "data-value": extra ?? value }, value));
    summary.replaceChildren(
      card("Backlog", fmt.count(s.msgBacklog), "backlog", s.msgBacklog),
      card("Type", s.type, "type"),
      card("Unacked", fmt.count(s.unackedMessages), "unacked", s.unackedMessages),
      card("Rate out", fmt.rate(s.msgRateOut), "rate-out", s.msgRateOut),
      card("Acknowledged", fmt.rate(s.messageAckRate), "ack-rate", s.messageAckRate),
      card("Redelivered", fmt.rate(s.msgRateRedeliver), "redeliver-rate", s.msgRateRedeliver),
      card("Consumers", fmt.count(s.consumers.length), "consumer-count", s.consumers.length),
      card("Blocked on unacked", s.blockedSubscriptionOnUnackedMsgs ? "yes" : "no", "blocked"));
    consumers.replaceChildren(ctx.table([
      { label: "Name", value: (c) => c.consumerName },
      { label: "Address", value: (c) => c.address || "–" },
      { label: "Rate out", value: (c) => fmt.rate(c.msgRateOut), num: true },
      { label: "Acknowledged", value: (c) => fmt.rate(c.messageAckRate), num: true },
      { label: "Redelivered", value: (c) => fmt.rate(c.msgRateRedeliver), num: true },
      { label: "Unacked", value: (c) => fmt.count(c.unackedMessages), num: true },
      { label: "Blocked", value: (c) => (c.blockedConsumerOnUnackedMsgs ? "blocked" : "no") },
      { label: "Connected since", value: (c) => c.connectedSince || "–" },
    ], s.consumers, { empty: "No consumer connected." }));
  }
  await refresh();
  ctx.every(2000, refresh);

  // -- actions ---------------------------------------------------------------------
  async function act(what, call, { confirm } = {}) {
    if (confirm && !(await ctx.confirmDialog(confirm.text, { confirm: confirm.button }))) return false;
    try {
      await call();
      ctx.notify(what);
      await refresh();
      return true;
    } catch (err) {
      ctx.notify(`${err.reason || err.message} (HTTP ${err.status || "?"})`, { error: true });
      return false;
    }
  }
  const actions = [];
  if (may.can("PersistentTopics_skipMessages")) {
    const n = h("input", { id: "skip-count", type: "number", min: 1, value: 1, size: 6 });
    actions.push(h("form", { class: "row", onsubmit: (e) => {
      e.preventDefault();
      const count = Number(n.value);
      if (!Number.isInteger(count) || count < 1) { ctx.notify("Skip a whole number of messages, 1 or more.", { error: true }); return; }
      act(`Skipped ${count} message(s).`, () => ctx.api(`${base}/skip/${count}`, { method: "POST" }),
        { confirm: { text: `Acknowledge the next ${count} message(s) of ${sub} without delivering them? This cannot be undone.`, button: "Skip" } });
    } }, h("label", { for: "skip-count" }, "Messages", n), h("button", { id: "skip", type: "submit" }, "Skip")));
  }
  if (may.can("PersistentTopics_skipAllMessages")) {
    actions.push(h("div", { class: "row" }, h("button", { id: "clear-backlog", type: "button", class: "danger", onclick: () =>
      act("Backlog cleared.", () => ctx.api(`${base}/skip_all`, { method: "POST" }),
        { confirm: { text: `Acknowledge the whole backlog of ${sub}? This cannot be undone.`, button: "Clear backlog" } }) },
    "Clear backlog")));
  }
  if (may.can("PersistentTopics_resetCursor")) {
    const when = h("input", { id: "reset-time", type: "datetime-local", step: "0.001", required: true });
    actions.push(h("form", { class: "row", onsubmit: (e) => {
      e.preventDefault();
      const ms = inputTimeMs(when.value);
      if (ms === null) { ctx.notify("Give a date and time to reset to.", { error: true }); return; }
      act(`Reset to ${fmt.time(ms)}.`, () => ctx.api(`${base}/resetcursor/${ms}`, { method: "POST" }),
        { confirm: { text: `Move ${sub} to the first message published at or after ${fmt.time(ms)} (your local ${when.value})? Messages before it count as acknowledged; those after it are delivered again.`, button: "Reset" } });
    } }, h("label", { for: "reset-time" }, "Reset to the time (local)", when), h("button", { id: "reset", type: "submit" }, "Reset")));
  }
  if (may.can("PersistentTopics_deleteSubscription")) {
    actions.push(h("div", { class: "row" }, h("button", { id: "delete-subscription", type: "button", class: "danger", onclick: async () => {
      const done = await act(`Subscription ${sub} deleted.`, () => ctx.api(base, { method: "DELETE" }),
        { confirm: { text: `Delete the subscription ${sub} and its position? This cannot be undone.`, button: "Delete" } });
      if (done) location.hash = topicHref(params);
    } }, "Delete subscription")));
  }

  // -- peek --------------------------------------------------------------------------
  const peekBox = h("div", { id: "peeked" });
  let peeked = [];
  let viewAs = "text";
  function drawPeek() {
    peekBox.replaceChildren(...(peeked.length ? peeked.map((m) => h("article", { class: "message card", "data-id": m.messageId },
      h("h3", {}, m.messageId, h("span", { class: "muted" }, ` · ${m.publishTime}`)),
      h("dl", { class: "meta" },
        m.key ? [h("dt", {}, "Key"), h("dd", {}, m.key)] : null,
        h("dt", {}, "Producer"), h("dd", {}, m.producerName || "–"),
        h("dt", {}, "Size"), h("dd", {}, fmt.bytes(m.size)),
        m.schemaType ? [h("dt", {}, "Schema"), h("dd", {}, `${m.schemaType} v${m.schemaVersion}`)] : null,
        m.decodeError ? [h("dt", {}, "Not decoded"), h("dd", {}, m.decodeError)] : null,
        Object.keys(m.properties).length ? [h("dt", {}, "Properties"),
          h("dd", {}, h("pre", { class: "properties" }, JSON.stringify(m.properties, null, 2)))] : null),
      h("pre", { class: "payload", "data-view": viewAs }, showPayload(viewAs, m.payload, m.value))))
      : [h("p", { class: "muted" }, "No unacknowledged message.")]));
  }
  const count = h("input", { id: "peek-count", type: "number", min: 1, max: 100, value: PEEK_COUNT, size: 4 });
  const peekForm = h("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    try {
      peeked = await ctx.api(`/admin/v2/peek/${enc(params.tenant)}/${enc(params.namespace)}/${enc(params.topic)}/subscription/${enc(sub)}`,
        { query: { count: count.value } });
      drawPeek();
    } catch (err) { ctx.notify(`${err.reason || err.message}`, { error: true }); }
  } }, h("label", { for: "peek-count" }, "Messages", count), h("button", { id: "peek", type: "submit" }, "Peek"));

  view.append(
    h("h1", {}, `Subscription ${sub}`), crumbs(h, params),
    summary,
    h("h2", {}, "Consumers"), consumers,
    h("h2", {}, "Actions"),
    actions.length ? h("div", { id: "actions" }, actions)
      : h("p", { class: "muted", id: "no-actions" }, `Your role (${may.role}) may not change this subscription.`),
    h("h2", {}, "Peek"),
    params.domain === "persistent" && may.can("Magnetar_peekMessages")
      ? h("div", { id: "peek-section" }, h("p", { class: "muted" }, "The first unacknowledged messages, read without acknowledging them."),
        peekForm, viewToggle(h, viewAs, (v) => { viewAs = v; drawPeek(); }), peekBox)
      : h("p", { class: "muted" }, "Peeking is not offered here."),
  );
}
