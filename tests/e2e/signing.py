"""Signed webhook requests, made by the providers' own libraries: stripe
(generate_signature_header), @octokit/webhooks-methods (sign), slack_sdk
(SignatureVerifier.generate_signature), standardwebhooks and svix
(Webhook.sign). Shopify publishes no signing library in the registries this
project installs from; its HMAC (base64 of HMAC-SHA256 of the body) is made
with Python's hmac, as Shopify's documentation gives it. Every accepted
request is also checked with the library's own verifier where one exists.

RECIPES name each case once: the case table tests/cases/verify.json is built
from them at a fixed time (`python3 signing.py --bless`), and the Envoy suite
builds them again at the current time, so the same cases run natively and
through Envoy.
"""

import base64
import datetime
import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOW = 1_700_000_000
TOL = 300

SECRETS = {
    "STRIPE_WHSEC": "whsec_test_stripe_acme_2024",
    "STRIPE_WHSEC_OLD": "whsec_test_stripe_acme_2023",
    "GITHUB_SECRET": "It's a Secret to Everybody",
    "SHOPIFY_SECRET": "shpss_0123456789abcdef",
    "SLACK_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
    "SW_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "SVIX_SECRET": "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
}
WRONG = {"stripe": "whsec_wrong", "github": "wrong", "shopify": "wrong", "slack": "wrong",
         "sw": "whsec_d3Jvbmcgc2VjcmV0", "svix": "whsec_d3Jvbmcgc2VjcmV0", "custom": "wrong"}

def env(*names):
    return [{"env": n} for n in names]

CONFIG = {
    "max_json_bytes": 2048, "max_held_bytes": 3 * 2048 * 64,
    "sources": [
        {"id": "stripe", "dedupe": "stripe", "verify": {"scheme": "stripe", "secrets": env("STRIPE_WHSEC", "STRIPE_WHSEC_OLD")},
         "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
        {"id": "stripe_flag", "dedupe": "stripe", "verify": {"scheme": "stripe", "secrets": env("STRIPE_WHSEC"), "on_failure": "flag"},
         "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
        {"id": "github", "dedupe": "github", "verify": {"scheme": "github", "secrets": env("GITHUB_SECRET")}},
        {"id": "shopify", "dedupe": "shopify", "verify": {"scheme": "shopify", "secrets": env("SHOPIFY_SECRET")}},
        {"id": "slack", "dedupe": {"json": "event_id"}, "verify": {"scheme": "slack", "secrets": env("SLACK_SECRET")}},
        {"id": "sw", "dedupe": "standard_webhooks", "verify": {"scheme": "standard_webhooks", "secrets": env("SW_SECRET")}},
        {"id": "svix", "dedupe": "svix", "verify": {"scheme": "svix", "secrets": env("SVIX_SECRET")}},
        {"id": "custom", "dedupe": {"header": "x-event-id"}, "verify": {"scheme": {
            "header": "x-signature", "prefix": "sha512=", "encoding": "base64", "algorithm": "sha512",
            "timestamp_header": "x-timestamp", "signed": "{timestamp}:{header:x-event-id}:{body}"},
            "secrets": [{"value": "custom-inline-secret"}]}},
    ]}

SECRET_OF = {"stripe": "STRIPE_WHSEC", "stripe_flag": "STRIPE_WHSEC", "github": "GITHUB_SECRET",
             "shopify": "SHOPIFY_SECRET", "slack": "SLACK_SECRET", "sw": "SW_SECRET", "svix": "SVIX_SECRET"}


def body_for(source, n=1, size=None):
    if source.startswith("stripe"):
        b = {"id": f"evt_{n}", "type": "invoice.paid", "data": {"object": {"customer": f"cus_{n}"}}}
    elif source == "slack":
        b = {"type": "event_callback", "event_id": f"Ev{n}", "event": {"type": "app_mention"}}
    else:
        b = {"action": "opened", "number": n}
    text = json.dumps(b, separators=(",", ":"))
    if size:
        text = text[:-1] + ',"pad":"' + "x" * (size - len(text) - 9) + '"}'
    return text


def octokit_sign(secret, payloads):
    """@octokit/webhooks-methods sign(), one node process for all."""
    script = ("import('@octokit/webhooks-methods').then(async m => {"
              "const [s, ps] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "const out = []; for (const p of ps) out.push(await m.sign(s, p));"
              "console.log(JSON.stringify(out)); })")
    r = subprocess.run(["node", "-e", script], input=json.dumps([secret, payloads]), cwd=HERE,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def octokit_verify(secret, payload, signature):
    script = ("import('@octokit/webhooks-methods').then(async m => {"
              "const [s, p, g] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(await m.verify(s, p, g))); })")
    r = subprocess.run(["node", "-e", script], input=json.dumps([secret, payload, signature]), cwd=HERE,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def sign(source, body, ts, secret_name=None, secret=None):
    """The provider's headers for `body` at `ts`, signed with the named
    secret (or a raw one)."""
    import stripe
    import standardwebhooks
    import svix.webhooks
    from slack_sdk.signature import SignatureVerifier
    secret = secret or SECRETS[secret_name or SECRET_OF.get(source, "")] if source != "custom" else (secret or "custom-inline-secret")
    when = datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc)
    if source.startswith("stripe"):
        return [["Stripe-Signature", stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=ts)]]
    if source == "github":
        return [["X-Hub-Signature-256", octokit_sign(secret, [body])[0]], ["X-GitHub-Delivery", "d-" + hashlib.sha1(body.encode()).hexdigest()[:8]]]
    if source == "shopify":
        mac = base64.b64encode(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()).decode()
        return [["X-Shopify-Hmac-Sha256", mac], ["X-Shopify-Webhook-Id", "w-" + hashlib.sha1(body.encode()).hexdigest()[:8]]]
    if source == "slack":
        sig = SignatureVerifier(signing_secret=secret).generate_signature(timestamp=str(ts), body=body)
        return [["X-Slack-Signature", sig], ["X-Slack-Request-Timestamp", str(ts)]]
    if source in ("sw", "svix"):
        mid = "msg_" + hashlib.sha1(body.encode()).hexdigest()[:10]
        if source == "sw":
            sig = standardwebhooks.Webhook(secret).sign(mid, when, body)
            return [["webhook-id", mid], ["webhook-timestamp", str(ts)], ["webhook-signature", sig]]
        sig = svix.webhooks.Webhook(secret).sign(mid, when, body)
        return [["svix-id", mid], ["svix-timestamp", str(ts)], ["svix-signature", sig]]
    eid = "e-" + hashlib.sha1(body.encode()).hexdigest()[:6]
    mac = hmac.new(secret.encode(), f"{ts}:{eid}:{body}".encode(), hashlib.sha512).digest()
    return [["x-signature", "sha512=" + base64.b64encode(mac).decode()], ["x-timestamp", str(ts)], ["x-event-id", eid]]


def library_accepts(source, body, headers, now):
    """The provider library's own verdict on a request (None: no verifier)."""
    import stripe
    import standardwebhooks
    import svix.webhooks
    from slack_sdk.signature import SignatureVerifier
    h = {k.lower(): v for k, v in headers}
    try:
        if source.startswith("stripe"):
            secrets = [SECRETS["STRIPE_WHSEC"]] + ([SECRETS["STRIPE_WHSEC_OLD"]] if source == "stripe" else [])
            for s in secrets:
                try:
                    import unittest.mock
                    with unittest.mock.patch("time.time", return_value=now):
                        stripe.WebhookSignature.verify_header(body, h.get("stripe-signature", ""), s, tolerance=TOL)
                    return True
                except Exception:
                    continue
            return False
        if source == "github":
            return "x-hub-signature-256" in h and octokit_verify(SECRETS["GITHUB_SECRET"], body, h["x-hub-signature-256"])
        if source == "slack":
            v = SignatureVerifier(signing_secret=SECRETS["SLACK_SECRET"], clock=type("C", (), {"now": lambda self: now})())
            return v.is_valid(body=body, timestamp=h.get("x-slack-request-timestamp", ""), signature=h.get("x-slack-signature", ""))
        if source in ("sw", "svix"):
            import unittest.mock
            w = (standardwebhooks.Webhook(SECRETS["SW_SECRET"]) if source == "sw"
                 else svix.webhooks.Webhook(SECRETS["SVIX_SECRET"]))
            fixed = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
            # Svix's Webhook hands the check to a Standard Webhooks one.
            inner = getattr(w, "_inner", w)
            mod = sys.modules[type(inner).__module__]
            with unittest.mock.patch.object(mod, "datetime", wraps=datetime.datetime) as d:
                d.now = lambda tz=None: fixed
                w.verify(body, h)
            return True
    except Exception:
        return False
    return None


# (name, source, how) — how: valid | rotated | wrong_secret | tampered_body |
# tampered_timestamp | expired | future | edge_past | edge_future | missing |
# malformed | several | over_limit
RECIPES = []
for src in ("stripe", "github", "shopify", "slack", "sw", "svix", "custom"):
    hows = ["valid", "wrong_secret", "tampered_body", "missing", "malformed"]
    if src in ("stripe", "slack", "sw", "svix", "custom"):
        hows += ["tampered_timestamp", "expired", "future", "edge_past", "edge_future"]
    if src in ("stripe", "sw", "svix"):
        hows += ["several"]
    if src == "stripe":
        hows += ["rotated", "over_limit"]
    RECIPES += [(f"{src}: {h}", src, h) for h in hows]
RECIPES += [("stripe_flag: valid", "stripe_flag", "valid"), ("stripe_flag: tampered_body", "stripe_flag", "tampered_body"),
            ("stripe_flag: missing", "stripe_flag", "missing"), ("stripe_flag: over_limit", "stripe_flag", "over_limit")]

ACCEPTED = {"valid", "rotated", "edge_past", "edge_future", "several"}


def build(source, how, now, n=1, margin=0):
    """(request, library verdict) for one recipe at time `now`; `margin`
    seconds keep the tolerance edges clear of a clock that moves on while
    the request travels (a live run)."""
    body = body_for(source, n, size=3000 if how == "over_limit" else None)
    ts = {"expired": now - TOL - 1 - margin, "future": now + TOL + 1 + margin,
          "edge_past": now - TOL + margin, "edge_future": now + TOL - margin}.get(how, now)
    if how == "wrong_secret":
        headers = sign(source, body, ts, secret=WRONG[source])
    elif how == "rotated":
        headers = sign(source, body, ts, secret_name="STRIPE_WHSEC_OLD")
    else:
        headers = sign(source, body, ts)
    if how == "tampered_body":
        # One byte of a value no key reads: the body stays valid JSON.
        for word in ("invoice.paid", "opened", "app_mention"):
            body = body.replace(word, word[:-1] + word[-1].upper(), 1)
    if how == "tampered_timestamp":
        headers = [[k, v.replace(str(ts), str(ts - 1))] for k, v in headers]
    if how == "missing":
        sig_names = {"stripe-signature", "x-hub-signature-256", "x-shopify-hmac-sha256", "x-slack-signature",
                     "webhook-signature", "svix-signature", "x-signature"}
        headers = [[k, v] for k, v in headers if k.lower() not in sig_names]
    if how == "malformed":
        headers = [[k, "v1=zz" if k.lower() == "stripe-signature" else
                    ("sha256=xyz" if k.lower() == "x-hub-signature-256" else
                     ("!!not base64" if k.lower() in ("x-shopify-hmac-sha256",) else
                      ("v0=nothex" if k.lower() == "x-slack-signature" else
                       ("v2,abc" if k.lower() in ("webhook-signature", "svix-signature") else
                        ("md5=abc" if k.lower() == "x-signature" else v)))))] for k, v in headers]
    if how == "several":
        wrong = sign(source, body, ts, secret=WRONG[source])
        def merged(k, v):
            other = dict((a.lower(), b) for a, b in wrong).get(k.lower())
            if k.lower() == "stripe-signature":
                return other + "," + v.split(",", 1)[1]
            if k.lower() in ("webhook-signature", "svix-signature"):
                return other + " " + v
            return v
        headers = [[k, merged(k, v)] for k, v in headers]
    req = {"path": f"/webhooks/{source}", "headers": headers, "body": body}
    return req, library_accepts(source, body, headers, now)


def expect(source, how):
    flag = source == "stripe_flag"
    if how in ACCEPTED:
        stamps = {"x-hookstamp-verified": "true"}
        if source.startswith("stripe"):
            stamps["x-hookstamp-dedupe-key"] = "evt_1"
        return {"action": "forward", "stamps": stamps}
    if flag:
        return {"action": "forward", "stamps": {"x-hookstamp-verified": "false", "x-hookstamp-dedupe-key": None,
                                                "x-hookstamp-idempotency-key": None,
                                                # An unverified hook takes the keyless lane.
                                                "x-hookstamp-lane-0-key": None}}
    return {"action": "reject", "status": 413 if how == "over_limit" else 401}


def cases(now, margin=0):
    out = []
    for name, src, how in RECIPES:
        req, lib = build(src, how, now, margin=margin)
        want = expect(src, how)
        # Stripe's library bounds a timestamp's age only; hookstamp bounds
        # the future too ("within tolerance").
        lenient = src.startswith("stripe") and how == "future"
        if lib is not None and how != "over_limit" and not lenient:
            assert lib == (how in ACCEPTED), f"{name}: the provider's library says {lib}"
        out.append({"name": name, "request": req, "expect": want})
    return out


def bless():
    table = {"about": "signatures made by the providers' own libraries (tests/e2e/signing.py), at a fixed time",
             "now": NOW, "env": SECRETS, "config": CONFIG, "cases": cases(NOW)}
    lines = ["{", f'  "about": {json.dumps(table["about"])},', f'  "now": {NOW},',
             '  "env": ' + json.dumps(SECRETS, indent=2).replace("\n", "\n  ") + ",",
             '  "config": ' + json.dumps(CONFIG, indent=2).replace("\n", "\n  ") + ",", '  "cases": [',
             ",\n".join("    " + json.dumps(c) for c in table["cases"]), "  ]", "}"]
    (HERE.parent / "cases" / "verify.json").write_text("\n".join(lines) + "\n")


if __name__ == "__main__" and "--bless" in sys.argv:
    bless()
