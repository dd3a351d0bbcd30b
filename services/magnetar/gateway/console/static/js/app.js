// The console's shell: the navigation, the hash router, sign-in, and the context every page
// gets. A page is a module in pages/ exporting
//   routes: ["/namespaces/:tenant/:namespace", ...]   (hash paths; ":name" captures)
//   title: "Namespace"                                 (or title(params))
//   render(view, params, ctx)                          (fills `view`; may return a cleanup)
// ctx = {api, paths, session, h, table, fmt, notify, confirmDialog, navigate(hash),
//        report(err) (an error shown as the shell shows them),
//        every(ms, fn) (repeated while the page is shown; stopped on navigation)}.
// Once a page's first view is in the document the shell marks it with
// performance.mark("console:rendered:<hash path>").
// Pages are listed in PAGES below; the first route of a page marked `nav` is in the menu.

import { api, ApiError, paths, session } from "./api.js";
import { confirmDialog, fmt, h, notify, table } from "./ui.js";
import * as signin from "./pages/signin.js";
import * as overview from "./pages/overview.js";
import * as tenants from "./pages/tenants.js";
import * as tenant from "./pages/tenant.js";
import * as namespace from "./pages/namespace.js";
import * as topic from "./pages/topic.js";
import * as subscription from "./pages/subscription.js";
import * as deadletters from "./pages/deadletters.js";
import * as produce from "./pages/produce.js";

const PAGES = [overview, tenants, tenant, namespace, topic, subscription, deadletters, produce, signin];

const compiled = [];
for (const page of PAGES) {
  for (const route of page.routes) {
    const names = [];
    const pattern = route.replace(/:(\w+)/g, (_, n) => { names.push(n); return "([^/]+)"; });
    compiled.push({ page, regex: new RegExp(`^${pattern}/?$`), names });
  }
}

function match(path) {
  for (const { page, regex, names } of compiled) {
    const m = regex.exec(path);
    if (m) return { page, params: Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1])])) };
  }
  return null;
}

function renderNav(current) {
  const nav = document.getElementById("nav");
  nav.replaceChildren(...PAGES.filter((p) => p.nav).map((p) => {
    const href = `#${p.routes[0]}`;
    return h("a", { href, "aria-current": current === p ? "page" : null }, p.nav);
  }));
  const who = document.getElementById("who");
  who.replaceChildren(...(session.token
    ? [session.role ? `${session.role} ` : "", h("button", { type: "button", onclick: () => { session.signOut(); navigate("/signin"); } }, "Sign out")]
    : [h("a", { href: "#/signin" }, "Sign in")]));
}

let cleanups = [];
let carried = null; // a notice for the next page (set before a redirect to sign in)
let generation = 0;

function stopPage() {
  for (const fn of cleanups) { try { fn(); } catch (_) { /* a page's cleanup failing stops nothing else */ } }
  cleanups = [];
}

export function navigate(path) {
  if (location.hash === `#${path}`) route(); else location.hash = `#${path}`;
}

async function route() {
  stopPage();
  const mine = ++generation;
  const path = location.hash.replace(/^#/, "") || "/";
  const found = match(path) || { page: null, params: {} };
  const view = document.getElementById("view");
  notify(carried ? carried.text : "", carried ? carried.options : undefined);
  carried = null;
  renderNav(found.page);
  if (!found.page) { view.replaceChildren(h("h1", {}, "Not found"), h("p", {}, `No page at ${path}.`)); return; }
  const { page, params } = found;
  document.title = `${typeof page.title === "function" ? page.title(params) : page.title} · Magnetar console`;
  const ctx = {
    api, paths, session, h, table, fmt, notify, confirmDialog, navigate, report,
    every(ms, fn) {
      let timer = null;
      const tick = async () => {
        if (mine !== generation) return;
        try { await fn(); } catch (err) { report(err); }
        if (mine === generation) timer = setTimeout(tick, ms);
      };
      timer = setTimeout(tick, ms);
      cleanups.push(() => clearTimeout(timer));
    },
  };
  view.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const container = h("div");
    const cleanup = await page.render(container, params, ctx);
    if (mine !== generation) { if (typeof cleanup === "function") cleanup(); return; }
    if (typeof cleanup === "function") cleanups.push(cleanup);
    view.replaceChildren(container);
    view.focus({ preventScroll: true });
    // When the page's first view is in the document (browser tests time pages by it).
    performance.mark(`console:rendered:${path}`);
  } catch (err) {
    if (mine === generation) { view.replaceChildren(h("h1", {}, "Could not load this page")); report(err); }
  }
}

// Errors the API gave: 401 asks for a token; anything else is shown with the API's reason.
export function report(err) {
  if (err instanceof ApiError && err.status === 401) {
    const text = session.token ? `Your token was refused (${err.reason}): sign in again.` : "Sign in with a token to use the console.";
    if (!location.hash.startsWith("#/signin")) {
      carried = { text, options: { error: true } };
      location.hash = "#/signin";
    } else {
      notify(text, { error: true });
    }
    return;
  }
  notify(err instanceof ApiError ? `${err.reason} (HTTP ${err.status}, ${err.path})` : String(err.message || err), { error: true });
}

window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (e) => report(e.reason));
route();
