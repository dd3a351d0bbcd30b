// What the signed-in role may do, asked of the gateway (GET /admin/v2/whoami, docs/console-operations.md)
// before a page offers an action. It is advice: the brokers decide every call again, so a
// button shown wrongly is still refused (403) and its reason shown.
//
//   const may = await permissions(ctx.api, {topic, subscription});
//   if (may.can("PersistentTopics_resetCursor")) ...   (operationIds of the gateway's OpenAPI)

export async function permissions(api, { topic, subscription, namespace } = {}) {
  const who = await api("/admin/v2/whoami", { query: { topic, subscription, namespace } });
  return {
    role: who.role,
    superuser: who.superuser,
    operations: who.operations,
    can(operation) { return who.operations[operation] === true; },
  };
}

// A topic's full name from "persistent://t/ns/x", "t/ns/x" or the parts of a console route.
export function topicName({ domain = "persistent", tenant, namespace, topic }) {
  return `${domain}://${tenant}/${namespace}/${topic}`;
}

// "persistent://t/ns/x" (or "t/ns/x") -> {domain, tenant, namespace, topic}; null when it is not one.
export function parseTopic(text) {
  const m = /^(?:(persistent|non-persistent):\/\/)?([^/\s]+)\/([^/\s]+)\/([^/]+)$/.exec(String(text).trim());
  return m ? { domain: m[1] || "persistent", tenant: m[2], namespace: m[3], topic: m[4] } : null;
}
