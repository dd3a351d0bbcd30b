// A namespace: its topics with their rates, backlog and storage (one listing call and
// one stats call, /admin/v2/namespaces/{t}/{ns}/topicStats, however many topics), a
// filter as you type, and its policies. The figures refresh live.
//
// The table shows the first PAGE topics that match the filter, with a button for more:
// a namespace of 10,000 topics costs the same to draw as one of 200.
import { href, parseTopic } from "../links.js";

export const routes = ["/namespaces/:tenant/:namespace"];
export const title = (p) => `Namespace ${p.tenant}/${p.namespace}`;

const REFRESH_MS = 5000;
const PAGE = 200;
const HEADINGS = ["Topic", "State", "In", "Out", "Backlog", "Storage", "Producers", "Consumers"];

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function figures(ctx, s) {
  const { fmt } = ctx;
  if (!s) return ["not loaded", "–", "–", "–", "–", "–", "–"];
  return ["✓ loaded", fmt.rate(s.msgRateIn), fmt.rate(s.msgRateOut), fmt.count(s.msgBacklog), fmt.bytes(s.storageSize),
    fmt.count(s.producerCount), fmt.count(s.consumerCount)];
}

export async function render(view, { tenant, namespace }, ctx) {
  const { h, api, paths } = ctx;
  const base = paths.namespace(tenant, namespace);
  const [topics, first] = await Promise.all([api(`${base}/topics`), api(`${base}/topicStats`)]);
  let stats = first.topics;
  const lower = topics.map((t) => t.toLowerCase());
  let matches = topics;
  let shown = 0;

  const tbody = h("tbody", {});
  const count = h("p", { id: "topic-count", "aria-live": "polite" });
  const more = h("button", { type: "button", id: "more-topics" });
  // Rows as one HTML string: a thousand rows cost one parse, not ten thousand DOM calls.
  const rowHtml = (full) => {
    const p = parseTopic(full);
    const cells = figures(ctx, stats[full]).map((text, i) => `<td${i ? ' class="num"' : ""}>${escape(text)}</td>`).join("");
    return `<tr><td><a href="${escape(href.topicOf(full))}">${escape(p ? p.topic : full)}</a></td>${cells}</tr>`;
  };
  const draw = (upTo) => {
    tbody.insertAdjacentHTML("beforeend", matches.slice(shown, upTo).map(rowHtml).join(""));
    shown = Math.min(upTo, matches.length);
    const left = matches.length - shown;
    more.hidden = left <= 0;
    more.textContent = `Show ${Math.min(PAGE, left).toLocaleString("en-US")} more (${left.toLocaleString("en-US")} not shown)`;
  };
  const filter = h("input", { id: "topic-filter", type: "search", name: "filter", autocomplete: "off",
    placeholder: "part of a topic's name", size: 30 });
  const applyFilter = () => {
    const q = filter.value.trim().toLowerCase();
    matches = q ? topics.filter((_, i) => lower[i].includes(q)) : topics;
    tbody.replaceChildren();
    shown = 0;
    draw(PAGE);
    const total = topics.length.toLocaleString("en-US");
    count.textContent = (q ? `${matches.length.toLocaleString("en-US")} of ${total} topics match “${q}”.` : `${total} topics.`)
      + (shown < matches.length ? ` Showing the first ${shown.toLocaleString("en-US")}.` : "");
  };
  filter.addEventListener("input", applyFilter);
  more.addEventListener("click", () => {
    draw(shown + PAGE);
    count.textContent = count.textContent.replace(/ Showing the first [\d,]+\.$/, "")
      + (shown < matches.length ? ` Showing the first ${shown.toLocaleString("en-US")}.` : "");
  });
  applyFilter();

  const unreachable = h("p", { class: "state-warn" });
  const showUnreachable = (s) => {
    unreachable.textContent = s.unreachable.length ? `! No answer from broker(s) ${s.unreachable.join(", ")}: their topics show as not loaded.` : "";
    unreachable.hidden = !s.unreachable.length;
  };
  showUnreachable(first);
  ctx.every(REFRESH_MS, async () => {
    const fresh = await api(`${base}/topicStats`);
    stats = fresh.topics;
    [...tbody.rows].forEach((row, i) => {
      figures(ctx, stats[matches[i]]).forEach((text, j) => {
        const cell = row.cells[j + 1];
        if (cell.textContent !== text) cell.textContent = text;
      });
    });
    showUnreachable(fresh);
  });

  const policyBox = h("details", { id: "namespace-policies" }, h("summary", {}, "Policies"), h("p", { class: "muted" }, "Loading…"));
  api(base).then(
    (doc) => policyBox.replaceChildren(h("summary", {}, "Policies"), h("pre", {}, JSON.stringify(doc, null, 2))),
    (err) => policyBox.replaceChildren(h("summary", {}, "Policies"), h("p", { class: "muted" }, `Not shown: ${err.reason} (HTTP ${err.status}).`)));

  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/tenants" }, "Tenants"), " / ", h("a", { href: href.tenant(tenant) }, tenant), " / ", namespace),
    h("h1", {}, `Namespace ${tenant}/${namespace}`),
    h("form", { class: "row", role: "search", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "topic-filter" }, "Filter topics", filter)),
    count, unreachable,
    h("div", { class: "scroll" }, h("table", { id: "topics" },
      h("caption", { class: "muted" }, "Rates per second over the brokers' last stats interval; backlog in messages over all subscriptions"),
      h("thead", {}, h("tr", {}, HEADINGS.map((label, i) => h("th", { scope: "col", class: i > 1 ? "num" : null }, label)))),
      tbody)),
    more, policyBox);
}
