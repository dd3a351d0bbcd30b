"""Sign-in with authentication on: a token is taken and the console acts with it; a bad
token is refused with the API's reason, and nothing is kept."""

from __future__ import annotations

from magnetar.common import tokens
from magnetar.testing.console import ConsoleBrowser, Standalone


def test_signed_out_the_console_asks_for_a_token(browser: ConsoleBrowser):
    browser.open("/")
    browser.wait(lambda: browser.js("return location.hash") == "#/signin", what="the sign-in page")
    assert "Sign in with a token" in browser.wait(lambda: browser.notice())
    browser.screenshot("signin")


def test_a_valid_token_signs_in_and_shows_the_role(browser: ConsoleBrowser, console: Standalone):
    browser.sign_in(console.admin_token)
    assert browser.wait_text("admin", "#who").text.startswith("admin")
    assert browser.js("return sessionStorage.getItem('magnetar.console.token')") == console.admin_token


def test_a_bad_token_gets_a_readable_error_and_is_not_kept(browser: ConsoleBrowser, console: Standalone):
    foreign = tokens.create_token("admin", tokens.generate_secret_key())
    for token, reason in (("not-a-jwt", "malformed"), (foreign, "does not verify")):
        browser.open("/signin")
        field = browser.wait_css("#token")
        field.clear()
        field.send_keys(token)
        browser.wait_css("form button[type=submit]").click()
        message = browser.wait(lambda: browser.notice())
        assert "refused" in message and reason in message, message
        assert browser.js("return sessionStorage.getItem('magnetar.console.token')") is None
        assert browser.js("return location.hash") == "#/signin"


def test_a_role_that_is_no_superuser_is_told_what_it_may_not_see(browser: ConsoleBrowser, console: Standalone):
    browser.sign_in(console.token_for("reader"))
    browser.wait_text("reader", "#who")
    browser.wait_text("Your role may not see the bookies (superusers only).", "#view")
    browser.wait_text("Your role may not see the cluster's rates (superusers only).", "#view")
    browser.go("/tenants")
    browser.wait_text("Your role may not list the tenants (superusers only).", "#view")
    assert browser.css("#open-namespace")
