// The console's one way to the cluster: the gateway's REST API (the same paths curl uses,
// docs/gateway.md), with the token the operator signed in with. Nothing else talks to the
// server.

const TOKEN_KEY = "magnetar.console.token";

export class ApiError extends Error {
  constructor(status, reason, path) {
    super(`${reason} (HTTP ${status})`);
    this.status = status;
    this.reason = reason;
    this.path = path;
  }
}

export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  signIn(token) { sessionStorage.setItem(TOKEN_KEY, token.trim()); },
  signOut() { sessionStorage.removeItem(TOKEN_KEY); },
  // The role the token names (its "sub" claim), read without verifying it: for showing
  // who is signed in only; the gateway verifies the token on every call.
  get role() {
    const token = this.token;
    if (!token) return null;
    try {
      const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4))).sub || null;
    } catch (_) { return null; }
  },
};

// api(path, {method, query, body, text}) -> parsed JSON (or text, or null for 204).
// A non-2xx answer throws ApiError with the API's own `reason`.
export async function api(path, { method = "GET", query, body, text = false, headers = {} } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null) url.searchParams.set(k, v);
  const h = { Accept: "application/json", ...headers };
  if (session.token) h.Authorization = `Bearer ${session.token}`;
  let payload;
  if (body !== undefined) {
    if (typeof body === "string" || body instanceof Blob || body instanceof ArrayBuffer) payload = body;
    else { payload = JSON.stringify(body); h["Content-Type"] = "application/json"; }
  }
  const res = await fetch(url, { method, headers: h, body: payload });
  if (!res.ok) {
    let reason = res.statusText || "request failed";
    try { const j = await res.json(); reason = j.reason || j.detail || reason; } catch (_) { /* not JSON */ }
    throw new ApiError(res.status, typeof reason === "string" ? reason : JSON.stringify(reason), path);
  }
  if (res.status === 204) return null;
  if (text) return res.text();
  const type = res.headers.get("content-type") || "";
  if (type.includes("json")) return res.json();
  return res.text();
}

const enc = encodeURIComponent;

// REST paths of the things the pages show (Pulsar's admin v2 layout).
export const paths = {
  tenant: (t) => `/admin/v2/tenants/${enc(t)}`,
  namespace: (t, ns) => `/admin/v2/namespaces/${enc(t)}/${enc(ns)}`,
  topic: (domain, t, ns, topic) => `/admin/v2/${enc(domain)}/${enc(t)}/${enc(ns)}/${enc(topic)}`,
};
