// Dead letters: every DLQ topic (Pulsar's <topic>-<subscription>-DLQ) with its backlog and
// oldest message's age; one DLQ's messages with their provenance (REAL_TOPIC,
// ORIGIN_MESSAGE_ID, RECONSUMETIMES, reason); replay some or all of them to their real
// topics (the gateway's exactly-once replay) or purge the DLQ, after a confirmation.
// REST: /admin/v2/dlq/... (docs/gateway.md, "Dead letters"; docs/console-operations.md).
import { permissions } from "../access.js";
import { href } from "../links.js";
import { render as showPayload, viewToggle } from "../payload.js";

export const routes = ["/deadletters", "/deadletters/:tenant/:namespace", "/deadletters/:tenant/:namespace/:topic"];
export const nav = "Dead letters";
export const title = (p) => (p.topic ? `Dead letters: ${p.topic}` : "Dead letters");

const enc = encodeURIComponent;
const SHOWN = 100;
// Where spark-jobs/dlq_replay.py --report-topic (the Helm chart's dlqReplay.job.reportTopic)
// publishes each run's report, one JSON message a run.
export const RUNS_TOPIC = { tenant: "public", namespace: "default", topic: "dlq-replay-runs" };
const RUNS_SHOWN = 10;

function localName(topic) { return topic.slice(topic.lastIndexOf("/") + 1); }

function dlqHref(tenant, namespace, topic) {
  return `#/deadletters/${enc(tenant)}/${enc(namespace)}/${enc(localName(topic))}`;
}

export async function render(view, params, ctx) {
  if (params.topic) return renderDlq(view, params, ctx);
  return renderList(view, params, ctx);
}

// The namespaces to look in: the one in the route, else every namespace of every tenant
// (listing tenants is a superuser's; others name a namespace).
async function namespacesToScan(params, ctx) {
  if (params.tenant) return [`${params.tenant}/${params.namespace}`];
  const tenants = await ctx.api("/admin/v2/tenants");
  const lists = await Promise.all(tenants.map((t) => ctx.api(`/admin/v2/namespaces/${enc(t)}`).catch(() => [])));
  return lists.flat();
}

async function renderList(view, params, ctx) {
  const { h, fmt } = ctx;
  const pick = h("input", { id: "dlq-namespace", placeholder: "tenant/namespace", value: params.tenant ? `${params.tenant}/${params.namespace}` : "" });
  const form = h("form", { class: "row", onsubmit: (e) => {
    e.preventDefault();
    const [t, ns, extra] = pick.value.trim().split("/");
    if (!t || !ns || extra !== undefined) { ctx.notify("Give a namespace as tenant/namespace.", { error: true }); return; }
    ctx.navigate(`/deadletters/${enc(t)}/${enc(ns)}`);
  } }, h("label", { for: "dlq-namespace" }, "Namespace", pick), h("button", { type: "submit" }, "Show"));
  view.append(h("h1", {}, "Dead letters"), form);
  let namespaces;
  try {
    namespaces = await namespacesToScan(params, ctx);
  } catch (err) {
    if (err.status !== 403) throw err;
    view.append(h("p", { class: "muted" }, "Your role may not list every tenant: name a namespace."));
    return;
  }
  const rows = [];
  await Promise.all(namespaces.map(async (ns) => {
    const [t, n] = ns.split("/");
    try {
      for (const d of await ctx.api(`/admin/v2/dlq/${enc(t)}/${enc(n)}`)) rows.push({ ...d, tenant: t, namespace: n });
    } catch (err) {
      if (params.tenant) throw err; // the one asked for: say why
    }
  }));
  rows.sort((a, b) => (b.backlog - a.backlog) || a.topic.localeCompare(b.topic));
  const runs = await replayRuns(ctx);
  view.append(ctx.table([
    { label: "DLQ topic", value: (d) => h("a", { href: dlqHref(d.tenant, d.namespace, d.topic), class: "dlq-link" }, d.topic) },
    { label: "Subscription", value: (d) => d.subscription || "(none: nothing kept)" },
    { label: "Backlog", value: (d) => `${d.complete ? "" : "≥ "}${fmt.count(d.backlog)}`, num: true },
    { label: "Oldest", value: (d) => (d.oldestAgeSeconds == null ? "–" : `${fmt.age(d.oldestAgeSeconds * 1000)} ago`) },
    { label: "By REAL_TOPIC", value: (d) => Object.entries(d.countsByRealTopic).map(([t, c]) => `${t || "(none)"}: ${c}`).join(", ") || "–" },
  ], rows, { caption: `${rows.length} DLQ subscription(s) in ${namespaces.length} namespace(s)`, empty: "No dead-letter topic." }));
  view.append(h("h2", {}, "Spark replay runs"), runs === null
    ? h("p", { class: "muted", id: "runs" }, `No replay job reports to persistent://${RUNS_TOPIC.tenant}/${RUNS_TOPIC.namespace}/${RUNS_TOPIC.topic} `,
      "(the dlq-replay CronJob does when deployed: dlqReplay.job.reportTopic), or your role may not read it.")
    : h("div", { id: "runs" }, ctx.table([
      { label: "Finished", value: (r) => fmt.time(r.finished) },
      { label: "Took", value: (r) => fmt.age(r.finished - r.started) },
      { label: "Outcome", value: (r) => (r.exit_code === 0 ? "done" : `exit ${r.exit_code}${r.error ? `: ${r.error}` : ""}`) },
      { label: "DLQs", value: (r) => (r.dlqs || Object.values(r.asked || {})).join(", ") },
      { label: "Moved", value: (r) => (r.dry_run ? `${fmt.count(r.moved)} (dry run)` : fmt.count(r.moved)), num: true },
      { label: "Failed", value: (r) => fmt.count((r.failed || 0) + Object.values(r.missing_target || {}).reduce((a, b) => a + b, 0)), num: true },
      { label: "By target", value: (r) => Object.entries(r.by_target || {}).map(([t, n]) => `${t}: ${n}`).join(", ") || "–" },
    ], runs, { empty: "No run reported yet." })));
}

// The last runs the replay job reported, newest first (null: no report topic, or not readable).
// REST: GET .../examinemessage?initialPosition=latest&messagePosition=n, n = 1, 2, ...; past
// the first message examine answers the first again (as Pulsar's), which ends the list.
async function replayRuns(ctx) {
  const path = `${ctx.paths.topic("persistent", RUNS_TOPIC.tenant, RUNS_TOPIC.namespace, RUNS_TOPIC.topic)}/examinemessage`;
  const runs = [];
  let previous = null;
  for (let n = 1; n <= RUNS_SHOWN; n += 1) {
    let text;
    try {
      text = await ctx.api(path, { query: { initialPosition: "latest", messagePosition: n }, text: true });
    } catch (err) {
      if (n === 1 && [403, 404].includes(err.status)) return null;
      break; // 412: fewer runs than asked
    }
    if (text === previous) break;
    previous = text;
    try { runs.push(JSON.parse(text)); } catch (_) { break; }
  }
  return runs;
}

async function renderDlq(view, params, ctx) {
  const { h, fmt } = ctx;
  const { tenant, namespace } = params;
  const dlq = `persistent://${tenant}/${namespace}/${params.topic}`;
  const base = `/admin/v2/dlq/${enc(tenant)}/${enc(namespace)}/${enc(params.topic)}`;
  const listed = (await ctx.api(`/admin/v2/dlq/${enc(tenant)}/${enc(namespace)}`)).filter((d) => d.topic === dlq);
  const info = listed.find((d) => d.subscription) || listed[0];
  if (!info) {
    view.append(h("h1", {}, "Dead letters"), h("p", {}, `${dlq} is not a dead-letter topic of ${tenant}/${namespace}.`));
    return;
  }
  const sub = info.subscription || undefined;
  const realTopics = Object.keys(info.countsByRealTopic).filter(Boolean);
  const [may, ...onReal] = await Promise.all([
    permissions(ctx.api, { topic: dlq, subscription: sub || "dlq-replay" }),
    ...realTopics.map((t) => permissions(ctx.api, { topic: t }).catch(() => ({ can: () => false }))),
  ]);
  const canReplay = may.can("Magnetar_replayDeadLetters") && onReal.every((p) => p.can("Topics_produceOnPersistentTopic"));
  const canPurge = may.can("Magnetar_purgeDeadLetters");
  const canSelect = canReplay || canPurge;

  let letters = [];
  let viewAs = "text";
  const selected = new Set();
  const box = h("div", { id: "letters" });
  const status = h("p", { id: "dlq-status", class: "muted" });
  async function load() {
    letters = await ctx.api(`${base}/messages`, { query: { limit: SHOWN, subscription: sub } });
    for (const id of [...selected]) if (!letters.some((m) => m.messageId === id)) selected.delete(id);
    draw();
  }
  function draw() {
    status.textContent = `${fmt.count(letters.length)} message(s) shown${letters.length === SHOWN ? ` (the first ${SHOWN})` : ""}; ${selected.size} selected.`;
    const all = h("input", { type: "checkbox", id: "select-all", "aria-label": "Select every message shown",
      checked: letters.length > 0 && selected.size === letters.length,
      onchange: (e) => { selected.clear(); if (e.target.checked) letters.forEach((m) => selected.add(m.messageId)); draw(); } });
    box.replaceChildren(letters.length ? h("div", { class: "scroll" }, h("table", {},
      h("thead", {}, h("tr", {}, canSelect ? h("th", { scope: "col" }, all) : null,
        ["Message id", "REAL_TOPIC", "ORIGIN_MESSAGE_ID", "RECONSUMETIMES", "Reason", "Published", "Payload"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, letters.map((m) => h("tr", { "data-id": m.messageId },
        canSelect ? h("td", {}, h("input", { type: "checkbox", class: "pick", value: m.messageId, "aria-label": `Select ${m.messageId}`,
          checked: selected.has(m.messageId),
          onchange: (e) => { if (e.target.checked) selected.add(m.messageId); else selected.delete(m.messageId); draw(); } })) : null,
        h("td", {}, m.messageId), h("td", {}, m.realTopic ? h("a", { href: href.topicOf(m.realTopic) }, m.realTopic) : "–"), h("td", {}, m.originMessageId || "–"),
        h("td", { class: "num" }, m.reconsumeTimes ?? "–"), h("td", {}, m.reason || "–"), h("td", {}, m.publishTime),
        h("td", {}, h("pre", { class: "payload" }, showPayload(viewAs, m.payload)))))))) : h("p", { class: "muted" }, "No message waits in this DLQ."));
  }

  async function replay(body, what) {
    try {
      const r = await ctx.api(`${base}/replay`, { method: "POST", body, query: { subscription: sub } });
      const failed = r.failures.length ? ` Failed: ${r.failures.map((f) => `${f.messageId} (${f.reason})`).join("; ")}` : "";
      ctx.notify(`Replayed ${what}: ${r.moved} moved, ${r.skipped} already moved, ${r.failed} failed.${failed}`, { error: r.failed > 0 });
      selected.clear();
      await load();
    } catch (err) { ctx.notify(`Replay refused: ${err.reason || err.message} (HTTP ${err.status || "?"})`, { error: true }); }
  }
  const buttons = [];
  if (canReplay) {
    buttons.push(
      h("button", { id: "replay-selected", type: "button", class: "primary", onclick: () => {
        if (!selected.size) { ctx.notify("Select the messages to replay first.", { error: true }); return; }
        replay({ messageIds: [...selected] }, `${selected.size} selected message(s)`);
      } }, "Replay selected"),
      h("button", { id: "replay-all", type: "button", onclick: async () => {
        if (await ctx.confirmDialog(`Replay every message of ${dlq} (${fmt.count(info.backlog)}${info.complete ? "" : "+"}) to its REAL_TOPIC?`, { confirm: "Replay all" })) replay({}, "all");
      } }, "Replay all"));
  }
  if (canPurge) {
    buttons.push(h("button", { id: "purge-selected", type: "button", class: "danger", onclick: async () => {
      if (!selected.size) { ctx.notify("Select the messages to purge first.", { error: true }); return; }
      const ids = [...selected];
      if (!(await ctx.confirmDialog(`Purge ${ids.length} selected message(s) of ${dlq}: acknowledge (drop) them? This cannot be undone.`, { confirm: "Purge" }))) return;
      try {
        const r = await ctx.api(`${base}/purge`, { method: "POST", body: { messageIds: ids }, query: { subscription: sub } });
        ctx.notify(`Purged ${r.purgedMessageIds.length} of ${ids.length} selected message(s).`);
        selected.clear();
        await load();
      } catch (err) { ctx.notify(`Purge refused: ${err.reason || err.message} (HTTP ${err.status || "?"})`, { error: true }); }
    } }, "Purge selected"));
    buttons.push(h("button", { id: "purge", type: "button", class: "danger", onclick: async () => {
      if (!(await ctx.confirmDialog(`Purge ${dlq}: acknowledge (drop) its whole backlog (${fmt.count(info.backlog)}${info.complete ? "" : "+"} messages)? This cannot be undone.`, { confirm: "Purge" }))) return;
      try {
        await ctx.api(`${base}/purge`, { method: "POST", query: { subscription: sub } });
        ctx.notify(`Purged ${dlq}.`);
        await load();
      } catch (err) { ctx.notify(`Purge refused: ${err.reason || err.message} (HTTP ${err.status || "?"})`, { error: true }); }
    } }, "Purge all"));
  }
  view.append(
    h("h1", {}, `Dead letters: ${params.topic}`),
    h("p", { class: "muted" }, h("a", { href: `#/deadletters/${enc(tenant)}/${enc(namespace)}` }, `${tenant}/${namespace}`), ` › ${dlq}`),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "muted" }, "Backlog"), h("div", { id: "dlq-backlog" }, `${info.complete ? "" : "≥ "}${fmt.count(info.backlog)}`)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Oldest"), h("div", {}, info.oldestAgeSeconds == null ? "–" : `${fmt.age(info.oldestAgeSeconds * 1000)} ago`)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Subscription"), h("div", {}, sub || "(none)")),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Real topics"), h("div", {}, realTopics.join(", ") || "–"))),
    buttons.length ? h("div", { class: "row", id: "dlq-actions" }, buttons)
      : h("p", { class: "muted", id: "no-actions" }, `Your role (${may.role}) may not replay or purge this DLQ.`),
    status, viewToggle(h, viewAs, (v) => { viewAs = v; draw(); }), box);
  await load();
}
