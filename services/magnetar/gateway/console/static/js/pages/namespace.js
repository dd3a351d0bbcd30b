// A namespace: its topics with their rates, backlog and storage (one listing call and
// one stats call, /admin/v2/namespaces/{t}/{ns}/topicStats, however many topics), a
// filter as you type, and its policies. The stats refresh live.
import { href, parseTopic } from "../links.js";

export const routes = ["/namespaces/:tenant/:namespace"];
export const title = (p) => `Namespace ${p.tenant}/${p.namespace}`;

const REFRESH_MS = 5000;
const COLUMNS = ["in", "out", "backlog", "storage", "producers", "consumers"];

function cells(ctx, s) {
  const { fmt } = ctx;
  if (!s) return ["–", "–", "–", "–", "–", "–"];
  return [fmt.rate(s.msgRateIn), fmt.rate(s.msgRateOut), fmt.count(s.msgBacklog), fmt.bytes(s.storageSize),
    fmt.count(s.producerCount), fmt.count(s.consumerCount)];
}

export async function render(view, { tenant, namespace }, ctx) {
  const { h, api, paths } = ctx;
  const base = paths.namespace(tenant, namespace);
  const [topics, stats] = await Promise.all([api(`${base}/topics`), api(`${base}/topicStats`)]);
  const policies = api(base).catch((err) => ({ error: err }));

  // One row per topic, built once; live updates rewrite the figures in place.
  const rows = new Map();
  const tbody = h("tbody", {});
  for (const full of topics) {
    const p = parseTopic(full);
    const s = stats.topics[full];
    const stateCell = h("td", {}, s ? "✓ loaded" : "not loaded");
    const figureCells = cells(ctx, s).map((text) => h("td", { class: "num" }, text));
    const row = h("tr", { "data-topic": full },
      h("td", {}, h("a", { href: href.topicOf(full) }, p ? p.topic : full)), stateCell, ...figureCells);
    rows.set(full, { row, stateCell, figureCells, name: full.toLowerCase() });
    tbody.append(row);
  }
  const count = h("p", { id: "topic-count", "aria-live": "polite" });
  const filter = h("input", { id: "topic-filter", type: "search", name: "filter", autocomplete: "off",
    placeholder: "part of a topic's name", size: 30 });
  const applyFilter = () => {
    const q = filter.value.trim().toLowerCase();
    let shown = 0;
    for (const r of rows.values()) {
      const match = !q || r.name.includes(q);
      r.row.hidden = !match;
      if (match) shown += 1;
    }
    count.textContent = q ? `${shown.toLocaleString("en-US")} of ${rows.size.toLocaleString("en-US")} topics match “${q}”.`
      : `${rows.size.toLocaleString("en-US")} topics.`;
  };
  filter.addEventListener("input", applyFilter);
  applyFilter();

  const unreachable = h("p", { class: "state-warn" });
  const showUnreachable = (s) => {
    unreachable.textContent = s.unreachable.length ? `! No answer from broker(s) ${s.unreachable.join(", ")}: their topics show as not loaded.` : "";
    unreachable.hidden = !s.unreachable.length;
  };
  showUnreachable(stats);
  ctx.every(REFRESH_MS, async () => {
    const fresh = await api(`${base}/topicStats`);
    for (const [full, r] of rows) {
      const s = fresh.topics[full];
      r.stateCell.textContent = s ? "✓ loaded" : "not loaded";
      cells(ctx, s).forEach((text, i) => { if (r.figureCells[i].textContent !== text) r.figureCells[i].textContent = text; });
    }
    showUnreachable(fresh);
  });

  const policyBox = h("details", { id: "namespace-policies" }, h("summary", {}, "Policies"), h("p", { class: "muted" }, "Loading…"));
  policies.then((doc) => {
    policyBox.replaceChildren(h("summary", {}, "Policies"), doc.error
      ? h("p", { class: "muted" }, `Not shown: ${doc.error.reason} (HTTP ${doc.error.status}).`)
      : h("pre", {}, JSON.stringify(doc, null, 2)));
  });

  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/tenants" }, "Tenants"), " / ", h("a", { href: href.tenant(tenant) }, tenant), " / ", namespace),
    h("h1", {}, `Namespace ${tenant}/${namespace}`),
    h("form", { class: "row", role: "search", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "topic-filter" }, "Filter topics", filter)),
    count, unreachable,
    h("div", { class: "scroll" }, h("table", { id: "topics" },
      h("caption", { class: "muted" }, "Rates per second over the brokers' last stats interval; backlog in messages over all subscriptions"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Topic"), h("th", { scope: "col" }, "State"),
        ...COLUMNS.map((c) => h("th", { scope: "col", class: "num" }, c[0].toUpperCase() + c.slice(1))))),
      tbody)),
    policyBox);
}
