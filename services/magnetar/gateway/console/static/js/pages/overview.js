// Overview: brokers (load, bundles), bookies (writable, read-only, gone; disk), the
// auditor (leader, under-replicated ledgers, progress), ZooKeeper, and the cluster's
// message rates in and out over the last 15 minutes (the gateway keeps them:
// /admin/v2/broker-stats/rates-history), all refreshed live.
import { lineChart } from "../chart.js";

export const routes = ["/"];
export const title = "Overview";
export const nav = "Overview";

const REFRESH_MS = 5000;

// Each source on its own: a role that may not read one (403) still sees the others.
async function load(ctx) {
  const get = (path, query) => ctx.api(path, { query }).then((value) => ({ value }), (error) => ({ error }));
  const [rates, bookies, auditor, ready, zookeeper] = await Promise.all([
    get("/admin/v2/broker-stats/rates-history"), get("/admin/v2/bookies"),
    get("/admin/v2/auditor", { maxLedgers: 20 }), get("/readyz"), get("/admin/v2/zookeeper"),
  ]);
  for (const r of [rates, bookies, auditor, zookeeper]) if (r.error && r.error.status === 401) throw r.error;
  return { rates, bookies, auditor, ready, zookeeper };
}

function refused(h, error, what) {
  if (error.status === 403) return h("p", { class: "muted" }, `Your role may not see ${what} (superusers only).`);
  return h("p", { class: "state-bad" }, `✗ Cannot read ${what}: ${error.reason || error.message}`);
}

const pct = (usage) => (usage && usage.limit > 0 ? `${((100 * usage.usage) / usage.limit).toFixed(0)} %` : "–");

function brokersSection(ctx, rates) {
  const { h, table, fmt } = ctx;
  if (rates.error) return refused(h, rates.error, "the brokers");
  const rows = Object.entries(rates.value.brokers);
  return table([
    { label: "Broker", value: ([id]) => id },
    { label: "State", value: () => "✓ live" },
    { label: "CPU", num: true, value: ([, b]) => pct(b.cpu) },
    { label: "Memory", num: true, value: ([, b]) => pct(b.memory) },
    { label: "In", num: true, value: ([, b]) => fmt.rate(b.msgRateIn) },
    { label: "Out", num: true, value: ([, b]) => fmt.rate(b.msgRateOut) },
    { label: "Topics", num: true, value: ([, b]) => fmt.count(b.numTopics) },
    { label: "Bundles", num: true, value: ([, b]) => fmt.count(b.numBundles) },
    { label: "Producers", num: true, value: ([, b]) => fmt.count(b.numProducers) },
    { label: "Consumers", num: true, value: ([, b]) => fmt.count(b.numConsumers) },
  ], rows, { caption: "Live brokers, load measured in the last sample", empty: "No broker answered: none is live." });
}

function bookiesSection(ctx, bookies, auditor) {
  const { h, table, fmt } = ctx;
  if (bookies.error) return refused(h, bookies.error, "the bookies");
  const gone = auditor.value ? auditor.value.lostBookies.map((b) => ({ bookieId: b.bookieId, gone: b.goneForS })) : [];
  const rows = [...bookies.value, ...gone];
  const state = (b) => {
    if (b.gone !== undefined) return h("span", { class: "state-bad" }, `✗ gone ${fmt.age(b.gone * 1000)}`);
    if (!b.reachable) return h("span", { class: "state-bad" }, `✗ ${b.state}, not answering`);
    return b.state === "writable" ? h("span", { class: "state-good" }, "✓ writable")
      : h("span", { class: "state-warn" }, "! read-only");
  };
  const disk = (b) => (b.diskTotalBytes ? `${fmt.bytes(b.diskTotalBytes - b.diskFreeBytes)} of ${fmt.bytes(b.diskTotalBytes)}` : "–");
  return table([
    { label: "Bookie", value: (b) => b.bookieId },
    { label: "State", value: state },
    { label: "Disk used", num: true, value: disk },
    { label: "Ledgers", num: true, value: (b) => fmt.count(b.ledgers) },
    { label: "Version", value: (b) => b.version || "–" },
  ], rows, { empty: "No bookie is registered." });
}

function auditorSection(ctx, auditor) {
  const { h, table, fmt } = ctx;
  if (auditor.error) return refused(h, auditor.error, "the auditor");
  const a = auditor.value;
  const underReplicated = Number(a.underReplicatedCount || 0);
  return h("div", {},
    h("dl", { class: "facts" },
      h("dt", {}, "Leader"), h("dd", {}, a.leaderId || "none"),
      h("dt", {}, "Under-replicated ledgers"),
      h("dd", { class: underReplicated ? "state-warn" : "state-good" }, underReplicated ? `! ${fmt.count(underReplicated)}` : "✓ none"),
      h("dt", {}, "Replicated so far"), h("dd", {}, `${fmt.count(a.ledgersReplicated)} ledgers, ${fmt.count(a.entriesCopied)} entries`),
      h("dt", {}, "Last audit"), h("dd", {}, a.lastAudit && Number(a.lastAudit.finishedMs) > 0
        ? `${fmt.time(Number(a.lastAudit.finishedMs))}: ${fmt.count(a.lastAudit.ledgersChecked)} ledgers checked, ${fmt.count(a.lastAudit.ledgersMarked)} marked`
        : "none yet"),
      a.lastError ? [h("dt", {}, "Last error"), h("dd", { class: "state-bad" }, `✗ ${a.lastError}`)] : null),
    a.inProgress.length ? table([
      { label: "Ledger", value: (p) => p.ledgerId },
      { label: "From → to", value: (p) => `${p.missingBookie} → ${p.targetBookie || "?"}` },
      { label: "Progress", num: true, value: (p) => `${fmt.count(p.entriesCopied)} / ${fmt.count(p.entriesTotal)}` },
    ], a.inProgress, { caption: "Being re-replicated" }) : null,
    a.underReplicated.length ? table([
      { label: "Ledger", value: (l) => l.ledgerId },
      { label: "Missing bookies", value: (l) => l.missingBookies.join(", ") },
      { label: "Since", value: (l) => fmt.time(Number(l.markedAtMs)) },
      { label: "Replicating", value: (l) => l.lockedBy || "waiting" },
    ], a.underReplicated, { caption: "Under-replicated ledgers (first 20)" }) : null);
}

function zookeeperSection(ctx, ready, zookeeper) {
  const { h, table, fmt } = ctx;
  const body = ready.value || {};
  const up = ready.value ? body.zookeeper : false;
  const session = h("p", {}, up ? h("span", { class: "state-good" }, "✓ connected") : h("span", { class: "state-bad" }, "✗ no session"),
    " — the gateway's ZooKeeper session", ready.value ? `; ${body.brokers} broker(s) registered` : "");
  if (zookeeper.error) return h("div", {}, session, refused(h, zookeeper.error, "the ZooKeeper servers"));
  const state = (s) => (!s.reachable ? h("span", { class: "state-bad" }, "✗ unreachable")
    : s.error ? h("span", { class: "state-warn" }, "? state hidden") : h("span", { class: "state-good" }, `✓ ${s.mode || "serving"}`));
  const latency = (s) => (s.latencyMs ? `${s.latencyMs.avg} / ${s.latencyMs.max} ms` : "–");
  return h("div", {}, session, table([
    { label: "Server", value: (s) => s.address },
    { label: "State", value: state },
    { label: "Version", value: (s) => s.version || s.error || "–" },
    { label: "Latency avg / max", num: true, value: latency },
    { label: "Connections", num: true, value: (s) => fmt.count(s.connections) },
    { label: "Outstanding", num: true, value: (s) => fmt.count(s.outstanding) },
    { label: "Znodes", num: true, value: (s) => fmt.count(s.nodeCount) },
  ], zookeeper.value.servers, { caption: `Servers of the connect string (metadata root ${zookeeper.value.root})` }));
}

function ratesSection(ctx, rates) {
  const { h, fmt } = ctx;
  if (rates.error) return refused(h, rates.error, "the cluster's rates");
  const { samples, windowSeconds } = rates.value;
  const now = Date.now();
  const from = now - windowSeconds * 1000;
  const pick = (name) => samples.map((s) => [s.timestamp, s[name]]);
  return h("div", { class: "charts" },
    lineChart({ title: "Messages per second", fromMs: from, toMs: now, format: (v) => fmt.rate(v),
      series: [{ label: "in", points: pick("msgRateIn") }, { label: "out", points: pick("msgRateOut") }] }),
    lineChart({ title: "Bytes per second", fromMs: from, toMs: now, format: (v) => `${fmt.bytes(v)}/s`,
      series: [{ label: "in", points: pick("msgThroughputIn") }, { label: "out", points: pick("msgThroughputOut") }] }),
    h("p", { class: "muted" }, `${samples.length} samples, one every ${rates.value.intervalSeconds} s, kept by the gateway for ${windowSeconds / 60} minutes.`));
}

export async function render(view, _params, ctx) {
  const { h } = ctx;
  const sections = {
    rates: h("section", { "aria-labelledby": "h-rates" }),
    brokers: h("section", { "aria-labelledby": "h-brokers" }),
    bookies: h("section", { "aria-labelledby": "h-bookies" }),
    auditor: h("section", { "aria-labelledby": "h-auditor" }),
    zookeeper: h("section", { "aria-labelledby": "h-zookeeper" }),
  };
  const fill = (data) => {
    sections.rates.replaceChildren(h("h2", { id: "h-rates" }, "Cluster message rates, last 15 minutes"), ratesSection(ctx, data.rates));
    sections.brokers.replaceChildren(h("h2", { id: "h-brokers" }, "Brokers"), brokersSection(ctx, data.rates));
    sections.bookies.replaceChildren(h("h2", { id: "h-bookies" }, "Bookies"), bookiesSection(ctx, data.bookies, data.auditor));
    sections.auditor.replaceChildren(h("h2", { id: "h-auditor" }, "Auditor"), auditorSection(ctx, data.auditor));
    sections.zookeeper.replaceChildren(h("h2", { id: "h-zookeeper" }, "ZooKeeper"), zookeeperSection(ctx, data.ready, data.zookeeper));
  };
  fill(await load(ctx));
  ctx.every(REFRESH_MS, async () => fill(await load(ctx)));
  view.append(h("h1", {}, "Overview"), ...Object.values(sections));
}
