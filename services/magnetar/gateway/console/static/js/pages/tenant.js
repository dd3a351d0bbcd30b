// A tenant: its admin roles, allowed clusters and namespaces.
import { href } from "../links.js";

export const routes = ["/tenants/:tenant"];
export const title = (p) => `Tenant ${p.tenant}`;

export async function render(view, { tenant }, ctx) {
  const { h, table, api, paths } = ctx;
  const [info, namespaces] = await Promise.all([
    api(paths.tenant(tenant)).catch((err) => ({ error: err })),
    api(`/admin/v2/namespaces/${encodeURIComponent(tenant)}`),
  ]);
  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/tenants" }, "Tenants"), " / ", tenant),
    h("h1", {}, `Tenant ${tenant}`),
    info.error ? h("p", { class: "muted" }, `Its admin roles: not shown (${info.error.reason}).`)
      : h("dl", { class: "facts" },
        h("dt", {}, "Admin roles"), h("dd", {}, info.adminRoles.length ? info.adminRoles.join(", ") : "none (superusers only)"),
        h("dt", {}, "Allowed clusters"), h("dd", {}, info.allowedClusters.join(", ") || "none")),
    h("h2", {}, "Namespaces"),
    table([
      { label: "Namespace", value: (ns) => h("a", { href: href.namespace(...ns.split("/")) }, ns) },
    ], namespaces, { empty: "No namespace yet." }));
}
