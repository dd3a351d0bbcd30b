// Tenants, and a search for a topic by name across the whole cluster (every tenant's
// namespaces' topic lists, read once and kept for 30 s).
import { href, parseTopic } from "../links.js";

export const routes = ["/tenants"];
export const title = "Tenants";
export const nav = "Tenants";

const INDEX_TTL_MS = 30000;
let index = null; // {at, topics: [full names], failed: [namespaces]}

async function topicIndex(ctx, tenants) {
  if (index && Date.now() - index.at < INDEX_TTL_MS) return index;
  const failed = [];
  const namespaces = (await Promise.all(tenants.map((t) => ctx.api(`/admin/v2/namespaces/${encodeURIComponent(t)}`)
    .catch((err) => { failed.push(`${t} (${err.reason || err.message})`); return []; })))).flat();
  const lists = await Promise.all(namespaces.map((ns) => {
    const [t, n] = ns.split("/");
    return ctx.api(`${ctx.paths.namespace(t, n)}/topics`).catch((err) => { failed.push(`${ns} (${err.reason || err.message})`); return []; });
  }));
  index = { at: Date.now(), topics: lists.flat().sort(), failed };
  return index;
}

function openNamespaceForm(ctx) {
  const { h } = ctx;
  const input = h("input", { id: "open-namespace", name: "namespace", placeholder: "tenant/namespace", required: true,
    pattern: "[^/]+/[^/]+" });
  return h("form", { class: "row", onsubmit: (e) => {
    e.preventDefault();
    const [t, ns] = input.value.trim().split("/");
    location.hash = href.namespace(t, ns);
  } }, h("label", { for: "open-namespace" }, "Open a namespace", input), h("button", { type: "submit" }, "Open"));
}

export async function render(view, _params, ctx) {
  const { h, table, api } = ctx;
  let tenants;
  try {
    tenants = await api("/admin/v2/tenants");
  } catch (err) {
    if (err.status !== 403) throw err;
    view.append(h("h1", {}, "Tenants"),
      h("p", { class: "muted" }, "Your role may not list the tenants (superusers only). Open a namespace you may use:"),
      openNamespaceForm(ctx));
    return;
  }
  const results = h("div", { id: "search-results", "aria-live": "polite" });
  const search = h("input", { id: "topic-search", type: "search", name: "q", placeholder: "part of a topic's name",
    autocomplete: "off", size: 40 });
  let timer = null;
  const run = async () => {
    const q = search.value.trim().toLowerCase();
    if (!q) { results.replaceChildren(); return; }
    results.replaceChildren(h("p", { class: "muted" }, "Searching…"));
    const { topics, failed } = await topicIndex(ctx, tenants);
    if (search.value.trim().toLowerCase() !== q) return; // typed on meanwhile
    const found = topics.filter((t) => t.toLowerCase().includes(q));
    results.replaceChildren(
      h("p", {}, `${found.length.toLocaleString("en-US")} topic(s) match “${q}”${found.length > 100 ? "; the first 100:" : ""}`),
      table([
        { label: "Topic", value: (t) => h("a", { href: href.topicOf(t) }, parseTopic(t)?.topic || t) },
        { label: "Namespace", value: (t) => { const p = parseTopic(t); return p ? h("a", { href: href.namespace(p.tenant, p.namespace) }, `${p.tenant}/${p.namespace}`) : ""; } },
        { label: "Domain", value: (t) => parseTopic(t)?.domain || "" },
      ], found.slice(0, 100), { empty: "No topic matches." }),
      failed.length ? h("p", { class: "state-warn" }, `! Not searched (refused or failed): ${failed.join(", ")}`) : null);
  };
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => run().catch(ctx.report), 150); });
  view.append(
    h("h1", {}, "Tenants"),
    h("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); run(); } },
      h("label", { for: "topic-search" }, "Find a topic in the whole cluster", search)),
    results,
    table([
      { label: "Tenant", value: (t) => h("a", { href: href.tenant(t) }, t) },
    ], tenants, { empty: "No tenant yet." }),
    openNamespaceForm(ctx));
  return () => clearTimeout(timer);
}
