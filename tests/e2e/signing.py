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


# ---------------------------------------------------------------------------
# More schemes: Ed25519 (Standard Webhooks' v1a and Svix, Discord, a custom
# ed25519 template), Twilio (RequestValidator), and custom templates that
# sign the URL (Square, HubSpot v3). Their table is tests/cases/schemes.json
# (`python3 signing.py --bless-schemes`), made again at the current time by
# the Envoy suite like the one above.

PUBLIC_URL = "https://hooks.example.com"


def _seed(name):
    return hashlib.sha256(b"hookstamp test key " + name.encode()).digest()


def ed_private(name):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    return Ed25519PrivateKey.from_private_bytes(_seed(name))


def ed_public(name):
    from cryptography.hazmat.primitives import serialization
    return ed_private(name).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def nacl_signing(name):
    import nacl.signing
    return nacl.signing.SigningKey(_seed(name))


SCHEME_SECRETS = {
    # Standard Webhooks' asymmetric keys: whpk_ + base64 of the public key.
    "SCH_SW_PK": "whpk_" + base64.b64encode(ed_public("sw new")).decode(),
    "SCH_SW_PK_OLD": "whpk_" + base64.b64encode(ed_public("sw old")).decode(),
    "SCH_SW_SECRET": "whsec_" + base64.b64encode(b"hookstamp mixed hmac secret 24b").decode(),
    "SCH_SVIX_PK": "whpk_" + base64.b64encode(ed_public("svix")).decode(),
    "SCH_SVIX_PK_OLD": "whpk_" + base64.b64encode(ed_public("svix old")).decode(),
    # Discord: the application's public key, hex.
    "SCH_DISCORD_PK": ed_public("discord new").hex(),
    "SCH_DISCORD_PK_OLD": ed_public("discord old").hex(),
    "SCH_TWILIO_TOKEN": "12345678901234567890123456789012",
    "SCH_TWILIO_TOKEN_OLD": "abcdefabcdefabcdefabcdefabcdefab",
    "SCH_SQUARE_KEY": "square-signature-key-0123",
    "SCH_SQUARE_KEY_OLD": "square-signature-key-old",
    "SCH_HUBSPOT_SECRET": "hubspot-client-secret-0123",
    "SCH_HUBSPOT_SECRET_OLD": "hubspot-client-secret-old",
    "SCH_CUSTOM_ED_PK": base64.b64encode(ed_public("custom ed")).decode(),
    "SCH_CUSTOM_ED_PK_OLD": base64.b64encode(ed_public("custom ed old")).decode(),
}
# The key each source's valid requests are signed with, its rotated one
# (the second of its list), and a wrong one.
SCHEME_KEYS = {
    "sw_ed": ("sw new", "sw old", "sw wrong"),
    "sw_mixed": ("sw new", None, "sw wrong"),
    "svix_ed": ("svix", "svix old", "svix wrong"),
    "discord": ("discord new", "discord old", "discord wrong"),
    "twilio": ("SCH_TWILIO_TOKEN", "SCH_TWILIO_TOKEN_OLD", "wrong-token"),
    "twilio_json": ("SCH_TWILIO_TOKEN", "SCH_TWILIO_TOKEN_OLD", "wrong-token"),
    "square": ("SCH_SQUARE_KEY", "SCH_SQUARE_KEY_OLD", "wrong-key"),
    "hubspot": ("SCH_HUBSPOT_SECRET", "SCH_HUBSPOT_SECRET_OLD", "wrong-secret"),
    "custom_ed": ("custom ed", "custom ed old", "custom ed wrong"),
}

SCHEME_CONFIG = {
    "max_json_bytes": 2048, "max_held_bytes": 3 * 2048 * 64,
    "sources": [
        {"id": "sw_ed", "dedupe": "standard_webhooks",
         "verify": {"scheme": "standard_webhooks", "secrets": env("SCH_SW_PK", "SCH_SW_PK_OLD")}},
        {"id": "sw_mixed", "dedupe": "standard_webhooks",
         "verify": {"scheme": "standard_webhooks", "secrets": env("SCH_SW_SECRET", "SCH_SW_PK")}},
        {"id": "svix_ed", "dedupe": "svix", "verify": {"scheme": "svix", "secrets": env("SCH_SVIX_PK", "SCH_SVIX_PK_OLD")}},
        {"id": "discord", "dedupe": {"json": "id"},
         "verify": {"scheme": "discord", "secrets": env("SCH_DISCORD_PK", "SCH_DISCORD_PK_OLD")}},
        {"id": "twilio", "dedupe": {"form": "MessageSid"},
         "verify": {"scheme": "twilio", "public_url": PUBLIC_URL,
                    "secrets": env("SCH_TWILIO_TOKEN", "SCH_TWILIO_TOKEN_OLD")}},
        {"id": "twilio_json", "dedupe": {"json": "sid"},
         "verify": {"scheme": "twilio", "public_url": PUBLIC_URL,
                    "secrets": env("SCH_TWILIO_TOKEN", "SCH_TWILIO_TOKEN_OLD")}},
        {"id": "square", "dedupe": {"json": "event_id"},
         "verify": {"scheme": {"header": "x-square-hmacsha256-signature", "encoding": "base64",
                               "signed": "{url}{body}"},
                    "public_url": PUBLIC_URL, "secrets": env("SCH_SQUARE_KEY", "SCH_SQUARE_KEY_OLD")}},
        {"id": "hubspot", "dedupe": {"sha256": "body"},
         "verify": {"scheme": {"header": "x-hubspot-signature-v3", "encoding": "base64",
                               "timestamp_header": "x-hubspot-request-timestamp", "timestamp_unit": "ms",
                               "signed": "{method}{url}{body}{timestamp}"},
                    "public_url": PUBLIC_URL, "secrets": env("SCH_HUBSPOT_SECRET", "SCH_HUBSPOT_SECRET_OLD")}},
        {"id": "custom_ed", "dedupe": {"header": "x-event-id"},
         "verify": {"scheme": {"header": "x-signature", "prefix": "ed25519=", "encoding": "base64",
                               "algorithm": "ed25519", "timestamp_header": "x-timestamp",
                               "signed": "{timestamp}.{header:x-event-id}.{body}"},
                    "secrets": env("SCH_CUSTOM_ED_PK", "SCH_CUSTOM_ED_PK_OLD")}},
    ]}

SIG_HEADERS = {"sw_ed": "webhook-signature", "sw_mixed": "webhook-signature", "svix_ed": "svix-signature",
               "discord": "x-signature-ed25519", "twilio": "x-twilio-signature", "twilio_json": "x-twilio-signature",
               "square": "x-square-hmacsha256-signature", "hubspot": "x-hubspot-signature-v3",
               "custom_ed": "x-signature"}
TS_HEADERS = {"sw_ed": "webhook-timestamp", "sw_mixed": "webhook-timestamp", "svix_ed": "svix-timestamp",
              "discord": "x-signature-timestamp", "hubspot": "x-hubspot-request-timestamp", "custom_ed": "x-timestamp"}


def scheme_body(source, n=1):
    if source == "twilio":
        # Twilio's form: names out of order, a value with spaces and a +.
        return ("To=%2B14155550199&MessageSid=SM" + f"{n:032d}" + "&From=%2B14155550100"
                "&Body=Hello+world+%26+more&AccountSid=AC" + "0" * 32)
    if source == "hubspot":
        return json.dumps([{"eventId": 100 + n, "subscriptionType": "contact.creation"}], separators=(",", ":"))
    b = {"id": f"ev_{n}", "sid": f"SM{n}", "event_id": f"sq_{n}", "type": 2, "data": {"name": "opened"}}
    return json.dumps(b, separators=(",", ":"))


def scheme_path(source, body, how):
    """The path the provider calls (with its query), and the URL it signs."""
    path = f"/webhooks/{source}"
    if source in ("twilio", "square"):
        path += "?tenant=acme&step=1"
    if source == "twilio_json":
        digest = hashlib.sha256(body.encode()).hexdigest()
        path += "?bodySHA256=" + digest
    return path


def scheme_sign(source, body, ts, path, key, url_base=PUBLIC_URL, method="POST"):
    """The provider's headers for `body` at `ts`, signed with `key` (a key
    name for Ed25519, an env name or a raw secret for HMACs)."""
    secret = SCHEME_SECRETS.get(key, key)
    mid = "msg_" + hashlib.sha1(body.encode()).hexdigest()[:10]
    if source in ("sw_ed", "svix_ed"):
        sig = base64.b64encode(ed_private(key).sign(f"{mid}.{ts}.{body}".encode())).decode()
        p = "webhook" if source == "sw_ed" else "svix"
        return [[f"{p}-id", mid], [f"{p}-timestamp", str(ts)], [f"{p}-signature", "v1a," + sig]]
    if source == "sw_mixed":
        import standardwebhooks
        when = datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc)
        # The HMAC entry under a wrong secret (Standard Webhooks' library),
        # the Ed25519 entry under the key named: the v1a one must carry it.
        v1 = standardwebhooks.Webhook("whsec_" + base64.b64encode(b"not the source's secret!").decode()).sign(mid, when, body)
        v1a = "v1a," + base64.b64encode(ed_private(key).sign(f"{mid}.{ts}.{body}".encode())).decode()
        return [["webhook-id", mid], ["webhook-timestamp", str(ts)], ["webhook-signature", v1 + " " + v1a]]
    if source == "discord":
        # Discord's documented verification is PyNaCl's: signed with it too.
        sig = nacl_signing(key).sign(f"{ts}{body}".encode()).signature.hex()
        return [["X-Signature-Ed25519", sig], ["X-Signature-Timestamp", str(ts)]]
    if source in ("twilio", "twilio_json"):
        from twilio.request_validator import RequestValidator
        from urllib.parse import parse_qsl
        params = dict(parse_qsl(body, keep_blank_values=True)) if source == "twilio" else {}
        sig = RequestValidator(secret).compute_signature(url_base + path, params)
        ct = "application/x-www-form-urlencoded" if source == "twilio" else "application/json"
        return [["X-Twilio-Signature", sig], ["Content-Type", ct]]
    if source == "square":
        mac = hmac.new(secret.encode(), (url_base + path + body).encode(), hashlib.sha256).digest()
        return [["x-square-hmacsha256-signature", base64.b64encode(mac).decode()]]
    if source == "hubspot":
        ms = str(ts * 1000 + 123)
        mac = hmac.new(secret.encode(), (method + url_base + path + body + ms).encode(), hashlib.sha256).digest()
        return [["X-HubSpot-Signature-v3", base64.b64encode(mac).decode()], ["X-HubSpot-Request-Timestamp", ms]]
    eid = "e-" + hashlib.sha1(body.encode()).hexdigest()[:6]
    sig = base64.b64encode(ed_private(key).sign(f"{ts}.{eid}.{body}".encode())).decode()
    return [["x-signature", "ed25519=" + sig], ["x-timestamp", str(ts)], ["x-event-id", eid]]


def scheme_library_accepts(source, body, headers, path, now):
    """The provider library's (or the reference implementation's) verdict:
    twilio's RequestValidator.validate, PyNaCl's VerifyKey (Discord's
    documented check), Standard Webhooks' own for the v1 entry (its Python
    library has no v1a) and `cryptography` for v1a; None: no verifier."""
    h = {k.lower(): v for k, v in headers}
    try:
        if source in ("twilio", "twilio_json"):
            from twilio.request_validator import RequestValidator
            from urllib.parse import parse_qsl
            params = dict(parse_qsl(body, keep_blank_values=True)) if source == "twilio" else body
            return any(RequestValidator(SCHEME_SECRETS[k]).validate(PUBLIC_URL + path, params, h.get("x-twilio-signature", ""))
                       for k in ("SCH_TWILIO_TOKEN", "SCH_TWILIO_TOKEN_OLD"))
        if source == "discord":
            import nacl.signing
            ts, sig = h.get("x-signature-timestamp"), h.get("x-signature-ed25519")
            if ts is None or sig is None or abs(int(ts) - now) > TOL:
                return False
            for k in ("SCH_DISCORD_PK", "SCH_DISCORD_PK_OLD"):
                try:
                    nacl.signing.VerifyKey(bytes.fromhex(SCHEME_SECRETS[k])).verify(f"{ts}{body}".encode(), bytes.fromhex(sig))
                    return True
                except Exception:
                    continue
            return False
        if source in ("sw_ed", "svix_ed", "sw_mixed"):
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
            p = "svix" if source == "svix_ed" else "webhook"
            mid, ts, sig = h.get(f"{p}-id"), h.get(f"{p}-timestamp"), h.get(f"{p}-signature")
            if None in (mid, ts, sig) or abs(int(ts) - now) > TOL:
                return False
            keys = {"sw_ed": ("SCH_SW_PK", "SCH_SW_PK_OLD"), "sw_mixed": ("SCH_SW_PK",), "svix_ed": ("SCH_SVIX_PK", "SCH_SVIX_PK_OLD")}[source]
            for entry in sig.split(" "):
                if not entry.startswith("v1a,"):
                    continue
                for k in keys:
                    try:
                        Ed25519PublicKey.from_public_bytes(base64.b64decode(SCHEME_SECRETS[k][5:])).verify(
                            base64.b64decode(entry[4:]), f"{mid}.{ts}.{body}".encode())
                        return True
                    except Exception:
                        continue
            return False
    except Exception:
        return False
    return None


def sw_library_rejects_v1(body, headers, now):
    """Whether Standard Webhooks' own library refuses a request's v1
    entries under the source's HMAC secret."""
    import standardwebhooks
    import unittest.mock
    w = standardwebhooks.Webhook(SCHEME_SECRETS["SCH_SW_SECRET"])
    fixed = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
    mod = sys.modules[type(w).__module__]
    with unittest.mock.patch.object(mod, "datetime", wraps=datetime.datetime) as d:
        d.now = lambda tz=None: fixed
        try:
            w.verify(body, dict(headers))
            return False
        except Exception:
            return True


SCHEME_HOWS = {
    "sw_ed": ["valid", "rotated", "wrong_key", "tampered_body", "expired", "future", "missing", "malformed", "v1_only"],
    "sw_mixed": ["valid", "wrong_key", "tampered_body", "v1_valid"],
    "svix_ed": ["valid", "rotated", "wrong_key", "tampered_body", "expired", "future", "missing", "malformed"],
    "discord": ["valid", "rotated", "wrong_key", "tampered_body", "tampered_timestamp", "expired", "future", "missing",
                "malformed"],
    "twilio": ["valid", "rotated", "wrong_key", "tampered_body", "tampered_query", "wrong_host", "with_port",
               "missing", "malformed"],
    "twilio_json": ["valid", "rotated", "wrong_key", "tampered_body", "body_hash_mismatch", "wrong_host", "missing"],
    "square": ["valid", "rotated", "wrong_key", "tampered_body", "tampered_query", "wrong_host", "missing",
               "malformed"],
    "hubspot": ["valid", "rotated", "wrong_key", "tampered_body", "wrong_method", "tampered_timestamp", "expired",
                "future", "missing", "malformed"],
    "custom_ed": ["valid", "rotated", "wrong_key", "tampered_body", "tampered_header", "tampered_timestamp",
                  "expired", "future", "missing", "malformed"],
}
SCHEME_RECIPES = [(f"{src}: {how}", src, how) for src, hows in SCHEME_HOWS.items() for how in hows]
SCHEME_ACCEPTED = {"valid", "rotated", "with_port", "v1_valid"}


def build_scheme(source, how, now, margin=0):
    body = scheme_body(source)
    ts = {"expired": now - TOL - 1 - margin, "future": now + TOL + 1 + margin}.get(how, now)
    good, rotated, wrong = SCHEME_KEYS[source]
    key = {"rotated": rotated, "wrong_key": wrong}.get(how, good)
    path = scheme_path(source, body, how)
    signed_path, url_base, method = path, PUBLIC_URL, "POST"
    if how == "wrong_host":
        url_base = "https://evil.example.com"
    if how == "with_port":
        # Twilio's validator takes the URL with the scheme's port too.
        url_base = PUBLIC_URL + ":443"
    if how == "wrong_method":
        method = "PUT"
    if how == "v1_valid":
        # A mixed header whose v1 entry carries the source's HMAC secret.
        import standardwebhooks
        mid = "msg_" + hashlib.sha1(body.encode()).hexdigest()[:10]
        when = datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc)
        v1 = standardwebhooks.Webhook(SCHEME_SECRETS["SCH_SW_SECRET"]).sign(mid, when, body)
        v1a = "v1a," + base64.b64encode(ed_private("sw wrong").sign(f"{mid}.{ts}.{body}".encode())).decode()
        headers = [["webhook-id", mid], ["webhook-timestamp", str(ts)], ["webhook-signature", v1a + " " + v1]]
    elif how == "v1_only":
        # An HMAC signature for a source that has only public keys.
        import standardwebhooks
        mid = "msg_" + hashlib.sha1(body.encode()).hexdigest()[:10]
        when = datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc)
        v1 = standardwebhooks.Webhook(SCHEME_SECRETS["SCH_SW_SECRET"]).sign(mid, when, body)
        headers = [["webhook-id", mid], ["webhook-timestamp", str(ts)], ["webhook-signature", v1]]
    else:
        headers = scheme_sign(source, body, ts, signed_path, key, url_base, method)
    if how == "tampered_body":
        if source == "twilio":
            body = body.replace("Hello", "Hellp")
        else:
            # Changed after signing; the path's bodySHA256 (twilio_json)
            # still names the original.
            body = body.replace("opened", "openeD").replace("contact.creation", "contact.creatioN")
    if how == "body_hash_mismatch":
        # A body and URL signed together, but the hash names another body.
        path = path.split("?")[0] + "?bodySHA256=" + hashlib.sha256(b"another body").hexdigest()
        headers = scheme_sign(source, body, ts, path, key)
    if how == "tampered_query":
        path = path.replace("step=1", "step=2")
    if how == "tampered_timestamp":
        headers = [[k, str(int(v) - 1) if k.lower() == TS_HEADERS[source] else v] for k, v in headers]
    if how == "tampered_header":
        headers = [[k, "e-other" if k.lower() == "x-event-id" else v] for k, v in headers]
    if how == "missing":
        headers = [[k, v] for k, v in headers if k.lower() != SIG_HEADERS[source]]
    if how == "malformed":
        bad = {"webhook-signature": "v1a,not*base64", "svix-signature": "v1a,!!", "x-signature-ed25519": "zz" * 64,
               "x-twilio-signature": "not base64!", "x-signature": "ed25519=" + base64.b64encode(b"short").decode(),
               "x-square-hmacsha256-signature": "not base64!", "x-hubspot-signature-v3": "not base64!"}
        headers = [[k, bad.get(k.lower(), v)] for k, v in headers]
    req = {"method": method if how == "wrong_method" else "POST", "path": path, "headers": headers, "body": body}
    if how == "wrong_method":
        # Signed for PUT, sent as POST.
        req["method"] = "POST"
    lib = scheme_library_accepts(source, body, headers, path, now)
    if source == "sw_mixed" and lib is not None:
        # Either entry may carry it: the v1a one (above) or the v1 one, as
        # Standard Webhooks' own library checks it.
        lib = lib or not sw_library_rejects_v1(body, headers, now)
    return req, lib


def scheme_expect(source, how):
    if how in SCHEME_ACCEPTED:
        return {"action": "forward", "stamps": {"x-hookstamp-verified": "true"}}
    return {"action": "reject", "status": 401}


def scheme_cases(now, margin=0):
    out = []
    for name, src, how in SCHEME_RECIPES:
        req, lib = build_scheme(src, how, now, margin=margin)
        if lib is not None:
            assert lib == (how in SCHEME_ACCEPTED), f"{name}: the provider's library says {lib}"
        out.append({"name": name, "request": req, "expect": scheme_expect(src, how)})
    return out


def bless_schemes():
    about = ("Ed25519, Twilio and URL-signed schemes, signed by the providers' own libraries or the "
             "reference implementations (tests/e2e/signing.py), at a fixed time")
    cases_ = scheme_cases(NOW)
    lines = ["{", f'  "about": {json.dumps(about)},', f'  "now": {NOW},',
             '  "env": ' + json.dumps(SCHEME_SECRETS, indent=2).replace("\n", "\n  ") + ",",
             '  "config": ' + json.dumps(SCHEME_CONFIG, indent=2).replace("\n", "\n  ") + ",", '  "cases": [',
             ",\n".join("    " + json.dumps(c) for c in cases_), "  ]", "}"]
    (HERE.parent / "cases" / "schemes.json").write_text("\n".join(lines) + "\n")


# The tables this module makes, by name: how to make their cases at a time.
TABLE_CASES = {"verify": cases, "schemes": scheme_cases}

if __name__ == "__main__" and "--bless-schemes" in sys.argv:
    bless_schemes()
