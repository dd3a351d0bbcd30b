// Sign in: the token is kept in this tab's sessionStorage and sent as
// "Authorization: Bearer <token>" with every API call; the gateway decides what it allows.
export const routes = ["/signin"];
export const title = "Sign in";

export async function render(view, _params, ctx) {
  const { h } = ctx;
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, size: 60 });
  const form = h("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    ctx.session.signIn(input.value);
    try {
      await ctx.api("/admin/v2/clusters");
      ctx.navigate("/");
    } catch (err) {
      ctx.session.signOut();
      ctx.notify(err.status === 401 ? `That token was refused: ${err.reason}` : `Cannot check the token: ${err.message}`, { error: true });
    }
  } },
  h("label", { for: "token" }, "Token", input),
  h("button", { class: "primary", type: "submit" }, "Sign in"));
  view.append(h("h1", {}, "Sign in"),
    h("p", {}, "With authentication on, the console acts with your token's role: create one with ",
      h("code", {}, "magnetar tokens create --subject <role> --secret-key <file>"), "."),
    form);
}
