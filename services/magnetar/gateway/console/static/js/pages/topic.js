// A topic: rates in and out, storage, backlog per subscription, producers and consumers
// (name, address, rates, unacked, blocked), ledgers with their ensembles, and the
// policies that apply; the figures refresh live.
import { href } from "../links.js";

export const routes = ["/topics/:domain/:tenant/:namespace/:topic"];
export const title = (p) => `Topic ${p.topic}`;

const REFRESH_MS = 3000;

function yesNo(h, blocked) {
  return blocked ? h("span", { class: "state-warn" }, "! blocked") : "no";
}

function figures(ctx, s) {
  const { h, fmt } = ctx;
  const backlog = Object.values(s.subscriptions || {}).reduce((n, sub) => n + (sub.msgBacklog || 0), 0);
  return h("dl", { class: "facts", id: "topic-figures" },
    h("dt", {}, "Rate in"), h("dd", {}, `${fmt.rate(s.msgRateIn)} (${fmt.bytes(s.msgThroughputIn)}/s)`),
    h("dt", {}, "Rate out"), h("dd", {}, `${fmt.rate(s.msgRateOut)} (${fmt.bytes(s.msgThroughputOut)}/s)`),
    h("dt", {}, "Messages in, total"), h("dd", {}, fmt.count(s.msgInCounter)),
    h("dt", {}, "Storage"), h("dd", {}, fmt.bytes(s.storageSize)),
    h("dt", {}, "Backlog"), h("dd", { id: "topic-backlog" }, `${fmt.count(backlog)} messages (${fmt.bytes(s.backlogSize)})`));
}

function subscriptions(ctx, s, p) {
  const { h, table, fmt } = ctx;
  const rows = Object.entries(s.subscriptions || {});
  const create = h("p", {}, h("a", { href: href.newSubscription(p.domain, p.tenant, p.namespace, p.topic) }, "Create a subscription…"));
  return h("div", {}, create, table([
    { label: "Subscription", value: ([name]) => h("a", { href: href.subscription(p.domain, p.tenant, p.namespace, p.topic, name) }, name) },
    { label: "Type", value: ([, sub]) => sub.type },
    { label: "Backlog", num: true, value: ([, sub]) => fmt.count(sub.msgBacklog) },
    { label: "Rate out", num: true, value: ([, sub]) => fmt.rate(sub.msgRateOut) },
    { label: "Unacked", num: true, value: ([, sub]) => fmt.count(sub.unackedMessages) },
    { label: "Consumers", num: true, value: ([, sub]) => fmt.count((sub.consumers || []).length) },
    { label: "Blocked", value: ([, sub]) => yesNo(h, sub.blockedSubscriptionOnUnackedMsgs) },
  ], rows, { empty: "No subscription." }));
}

function producers(ctx, s) {
  const { table, fmt } = ctx;
  return table([
    { label: "Producer", value: (p) => p.producerName || "–" },
    { label: "Address", value: (p) => p.address || "–" },
    { label: "Rate in", num: true, value: (p) => fmt.rate(p.msgRateIn) },
    { label: "Throughput", num: true, value: (p) => `${fmt.bytes(p.msgThroughputIn)}/s` },
    { label: "Connected since", value: (p) => p.connectedSince || "–" },
  ], s.publishers || [], { empty: "No producer connected." });
}

function consumers(ctx, s) {
  const { h, table, fmt } = ctx;
  const rows = Object.entries(s.subscriptions || {}).flatMap(([sub, v]) => (v.consumers || []).map((c) => ({ sub, ...c })));
  return table([
    { label: "Consumer", value: (c) => c.consumerName || "–" },
    { label: "Subscription", value: (c) => c.sub },
    { label: "Address", value: (c) => c.address || "–" },
    { label: "Rate out", num: true, value: (c) => fmt.rate(c.msgRateOut) },
    { label: "Unacked", num: true, value: (c) => fmt.count(c.unackedMessages) },
    { label: "Permits", num: true, value: (c) => fmt.count(c.availablePermits) },
    { label: "Blocked", value: (c) => yesNo(h, c.blockedConsumerOnUnackedMsgs) },
  ], rows, { empty: "No consumer connected." });
}

async function ledgers(ctx, base) {
  const { h, table, fmt, api } = ctx;
  const internal = await api(`${base}/internalStats`);
  const metas = await Promise.all(internal.ledgers.map((l) => api(`/admin/v2/ledgers/${l.ledgerId}`).catch((err) => ({ error: err }))));
  const ensembles = (m) => {
    if (m.error) return m.error.status === 403 ? "superusers only" : `✗ ${m.error.reason}`;
    return h("ul", { class: "plain" }, m.fragments.map((f) => h("li", {}, `from entry ${f.first_entry}: ${f.bookies.join(", ")}`)));
  };
  const rows = internal.ledgers.map((l, i) => ({ ...l, meta: metas[i] }));
  const state = (l) => (l.meta.error ? "–" : l.meta.state);
  return table([
    { label: "Ledger", value: (l) => l.ledgerId },
    { label: "Entries", num: true, value: (l) => fmt.count(l.entries) },
    { label: "Size", num: true, value: (l) => fmt.bytes(l.size) },
    { label: "State", value: state },
    { label: "Ensemble (bookies by fragment)", value: (l) => ensembles(l.meta) },
  ], rows, { empty: "No ledger yet." });
}

export async function render(view, params, ctx) {
  const { h, api, paths } = ctx;
  const { domain, tenant, namespace, topic } = params;
  const base = paths.topic(domain, tenant, namespace, topic);
  const stats = await api(`${base}/stats`);
  const sections = {
    figures: h("section", { "aria-label": "Figures" }, figures(ctx, stats)),
    subs: h("section", { "aria-labelledby": "h-subs" }),
    producers: h("section", { "aria-labelledby": "h-producers" }),
    consumers: h("section", { "aria-labelledby": "h-consumers" }),
  };
  const fill = (s) => {
    sections.figures.replaceChildren(figures(ctx, s));
    sections.subs.replaceChildren(h("h2", { id: "h-subs" }, "Subscriptions"), subscriptions(ctx, s, params));
    sections.producers.replaceChildren(h("h2", { id: "h-producers" }, "Producers"), producers(ctx, s));
    sections.consumers.replaceChildren(h("h2", { id: "h-consumers" }, "Consumers"), consumers(ctx, s));
  };
  fill(stats);
  ctx.every(REFRESH_MS, async () => fill(await api(`${base}/stats`)));

  const ledgerBox = h("section", { "aria-labelledby": "h-ledgers" }, h("h2", { id: "h-ledgers" }, "Ledgers"), h("p", { class: "muted" }, "Loading…"));
  if (domain === "persistent") {
    ledgers(ctx, base).then((node) => ledgerBox.replaceChildren(h("h2", { id: "h-ledgers" }, "Ledgers"), node),
      (err) => ledgerBox.replaceChildren(h("h2", { id: "h-ledgers" }, "Ledgers"), h("p", { class: "muted" }, `Not shown: ${err.reason || err.message}.`)));
  } else {
    ledgerBox.replaceChildren(h("h2", { id: "h-ledgers" }, "Ledgers"), h("p", { class: "muted" }, "None: a non-persistent topic stores nothing."));
  }
  const policySummary = () => h("summary", {}, "Policies (the namespace's; topic-level ones override them)");
  const policyBox = h("details", { id: "topic-policies" }, policySummary(), h("p", { class: "muted" }, "Loading…"));
  api(paths.namespace(tenant, namespace)).then(
    (doc) => policyBox.replaceChildren(policySummary(), h("pre", {}, JSON.stringify(doc, null, 2))),
    (err) => policyBox.replaceChildren(policySummary(), h("p", { class: "muted" }, `Not shown: ${err.reason} (HTTP ${err.status}).`)));

  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/tenants" }, "Tenants"), " / ", h("a", { href: href.tenant(tenant) }, tenant), " / ",
      h("a", { href: href.namespace(tenant, namespace) }, namespace), " / ", topic),
    h("h1", {}, `Topic ${topic}`),
    h("p", { class: "muted" }, `${domain}://${tenant}/${namespace}/${topic}`),
    ...Object.values(sections), ledgerBox, policyBox);
}
