// Hash links between the console's pages (one place that spells them).
const enc = encodeURIComponent;

// "persistent://t/ns/x" -> {domain, tenant, namespace, topic}
export function parseTopic(full) {
  const m = /^([a-z-]+):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(full);
  return m ? { domain: m[1], tenant: m[2], namespace: m[3], topic: m[4] } : null;
}

export const href = {
  tenant: (t) => `#/tenants/${enc(t)}`,
  namespace: (t, ns) => `#/namespaces/${enc(t)}/${enc(ns)}`,
  topic: (domain, t, ns, topic) => `#/topics/${enc(domain)}/${enc(t)}/${enc(ns)}/${enc(topic)}`,
  topicOf(full) {
    const p = parseTopic(full);
    return p ? href.topic(p.domain, p.tenant, p.namespace, p.topic) : "#/";
  },
  newSubscription: (domain, t, ns, topic) => `#/new-subscription/${enc(domain)}/${enc(t)}/${enc(ns)}/${enc(topic)}`,
  subscription: (domain, t, ns, topic, sub) => `#/subscriptions/${enc(domain)}/${enc(t)}/${enc(ns)}/${enc(topic)}/${enc(sub)}`,
};
