#!/usr/bin/env python3
"""Test vectors for batch a: discord, sendgrid, paypal, aws-sns, plaid, google-pubsub, netlify, wise,
azure-event-grid.

Every signature is made here from fixed test keys (keys/, committed; no real key anywhere) and a fixed clock
(NOW), then checked by the provider's own SDK where one exists; the run stops with an error when an SDK refuses
a vector that must verify, or accepts one that must not. The Node half (verify.mjs: sns-validator,
discord-interactions, @sendgrid/eventwebhook) runs at the end. See README.md.

    python generate.py              # rewrite ../../<provider>.json (deterministic)
    python generate.py --new-keys   # once: make keys/ (RSA keys, test CA and certificates); then commit them
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VECTORS = HERE.parent.parent
KEYS = HERE / "keys"

NOW = 1700000000  # 2023-11-14T22:13:20Z: the unix second at which every signature below is fresh
NOW_ISO = "2023-11-14T22:13:20Z"
HOOKS = "https://hooks.example.com/webhooks"


# --------------------------------------------------------------------------------------------- helpers
def fail(msg: str) -> None:
    raise SystemExit(f"generate.py: {msg}")


class quiet:
    """Some SDKs print their exceptions on a refusal (discord-interactions, paypalrestsdk): keep them quiet."""

    def __enter__(self):
        import contextlib
        import io

        self._cm = contextlib.redirect_stdout(io.StringIO())
        self._cm.__enter__()

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)


def expect_true(ok: bool, what: str) -> None:
    if not ok:
        fail(f"the SDK refused a vector that must verify: {what}")


def expect_false(ok: bool, what: str) -> None:
    if ok:
        fail(f"the SDK accepted a vector that must not verify: {what}")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seed(label: str) -> bytes:
    """32 fixed bytes for a test key that can be derived (Ed25519 seeds, P-256 scalars)."""
    return hashlib.sha256(f"webhook-inbox test key: {label}".encode()).digest()


def write_vector(vector: dict) -> None:
    path = VECTORS / f"{vector['provider']}.json"
    path.write_text(json.dumps(vector, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.name} ({len(vector['cases'])} cases)")


def config(secrets=None, public_key=None, url=None, verify_token=None, **extra) -> dict:
    out = {"secrets": secrets, "public_key": public_key, "url": url, "verify_token": verify_token}
    out.update(extra)
    return out


def case(name, headers, body, expect, *, method="POST", url, now=NOW, **extra) -> dict:
    out = {"name": name, "method": method, "url": url, "headers": headers, "body": body, "now": now}
    out.update(extra)
    out["expect"] = expect
    return out


# --------------------------------------------------------------------------------------------- key material
RSA_KEYS = ["ca", "paypal-leaf", "sns-leaf", "rogue", "wise", "wise-other", "pubsub", "pubsub-other"]


def new_keys() -> None:
    """Make the RSA keys and the test certificates once. Everything else derives from fixed seeds."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    KEYS.mkdir(exist_ok=True)
    for name in RSA_KEYS:
        path = KEYS / f"{name}.key.pem"
        if path.exists():
            continue
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    make_certificates()


def rsa_key(name: str):
    from cryptography.hazmat.primitives import serialization

    path = KEYS / f"{name}.key.pem"
    if not path.exists():
        fail(f"{path} is missing: run `python generate.py --new-keys` once and commit keys/")
    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def public_pem(key) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def make_certificates() -> None:
    """A test root CA, the PayPal and SNS leaf certificates it issues, and rogue self-signed look-alikes."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(cn: str, org: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    not_before = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
    not_after = dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)
    ca = rsa_key("ca")
    ca_name = name("webhook-inbox TEST Root CA (not a real CA)", "webhook-inbox tests")

    def build(subject, issuer, key, signer, serial, *, is_ca, dns=None, issuer_key=None):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(serial).not_valid_before(not_before).not_valid_after(not_after)
             .add_extension(x509.BasicConstraints(ca=is_ca, path_length=0 if is_ca else None), critical=True)
             .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
        if is_ca:
            b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                              key_encipherment=False, data_encipherment=False,
                                              key_agreement=False, key_cert_sign=True, crl_sign=True,
                                              encipher_only=False, decipher_only=False), critical=True)
        else:
            b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                              key_encipherment=True, data_encipherment=False,
                                              key_agreement=False, key_cert_sign=False, crl_sign=False,
                                              encipher_only=False, decipher_only=False), critical=True)
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                       ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
            b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                critical=False)
        return b.sign(signer, hashes.SHA256())

    def save(cert, file):
        (KEYS / file).write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    save(build(ca_name, ca_name, ca, ca, 0x1A0001, is_ca=True), "ca.cert.pem")
    paypal_name = name("messageverificationcerts.paypal.com", "PayPal, Inc. (TEST look-alike)")
    sns_name = name("sns.amazonaws.com", "Amazon (TEST look-alike)")
    save(build(paypal_name, ca_name, rsa_key("paypal-leaf"), ca, 0x1A0002, is_ca=False,
               dns=["messageverificationcerts.paypal.com"], issuer_key=ca), "paypal-leaf.cert.pem")
    save(build(sns_name, ca_name, rsa_key("sns-leaf"), ca, 0x1A0003, is_ca=False,
               dns=["sns.amazonaws.com"], issuer_key=ca), "sns-leaf.cert.pem")
    rogue = rsa_key("rogue")
    save(build(paypal_name, paypal_name, rogue, rogue, 0x1A0004, is_ca=False,
               dns=["messageverificationcerts.paypal.com"], issuer_key=rogue), "rogue-paypal.cert.pem")
    save(build(sns_name, sns_name, rogue, rogue, 0x1A0005, is_ca=False,
               dns=["sns.amazonaws.com"], issuer_key=rogue), "rogue-sns.cert.pem")


def cert_pem(file: str) -> str:
    path = KEYS / file
    if not path.exists():
        fail(f"{path} is missing: run `python generate.py --new-keys` once and commit keys/")
    return path.read_text()


def rsa_sign(key, data: bytes, algo: str = "sha256") -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    h = {"sha256": hashes.SHA256(), "sha1": hashes.SHA1()}[algo]
    return key.sign(data, padding.PKCS1v15(), h)  # PKCS#1 v1.5 is deterministic


def p256(label: str):
    """A fixed P-256 key (python-ecdsa), signing deterministically (RFC 6979)."""
    import ecdsa

    n = ecdsa.NIST256p.order
    secret = int.from_bytes(seed(label), "big") % (n - 1) + 1
    return ecdsa.SigningKey.from_secret_exponent(secret, curve=ecdsa.NIST256p, hashfunc=hashlib.sha256)


# --------------------------------------------------------------------------------------------- discord
def discord() -> dict:
    import discord_interactions
    from nacl.encoding import HexEncoder
    from nacl.signing import SigningKey

    key = SigningKey(seed("discord"))
    public_key = key.verify_key.encode(HexEncoder).decode()
    other = SigningKey(seed("discord-other")).verify_key.encode(HexEncoder).decode()
    url = f"{HOOKS}/discord"
    ts = str(NOW)

    def sdk_verify(body: str, sig: str, t: str, k: str) -> bool:
        with quiet():
            return discord_interactions.verify_key(body.encode(), sig, t, k)

    def signed(body: str) -> list:
        sig = key.sign(ts.encode() + body.encode()).signature.hex()
        expect_true(sdk_verify(body, sig, ts, public_key), "discord")
        expect_false(sdk_verify(body, sig, ts, other), "discord wrong key")
        expect_false(sdk_verify(body, sig, str(NOW + 1), public_key), "discord other timestamp")
        return [["x-signature-ed25519", sig], ["x-signature-timestamp", ts], ["content-type", "application/json"],
                ["user-agent", "Discord-Interactions/1.0 (+https://discord.com)"]]

    app_id = "1173000000000000001"
    user = {"avatar": None, "discriminator": "0", "global_name": "Test User", "id": "1172000000000000001",
            "public_flags": 0, "username": "testuser"}
    ping = compact({"app_permissions": "562949953601536", "application_id": app_id,
                    "authorizing_integration_owners": {}, "entitlements": [], "id": "1174000000000000001",
                    "token": "aW50ZXJhY3Rpb246MTE3NDAwMDAwMDAwMDAwMDAwMTp0ZXN0LXRva2Vu", "type": 1, "user": user,
                    "version": 1})
    command = compact({"app_permissions": "562949953601536", "application_id": app_id,
                       "authorizing_integration_owners": {"0": "1171000000000000001"},
                       "channel_id": "1171000000000000002", "context": 0,
                       "data": {"id": "1173000000000000010", "name": "ping", "type": 1},
                       "entitlements": [], "guild_id": "1171000000000000001", "guild_locale": "en-US",
                       "id": "1174000000000000002", "locale": "en-US",
                       "member": {"nick": None, "permissions": "2248473465835073", "roles": [], "user": user},
                       "token": "aW50ZXJhY3Rpb246MTE3NDAwMDAwMDAwMDAwMDAwMjp0ZXN0LXRva2Vu", "type": 2,
                       "version": 1})
    wh_ping = compact({"version": 1, "application_id": app_id, "type": 0})
    wh_event = compact({"version": 1, "application_id": app_id, "type": 1,
                        "event": {"type": "APPLICATION_AUTHORIZED", "timestamp": "2023-11-14T22:13:19.512000+00:00",
                                  "data": {"integration_type": 1, "scopes": ["applications.commands"],
                                           "user": user}}})
    no_content = {"status": 204, "content_type": "text/plain", "body": ""}
    return {
        "provider": "discord",
        "made_by": "sdk",
        "made_with": "PyNaCl 1.6.2 (PyPI) SigningKey.sign; checked by discord-interactions 0.4.0 (PyPI) verify_key "
                     "and discord-interactions 4.4.0 (npm) verifyKey",
        "docs": "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-"
                "security-request-headers",
        "notes": "Ed25519 over X-Signature-Timestamp + raw body, signature hex, key hex (the app's Public Key). "
                 "One Discord app signs two kinds of request with the same key: interactions (body has 'token'; "
                 "PING type 1 answered {\"type\":1}; a command answered with a deferred response, here "
                 "{\"type\":5}, as a store-then-process receiver must answer within 3 s) and webhook events "
                 "(body has 'event'; PING type 0 and every event answered 204 with no body; no event id, so the "
                 "id is the hex SHA-256 of the raw body). Interaction event_type is the numeric 'type' as text. "
                 "Discord documents no timestamp tolerance: 300 s. Docs for webhook events: "
                 "https://discord.com/developers/docs/events/webhook-events",
        "config": config(public_key=public_key),
        "wrong_config": config(public_key=other),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "cases": [
            case("interactions PING", signed(ping), ping, url=url,
                 expect={"kind": "handshake",
                         "answer": {"status": 200, "content_type": "application/json", "body": "{\"type\":1}"}}),
            case("interaction APPLICATION_COMMAND /ping", signed(command), command, url=url,
                 expect={"kind": "event", "event_id": "1174000000000000002", "event_type": "2",
                         "answer": {"status": 200, "content_type": "application/json", "body": "{\"type\":5}"}}),
            case("webhook events PING (type 0)", signed(wh_ping), wh_ping, url=f"{url}/events",
                 expect={"kind": "handshake", "answer": no_content}),
            case("webhook event APPLICATION_AUTHORIZED", signed(wh_event), wh_event, url=f"{url}/events",
                 expect={"kind": "event", "event_id": sha256_hex(wh_event.encode()),
                         "event_type": "APPLICATION_AUTHORIZED", "answer": no_content}),
        ],
    }


# --------------------------------------------------------------------------------------------- sendgrid
def sendgrid() -> dict:
    from ecdsa.util import sigencode_der
    from sendgrid.helpers.eventwebhook import EventWebhook

    key = p256("sendgrid")
    public_key = b64(key.get_verifying_key().to_der())  # base64 DER SubjectPublicKeyInfo, as SendGrid shows it
    other = b64(p256("sendgrid-other").get_verifying_key().to_der())
    url = f"{HOOKS}/sendgrid"
    ts = str(NOW)

    def body_of(events: list) -> str:
        # SendGrid's raw form: a JSON array, CRLF after each event object (SDK tests use real deliveries).
        return "[" + ",\r\n".join(json.dumps(e, separators=(",", ":"), sort_keys=True) for e in events) + "]\r\n"

    def signed(body: str) -> list:
        sig = b64(key.sign_deterministic((ts + body).encode(), hashfunc=hashlib.sha256, sigencode=sigencode_der))
        expect_true(EventWebhook(public_key).verify_signature(body, sig, ts), "sendgrid")
        expect_false(EventWebhook(other).verify_signature(body, sig, ts), "sendgrid wrong key")
        expect_false(EventWebhook(public_key).verify_signature(body, sig, str(NOW + 1)), "sendgrid other ts")
        return [["x-twilio-email-event-webhook-signature", sig], ["x-twilio-email-event-webhook-timestamp", ts],
                ["content-type", "application/json;charset=utf-8"], ["user-agent", "SendGrid Event API"]]

    msg = "qNwBLgPQQjW6DJvKtestAA.filterdrecv-test-1-6553F0A0-1.0"
    smtp = "<qNwBLgPQQjW6DJvKtestAA@ismtpd0001p1mdw1.sendgrid.net>"
    delivered = {"email": "alice@example.com", "event": "delivered", "ip": "203.0.113.10",
                 "response": "250 2.0.0 OK", "sg_event_id": "ZGVsaXZlcmVkLTAtdGVzdC1xTndCTGdQUVFqVzZESnZL",
                 "sg_message_id": msg, "smtp-id": smtp, "timestamp": NOW - 60, "tls": 1}
    batch = [
        {"email": "alice@example.com", "event": "processed", "send_at": 0,
         "sg_event_id": "cHJvY2Vzc2VkLXRlc3QtcU53QkxnUFFRalc2REp2Sw", "sg_message_id": msg, "smtp-id": smtp,
         "timestamp": NOW - 65, "category": ["receipts"]},
        delivered,
        {"email": "alice@example.com", "event": "open", "ip": "198.51.100.7", "sg_content_type": "html",
         "sg_event_id": "b3Blbi10ZXN0LXFOd0JMZ1BRUWpXNkRKdksy", "sg_machine_open": False, "sg_message_id": msg,
         "timestamp": NOW - 5, "useragent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Café"},
    ]
    one = body_of([delivered])
    many = body_of(batch)
    return {
        "provider": "sendgrid",
        "made_by": "sdk",
        "made_with": "sendgrid 6.12.4 (PyPI) EventWebhook.verify_signature and @sendgrid/eventwebhook 8.0.0 (npm) "
                     "EventWebhook.verifySignature; signed with ecdsa 0.19.2 (PyPI) sign_deterministic",
        "docs": "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/"
                "getting-started-event-webhook-security-features",
        "notes": "ECDSA P-256 / SHA-256 over X-Twilio-Email-Event-Webhook-Timestamp + raw body; signature base64 "
                 "DER; key base64 DER SubjectPublicKeyInfo. The body is always a JSON array (CRLF after each "
                 "object, as SendGrid sends it), so every case is a batch: one event per item, id sg_event_id, "
                 "type 'event'. No documented tolerance: 300 s. SendGrid can also use OAuth 2.0 (a bearer "
                 "token) instead of or beside the signature: not covered here.",
        "config": config(public_key=public_key),
        "wrong_config": config(public_key=other),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "cases": [
            case("one delivered event", signed(one), one, url=url,
                 expect={"kind": "batch", "items": [{"event_id": delivered["sg_event_id"],
                                                     "event_type": "delivered"}]}),
            case("three events (processed, delivered, open)", signed(many), many, url=url,
                 expect={"kind": "batch", "items": [{"event_id": e["sg_event_id"], "event_type": e["event"]}
                                                    for e in batch]}),
        ],
    }


# --------------------------------------------------------------------------------------------- paypal
PAYPAL_CERT_URL = "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-7e57ce27"
PAYPAL_ROGUE_URL = "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-0bad0bad"
PAYPAL_EVIL_URL = "https://paypal.com.certs.example.net/v1/notifications/certs/CERT-360caa42-fca2a594-7e57ce27"


def paypal() -> dict:
    import paypalrestsdk.notifications as notifications
    import requests
    from paypalrestsdk.notifications import WebhookEvent

    leaf, rogue = rsa_key("paypal-leaf"), rsa_key("rogue")
    certs = {PAYPAL_CERT_URL: cert_pem("paypal-leaf.cert.pem"), PAYPAL_ROGUE_URL: cert_pem("rogue-paypal.cert.pem"),
             PAYPAL_EVIL_URL: cert_pem("paypal-leaf.cert.pem")}
    webhook_id, other_id = "1JE4291016473214C", "8PT597110X687430LKGECATA"
    url = f"{HOOKS}/paypal"

    # The SDK fetches the cert with requests.get and trusts the DigiCert roots it ships: serve our test
    # certificates instead, and make our test root its trust store (a private class attribute).
    class Response:
        def __init__(self, text):
            self.text, self.status_code = text, 200

    def fake_get(u, *a, **k):
        if u not in certs:
            raise requests.exceptions.ConnectionError(f"no test certificate at {u}")
        return Response(certs[u])

    notifications.requests.get = fake_get
    WebhookEvent._WebhookEvent__cert_chain_path = [str(KEYS / "ca.cert.pem")]

    def signed(body: str, transmission_id: str, *, signer=leaf, cert_url=PAYPAL_CERT_URL) -> list:
        crc = binascii.crc32(body.encode()) & 0xFFFFFFFF
        message = f"{transmission_id}|{NOW_ISO}|{webhook_id}|{crc}"
        sig = b64(rsa_sign(signer, message.encode()))
        return [["paypal-auth-algo", "SHA256withRSA"], ["paypal-auth-version", "v2"],
                ["paypal-cert-url", cert_url], ["paypal-transmission-id", transmission_id],
                ["paypal-transmission-sig", sig], ["paypal-transmission-time", NOW_ISO],
                ["content-type", "application/json"], ["correlation-id", "f1c2d3e4a5b67"],
                ["user-agent", "PayPal/AUHD-214.0-58324235"]]

    def sdk_verify(headers, body, wid) -> bool:
        h = dict(headers)
        with quiet():
            return WebhookEvent.verify(h["paypal-transmission-id"], h["paypal-transmission-time"], wid, body,
                                       h["paypal-cert-url"], h["paypal-transmission-sig"], h["paypal-auth-algo"])

    def event(event_id, event_type, summary, resource_type, resource):
        return compact({"id": event_id, "event_version": "1.0", "create_time": "2023-11-14T22:13:18.000Z",
                        "resource_type": resource_type, "resource_version": "2.0", "event_type": event_type,
                        "summary": summary, "resource": resource,
                        "links": [{"href": f"https://api.paypal.com/v1/notifications/webhooks-events/{event_id}",
                                   "rel": "self", "method": "GET"},
                                  {"href": f"https://api.paypal.com/v1/notifications/webhooks-events/{event_id}"
                                           "/resend", "rel": "resend", "method": "POST"}]})

    capture = event("WH-2WR32451HC0233532-67976317FL4543714", "PAYMENT.CAPTURE.COMPLETED",
                    "Payment completed for EUR 21.0 EUR", "capture",
                    {"id": "42311647XV020574X", "status": "COMPLETED",
                     "amount": {"currency_code": "EUR", "value": "21.00"}, "final_capture": True,
                     "seller_protection": {"status": "ELIGIBLE"}, "custom_id": "Café order 1001",
                     "create_time": "2023-11-14T22:13:16Z", "update_time": "2023-11-14T22:13:16Z"})
    subscription = event("WH-77687562XN25889J8-8Y6T55435R66168T6", "BILLING.SUBSCRIPTION.ACTIVATED",
                         "Subscription activated", "subscription",
                         {"id": "I-BW452GLLEP1G", "status": "ACTIVE", "plan_id": "P-5ML4271244454362WXNWU5NQ",
                          "start_time": "2023-11-14T22:13:00Z", "quantity": "1"})
    ok1 = signed(capture, "6f8c6c30-8337-11ee-b962-0242ac120002")
    ok2 = signed(subscription, "70a1c2e4-8337-11ee-b962-0242ac120002")
    rogue_h = signed(capture, "71b2d3f5-8337-11ee-b962-0242ac120002", signer=rogue, cert_url=PAYPAL_ROGUE_URL)
    evil_h = signed(capture, "72c3e406-8337-11ee-b962-0242ac120002", cert_url=PAYPAL_EVIL_URL)
    for h, b in ((ok1, capture), (ok2, subscription)):
        expect_true(sdk_verify(h, b, webhook_id), "paypal")
        expect_false(sdk_verify(h, b, other_id), "paypal wrong webhook id")
        expect_false(sdk_verify(h, b + " ", webhook_id), "paypal tampered body")
    expect_false(sdk_verify(rogue_h, capture, webhook_id), "paypal self-signed look-alike certificate")
    # The SDK does not look at the cert URL's host (it checks chain, CN and expiry only): evil_h verifies with
    # it, and is refused by webhook-inbox's own rule (HTTPS, a PayPal host), never fetched.
    expect_true(sdk_verify(evil_h, capture, webhook_id), "paypal (SDK ignores the cert host)")
    return {
        "provider": "paypal",
        "made_by": "sdk",
        "made_with": "paypalrestsdk 1.13.3 (PyPI) WebhookEvent.verify (with pyOpenSSL 24.2.1, the last with "
                     "crypto.verify); signed with cryptography 43.0.3 (PKCS#1 v1.5, SHA-256)",
        "docs": "https://developer.paypal.com/api/rest/webhooks/rest/",
        "notes": "RSA SHA256withRSA (paypal-auth-algo) over '<paypal-transmission-id>|<paypal-transmission-time>|"
                 "<webhook id>|<CRC32 of the raw body as unsigned decimal>', signature base64, verified with the "
                 "certificate at paypal-cert-url. The webhook id (shown per webhook in the PayPal app settings) "
                 "is the only config: secrets[0]. The cert is fetched only over HTTPS from a PayPal host "
                 "(api.paypal.com, api.sandbox.paypal.com; *.paypal.com), chained to trust_root (here a test "
                 "CA standing for the public roots), CN ending .paypal.com, unexpired, cached by URL. "
                 "'certificates' maps each URL in the cases to the PEM that URL serves. Event id body 'id', type "
                 "'event_type'. No documented tolerance: 300 s on paypal-transmission-time (PayPal retries up "
                 "to 25 times over 3 days, each a new transmission). CRC32 is not a cryptographic hash: within the "
                 "tolerance a captured delivery's body could be altered to the same CRC. 'refused' (not run by "
                 "the vector harness): a self-signed look-alike (the SDK refuses it: chain; in webhook-inbox the "
                 "fetcher's trust check) and a valid cert served from a host that is not PayPal's (the SDK "
                 "accepts it: it never checks the host; webhook-inbox refuses it before fetching).",
        "config": config(secrets=[webhook_id]),
        "wrong_config": config(secrets=[other_id]),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "certificates": certs,
        "trust_root": cert_pem("ca.cert.pem"),
        "cases": [
            case("PAYMENT.CAPTURE.COMPLETED", ok1, capture, url=url,
                 expect={"kind": "event", "event_id": "WH-2WR32451HC0233532-67976317FL4543714",
                         "event_type": "PAYMENT.CAPTURE.COMPLETED"}),
            case("BILLING.SUBSCRIPTION.ACTIVATED", ok2, subscription, url=url,
                 expect={"kind": "event", "event_id": "WH-77687562XN25889J8-8Y6T55435R66168T6",
                         "event_type": "BILLING.SUBSCRIPTION.ACTIVATED"}),
        ],
        "refused": [
            case("signed by a self-signed look-alike certificate", rogue_h, capture, url=url,
                 expect={"kind": "reject", "reason": "certificate does not chain to the trust root"}),
            case("cert URL on a host that is not PayPal's", evil_h, capture, url=url,
                 expect={"kind": "reject", "reason": "certificate URL host not allowed"}),
        ],
    }


# --------------------------------------------------------------------------------------------- aws-sns
SNS_CERT_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-7e57ce27000000000000000000000001.pem"
SNS_ROGUE_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0bad0bad000000000000000000000002.pem"
SNS_EVIL_URL = "https://sns.us-east-1.amazonaws.com.certs.example.net/SimpleNotificationService-7e57ce27000000000000000000000001.pem"
SNS_TOPIC = "arn:aws:sns:us-east-1:123456789012:inbox-test"
SNS_SUB = SNS_TOPIC + ":2bcfbf39-05c3-41de-beaa-fcfcc21c8f55"
SNS_SIGNED = {  # the keys of the string to sign, in order, each present one as "Key\nvalue\n"
    "Notification": ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"],
    "SubscriptionConfirmation": ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"],
    "UnsubscribeConfirmation": ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"],
}


def aws_sns() -> dict:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    leaf, rogue = rsa_key("sns-leaf"), rsa_key("rogue")
    certs = {SNS_CERT_URL: cert_pem("sns-leaf.cert.pem"), SNS_ROGUE_URL: cert_pem("rogue-sns.cert.pem"),
             SNS_EVIL_URL: cert_pem("sns-leaf.cert.pem")}
    url = f"{HOOKS}/sns"

    def sns_body(fields: dict) -> str:
        # SNS's own layout: one "Key" : value per line, two-space indent.
        return "{\n" + ",\n".join(f"  {json.dumps(k)} : {json.dumps(v, ensure_ascii=False)}"
                                  for k, v in fields.items()) + "\n}"

    def string_to_sign(m: dict) -> bytes:
        return "".join(f"{k}\n{m[k]}\n" for k in SNS_SIGNED[m["Type"]] if k in m).encode()

    def sign(m: dict, version: str, signer=leaf, cert_url=SNS_CERT_URL) -> dict:
        m = dict(m, SignatureVersion=version)
        sig = b64(rsa_sign(signer, string_to_sign(m), "sha1" if version == "1" else "sha256"))
        ordered = {}
        for k in ["Type", "MessageId", "Token", "TopicArn", "Subject", "Message", "SubscribeURL", "Timestamp",
                  "SignatureVersion"]:
            if k in m:
                ordered[k] = m[k]
        ordered["Signature"] = sig
        ordered["SigningCertURL"] = cert_url
        if "UnsubscribeURL" in m:
            ordered["UnsubscribeURL"] = m["UnsubscribeURL"]
        # Self-check against the certificate (the SDK check is in verify.mjs).
        cert = x509.load_pem_x509_certificate(certs[cert_url].encode())
        cert.public_key().verify(base64.b64decode(sig), string_to_sign(m), padding.PKCS1v15(),
                                 hashes.SHA1() if version == "1" else hashes.SHA256())
        return ordered

    def headers(m: dict) -> list:
        h = [["x-amz-sns-message-type", m["Type"]], ["x-amz-sns-message-id", m["MessageId"]],
             ["x-amz-sns-topic-arn", m["TopicArn"]]]
        if m["Type"] == "Notification":
            h.append(["x-amz-sns-subscription-arn", SNS_SUB])
        return h + [["content-type", "text/plain; charset=UTF-8"],
                    ["user-agent", "Amazon Simple Notification Service Agent"]]

    unsubscribe = f"https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={SNS_SUB}"
    n1 = {"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": SNS_TOPIC,
          "Subject": "Order paid", "Message": compact({"order": "1001", "status": "paid", "note": "Café"}),
          "Timestamp": "2023-11-14T22:13:19.512Z", "UnsubscribeURL": unsubscribe}
    n2 = {"Type": "Notification", "MessageId": "da41e39f-ea4d-435a-b922-c6aae3915ebe", "TopicArn": SNS_TOPIC,
          "Message": "Hello from SNS, SignatureVersion 2, no Subject", "Timestamp": "2023-11-14T22:13:19.700Z",
          "UnsubscribeURL": unsubscribe}
    token = "2336412f37fb687f5d51e6e2425ba1f30a8e3b6ec8c0c1bda7f4f3fcd2b4a3c0e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c0"
    subscribe = (f"https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn={SNS_TOPIC}"
                 f"&Token={token}")
    conf = {"Type": "SubscriptionConfirmation", "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
            "Token": token, "TopicArn": SNS_TOPIC,
            "Message": f"You have chosen to subscribe to the topic {SNS_TOPIC}.\n"
                       "To confirm the subscription, visit the SubscribeURL included in this message.",
            "SubscribeURL": subscribe, "Timestamp": "2023-11-14T22:13:18.100Z"}
    m1, m2, mc = sign(n1, "1"), sign(n2, "2"), sign(conf, "1")
    mr = sign(dict(n1, MessageId="5a0a1e1e-0f6b-4bd1-9b52-3d0e0b9a7c11"), "1", signer=rogue, cert_url=SNS_ROGUE_URL)
    me = sign(dict(n1, MessageId="6b1b2f2f-1a7c-4ce2-8c63-4e1f1cab8d22"), "1", cert_url=SNS_EVIL_URL)
    other_topic = "arn:aws:sns:us-east-1:210987654321:someone-else"
    mo = sign(dict(n1, MessageId="7c2c3a3a-2b8d-4df3-9d74-5f2a2dbc9e33", TopicArn=other_topic), "1")
    for m in (m1, m2, mc):  # the vector harness changes the body's middle byte: not in an unsigned URL
        text, mid = sns_body(m), len(sns_body(m)) // 2
        line = text[text.rindex("\n", 0, mid) + 1:text.index("\n", mid)]
        if line.lstrip().startswith(('"SigningCertURL"', '"UnsubscribeURL"')):
            fail(f"aws-sns {m['MessageId']}: the body's middle byte is in an unsigned field")
    return {
        "provider": "aws-sns",
        "made_by": "sdk",
        "made_with": "sns-validator 0.3.5 (npm, AWS's aws-js-sns-message-validator) MessageValidator.validate, "
                     "run by verify.mjs; signed with cryptography 43.0.3 (PKCS#1 v1.5)",
        "docs": "https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html",
        "notes": "The body (Content-Type text/plain) is a JSON message; RSA over 'Key\\nvalue\\n' for each present "
                 "key in byte order: Notification Message, MessageId, Subject (only if present), Timestamp, "
                 "TopicArn, Type; SubscriptionConfirmation and UnsubscribeConfirmation Message, MessageId, "
                 "SubscribeURL, Timestamp, Token, TopicArn, Type. SignatureVersion 1 is SHA1withRSA, 2 is "
                 "SHA256withRSA; Signature base64. SigningCertURL must be https on sns.<region>.amazonaws.com "
                 "(.cn) with a .pem path, the cert chained to trust_root (a test CA here), cached by URL. "
                 "A SubscriptionConfirmation is a handshake: after its signature verifies (and its TopicArn is "
                 "allowed) the receiver GETs its SubscribeURL (checked to be https on an sns.*.amazonaws.com "
                 "host) and answers 200; never stored. Event id MessageId, type the message Type. "
                 "signs_timestamp is false: Timestamp is the publish time and SNS retries keep it (for up to an "
                 "hour under a delivery policy), and MessageId dedup makes a replay a duplicate. Config: SNS "
                 "hands its user no key, but any AWS account can subscribe an endpoint to its own topic, so the "
                 "receiver must only accept (and confirm) its own topics: config.secrets lists the topic ARNs the "
                 "source accepts (not secret, but the one list the config has). Raw message delivery must stay off (a raw message "
                 "carries no signature). 'refused' (not run by the vector harness): a self-signed look-alike "
                 "(sns-validator accepts it: it checks host and signature, not the chain; in webhook-inbox the "
                 "fetcher's trust check), a cert on a host that is not SNS's, a topic not configured.",
        "config": config(secrets=[SNS_TOPIC]),
        "wrong_config": config(secrets=[other_topic]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "certificates": certs,
        "trust_root": cert_pem("ca.cert.pem"),
        "cases": [
            case("Notification, SignatureVersion 1, with Subject", headers(m1), sns_body(m1), url=url,
                 expect={"kind": "event", "event_id": m1["MessageId"], "event_type": "Notification"}),
            case("Notification, SignatureVersion 2, no Subject", headers(m2), sns_body(m2), url=url,
                 expect={"kind": "event", "event_id": m2["MessageId"], "event_type": "Notification"}),
            case("SubscriptionConfirmation", headers(mc), sns_body(mc), url=url,
                 expect={"kind": "handshake", "confirm_url": subscribe,
                         "answer": {"status": 200, "content_type": "text/plain", "body": ""}}),
        ],
        "refused": [
            case("signed by a self-signed look-alike certificate", headers(mr), sns_body(mr), url=url,
                 expect={"kind": "reject", "reason": "certificate does not chain to the trust root"}),
            case("SigningCertURL on a host that is not SNS's", headers(me), sns_body(me), url=url,
                 expect={"kind": "reject", "reason": "certificate URL host not allowed"}),
            case("a topic that is not configured", headers(mo), sns_body(mo), url=url,
                 expect={"kind": "reject", "reason": "topic not configured"}),
        ],
    }


# --------------------------------------------------------------------------------------------- plaid
def plaid() -> dict:
    import jwt
    from ecdsa.util import sigencode_string

    kid, other_kid = "bfbd5111-8e33-4643-8ced-b2e642a72f3c", "bfbd5111-8e33-4643-8ced-b2e642a72f3c"
    key, other = p256("plaid"), p256("plaid-other")

    def jwk(sk, k) -> dict:
        xy = sk.get_verifying_key().to_string()
        return {"alg": "ES256", "created_at": 1560466143, "crv": "P-256", "expired_at": None, "kid": k,
                "kty": "EC", "use": "sig", "x": b64url(xy[:32]), "y": b64url(xy[32:])}

    jwks, wrong_jwks = {kid: jwk(key, kid)}, {other_kid: jwk(other, other_kid)}
    url = f"{HOOKS}/plaid"

    def token(body: str) -> str:
        header = b64url(compact({"alg": "ES256", "kid": kid, "typ": "JWT"}).encode())
        claims = b64url(compact({"iat": NOW, "request_body_sha256": sha256_hex(body.encode())}).encode())
        signing_input = f"{header}.{claims}".encode()
        sig = key.sign_deterministic(signing_input, hashfunc=hashlib.sha256, sigencode=sigencode_string)
        return f"{header}.{claims}.{b64url(sig)}"

    def check(tok: str, body: str, keys: dict) -> bool:
        """Plaid's documented steps, with PyJWT (Plaid has no SDK helper for this)."""
        try:
            if jwt.get_unverified_header(tok)["alg"] != "ES256":
                return False
            k = keys[jwt.get_unverified_header(tok)["kid"]]
            if k["expired_at"] is not None:
                return False
            claims = jwt.decode(tok, jwt.PyJWK(k).key, algorithms=["ES256"])
        except jwt.PyJWTError:
            return False
        return claims["iat"] >= NOW - 300 and claims["request_body_sha256"] == sha256_hex(body.encode())

    def signed(body: str) -> list:
        tok = token(body)
        expect_true(check(tok, body, jwks), "plaid")
        expect_false(check(tok, body, wrong_jwks), "plaid wrong key")
        expect_false(check(tok, body + " ", jwks), "plaid tampered body")
        return [["plaid-verification", tok], ["content-type", "application/json"], ["user-agent", "Plaid Webhook"]]

    def signed_part_of(headers: list) -> str:
        """What the token signs: its JWS signing input `header.payload`, never the signature (ES256 verifies a
        signature's mirror `n - s` too, so a hash over it would give one delivery two ids)."""
        return next(v for n, v in headers if n == "plaid-verification").rsplit(".", 1)[0]

    def body_of(obj) -> str:  # Plaid sends its JSON indented by two spaces, keys sorted
        return json.dumps(obj, indent=2, sort_keys=True)

    sync = body_of({"environment": "sandbox", "historical_update_complete": True,
                    "initial_update_complete": True, "item_id": "wz666MBjYWTp2PDzzggYhM6oWWmBb",
                    "webhook_code": "SYNC_UPDATES_AVAILABLE", "webhook_type": "TRANSACTIONS"})
    item_error = body_of({"environment": "sandbox",
                          "error": {"display_message": None, "error_code": "ITEM_LOGIN_REQUIRED",
                                    "error_message": "the login details of this item have changed (credentials, "
                                                     "MFA, or required user action) and a user login is required "
                                                     "to update this information.",
                                    "error_type": "ITEM_ERROR", "status": 400},
                          "item_id": "wz666MBjYWTp2PDzzggYhM6oWWmBb", "webhook_code": "ERROR",
                          "webhook_type": "ITEM"})
    return {
        "provider": "plaid",
        "made_by": "docs",
        "made_with": "built from the documented steps (Plaid's SDKs have no webhook verifier; plaid-python only "
                     "wraps /webhook_verification_key/get); checked with PyJWT 2.15.1 (PyPI); signed with ecdsa "
                     "0.19.2 sign_deterministic",
        "docs": "https://plaid.com/docs/api/webhooks/webhook-verification/",
        "notes": "Plaid-Verification is a JWT, header alg ES256 (refuse any other) and kid; the key is the JWK "
                 "that POST /webhook_verification_key/get {client_id, secret, key_id: kid} answers (cached by "
                 "kid; refuse a key whose expired_at is set); claims iat (refuse older than 5 minutes) and "
                 "request_body_sha256 (hex SHA-256 of the raw body; Plaid indents its JSON by two spaces). "
                 "config.secrets[0] is 'client_id:secret' for that key fetch; the fetched keys are in 'jwks' "
                 "(kid -> JWK as the API answers it). A configured public_key (a JWK set) pins the keys instead "
                 "of fetching: wrong_config pins 'wrong_jwks', a different key under the same kid. Plaid sends "
                 "no event id, and bodies repeat: the id is the SHA-256 of what the token signs, its signing input "
                 "'header.payload' (the body's hash and iat; never the signature, whose mirror n - s verifies too); "
                 "type '<webhook_type>.<webhook_code>'.",
        "config": config(secrets=["6053c1a0a9b8c70012345678:testsecret0123456789abcdef0123"]),
        "wrong_config": config(public_key=compact({"keys": list(wrong_jwks.values())})),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "jwks": jwks,
        "wrong_jwks": wrong_jwks,
        "cases": [
            case("TRANSACTIONS SYNC_UPDATES_AVAILABLE", signed(sync), sync, url=url,
                 expect={"kind": "event", "event_id": sha256_hex(signed_part_of(signed(sync)).encode()),
                         "event_type": "TRANSACTIONS.SYNC_UPDATES_AVAILABLE"}),
            case("ITEM ERROR", signed(item_error), item_error, url=url,
                 expect={"kind": "event", "event_id": sha256_hex(signed_part_of(signed(item_error)).encode()),
                         "event_type": "ITEM.ERROR"}),
        ],
    }


# --------------------------------------------------------------------------------------------- google-pubsub
def google_pubsub() -> dict:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID
    from google.auth import _helpers, crypt
    from google.auth import jwt as gjwt
    from google.oauth2 import id_token

    kid, other_kid = "7d680d8c70d44e947133cbd499ebc1a61c3d5abc", "7d680d8c70d44e947133cbd499ebc1a61c3d5abc"
    key, other = rsa_key("pubsub"), rsa_key("pubsub-other")
    audience = f"{HOOKS}/pubsub"
    service_account = "inbox-push@inbox-test.iam.gserviceaccount.com"

    def jwk(k, i) -> dict:
        nums = k.public_key().public_numbers()
        n = nums.n.to_bytes((nums.n.bit_length() + 7) // 8, "big")
        e = nums.e.to_bytes((nums.e.bit_length() + 7) // 8, "big")
        return {"alg": "RS256", "e": b64url(e), "kid": i, "kty": "RSA", "n": b64url(n), "use": "sig"}

    def x509_pem(k) -> str:
        # google-auth's default verifier reads Google's v1 certs (kid -> self-signed X.509 PEM): wrap the key.
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test.googleusercontent.example")])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
                .serial_number(0x2B0001).not_valid_before(dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc))
                .not_valid_after(dt.datetime(2049, 12, 31, tzinfo=dt.timezone.utc)).sign(k, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM).decode()

    class Transport:  # a google.auth.transport.Request that serves the test certs
        def __init__(self, certs):
            self.certs = certs

        def __call__(self, url, method="GET", **kw):
            class R:
                status = 200
                data = json.dumps(self.certs).encode()
            return R()

    _helpers.utcnow = lambda: dt.datetime.fromtimestamp(NOW, dt.timezone.utc).replace(tzinfo=None)
    good_certs, bad_certs = {kid: x509_pem(key)}, {kid: x509_pem(other)}
    signer = crypt.RSASigner.from_string(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode(), key_id=kid)

    def sdk_verify(tok: str, certs: dict, aud: str) -> bool:
        try:
            claims = id_token.verify_oauth2_token(tok, Transport(certs), audience=aud)
        except Exception:  # google-auth raises ValueError / GoogleAuthError subclasses
            return False
        return claims["email"] == service_account and claims["email_verified"] is True

    def signed() -> list:
        claims = {"aud": audience, "azp": "113774264463038321964", "email": service_account,
                  "email_verified": True, "exp": NOW + 3600, "iat": NOW, "iss": "https://accounts.google.com",
                  "sub": "113774264463038321964"}
        tok = gjwt.encode(signer, claims).decode()
        expect_true(sdk_verify(tok, good_certs, audience), "google-pubsub")
        expect_false(sdk_verify(tok, bad_certs, audience), "google-pubsub wrong key")
        expect_false(sdk_verify(tok, good_certs, "https://other.example.com/webhooks/pubsub"),
                     "google-pubsub wrong audience")
        return [["authorization", f"Bearer {tok}"], ["content-type", "application/json"],
                ["from", "noreply@google.com"],
                ["user-agent", "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"]]

    def push(message_id: str, data: dict, attributes: dict) -> str:
        return compact({"message": {"attributes": attributes, "data": b64(compact(data).encode()),
                                    "messageId": message_id, "message_id": message_id,
                                    "publishTime": "2023-11-14T22:13:19.512Z",
                                    "publish_time": "2023-11-14T22:13:19.512Z"},
                        "subscription": "projects/inbox-test/subscriptions/inbox-push"})

    body = push("9203470311174837", {"order": "1001", "status": "paid"}, {"origin": "checkout"})
    return {
        "provider": "google-pubsub",
        "made_by": "sdk",
        "made_with": "google-auth 2.62.2 (PyPI): signed with google.auth.jwt.encode + crypt.RSASigner, checked with "
                     "google.oauth2.id_token.verify_oauth2_token (its clock pinned to 'now', its certs served "
                     "from the test key)",
        "docs": "https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions",
        "notes": "A push subscription with authentication sends 'Authorization: Bearer <OIDC ID token>', RS256 "
                 "signed by Google (keys by kid from https://www.googleapis.com/oauth2/v3/certs, here 'jwks'; "
                 "wrong_jwks is another key under the same kid). Check the signature, iss accounts.google.com "
                 "or https://accounts.google.com, aud = the audience set on the subscription (by default the "
                 "push endpoint URL: config.url), exp/iat (a token lives 1 h: iat at most 3600 s "
                 "old, exp plus the usual 300 s skew), and email = the subscription's service account with email_verified true: "
                 "config.secrets lists the accepted service-account emails (not secret, but the one list the "
                 "config has). Without the "
                 "email check any Google account could mint a token for this audience. The token does not "
                 "cover the body (the vector harness's changed-body check cannot pass: nothing signs the body). "
                 "Event id message.messageId (retries keep it); no event type "
                 "(message.attributes are the publisher's). An unwrapped (no-envelope) subscription is not "
                 "covered.",
        "config": config(secrets=[service_account], url=audience),
        "wrong_config": config(url="https://other.example.com/webhooks/pubsub"),
        "signs_timestamp": True,
        "signs_body": False,  # no byte of the body is signed (see the notes)
        "tolerance_secs": 300,
        "jwks": {kid: jwk(key, kid)},
        "wrong_jwks": {other_kid: jwk(other, other_kid)},
        "cases": [
            case("push message", signed(), body, url=audience,
                 expect={"kind": "event", "event_id": "9203470311174837", "event_type": None}),
        ],
    }


# --------------------------------------------------------------------------------------------- netlify
def netlify() -> dict:
    import jwt

    secret, other = "nfy-test-jws-secret-0123456789abcdef", "nfy-other-jws-secret-0123456789abcd"
    url = f"{HOOKS}/netlify"

    def check(tok: str, body: str, key: str) -> bool:
        try:
            claims = jwt.decode(tok, key, algorithms=["HS256"], issuer="netlify")
        except jwt.PyJWTError:
            return False
        return claims.get("sha256") == sha256_hex(body.encode())

    def signed(body: str, event: str) -> list:
        tok = jwt.encode({"iss": "netlify", "sha256": sha256_hex(body.encode())}, secret, algorithm="HS256")
        expect_true(check(tok, body, secret), "netlify")
        expect_false(check(tok, body, other), "netlify wrong secret")
        expect_false(check(tok, body + " ", secret), "netlify tampered body")
        return [["x-webhook-signature", tok], ["x-netlify-event", event], ["content-type", "application/json"],
                ["user-agent", "Netlify"]]

    def deploy(state: str, updated: str) -> str:
        did = "6553f0a0c3a1b2000812ab34"
        return compact({"id": did, "site_id": "fa4dd95a-994e-4f89-8a7a-2d9e9fc36a32", "build_id":
                        "6553f0a0c3a1b2000812ab32", "state": state, "name": "inbox-test",
                        "url": "https://inbox-test.netlify.app", "ssl_url": "https://inbox-test.netlify.app",
                        "admin_url": "https://app.netlify.com/sites/inbox-test",
                        "deploy_url": f"http://{did}--inbox-test.netlify.app",
                        "deploy_ssl_url": f"https://{did}--inbox-test.netlify.app",
                        "created_at": "2023-11-14T22:11:12.345Z", "updated_at": updated,
                        "user_id": "5ace049efdd72a6b9aa9539c", "error_message": None, "required": [],
                        "required_functions": [], "commit_ref": "3f2c1b0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b",
                        "review_id": None, "branch": "main",
                        "commit_url": "https://github.com/example/inbox-test/commit/"
                                      "3f2c1b0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b",
                        "skipped": None, "locked": None, "title": "Fix the café page", "review_url": None,
                        "published_at": updated if state == "ready" else None, "context": "production",
                        "deploy_time": 127 if state == "ready" else None, "available_functions": [],
                        "manual_deploy": False, "framework": "astro"})

    building = deploy("building", "2023-11-14T22:11:13.000Z")
    ready = deploy("ready", "2023-11-14T22:13:19.000Z")
    return {
        "provider": "netlify",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (Netlify has no verifying SDK); signed and checked with "
                     "PyJWT 2.15.1 (PyPI)",
        "docs": "https://docs.netlify.com/site-deploys/notifications/#payload-signature",
        "notes": "With a JWS secret token set on the outgoing webhook, Netlify sends X-Webhook-Signature: a JWT "
                 "(HS256, key = the secret token as UTF-8) whose claims are iss 'netlify' and sha256 = hex "
                 "SHA-256 of the raw body; no timestamp. The body is the deploy (or form submission) object. "
                 "Netlify sends no event id, and one deploy's events share its 'id', so the id is the sha256 "
                 "claim (the hash of what it signs: two events of one deploy differ in state). Type from the "
                 "X-Netlify-Event header (deploy_building, deploy_created, deploy_failed, ...): seen in "
                 "receivers' code, not on the docs page; treat as best effort (null if absent).",
        "config": config(secrets=[secret]),
        "wrong_config": config(secrets=[other]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": [
            case("deploy_building", signed(building, "deploy_building"), building, url=url,
                 expect={"kind": "event", "event_id": sha256_hex(building.encode()), "event_type": "deploy_building"}),
            case("deploy_created (succeeded)", signed(ready, "deploy_created"), ready, url=url,
                 expect={"kind": "event", "event_id": sha256_hex(ready.encode()), "event_type": "deploy_created"}),
        ],
    }


# --------------------------------------------------------------------------------------------- wise
def wise() -> dict:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    key, other = rsa_key("wise"), rsa_key("wise-other")
    url = f"{HOOKS}/wise"

    def check(k, body: str, sig: str) -> bool:
        try:
            k.public_key().verify(base64.b64decode(sig), body.encode(), padding.PKCS1v15(), hashes.SHA256())
            return True
        except InvalidSignature:
            return False

    def signed(body: str, delivery: str, test: bool = False) -> list:
        sig = b64(rsa_sign(key, body.encode()))
        expect_true(check(key, body, sig), "wise")
        expect_false(check(other, body, sig), "wise wrong key")
        h = [["x-signature-sha256", sig], ["x-delivery-id", delivery]]
        if test:
            h.append(["x-test-notification", "true"])
        return h + [["content-type", "application/json"]]

    state = compact({"data": {"resource": {"type": "transfer", "id": 48291037, "profile_id": 16781234,
                                           "account_id": 70054321},
                              "current_state": "outgoing_payment_sent", "previous_state": "processing",
                              "occurred_at": "2023-11-14T22:13:18Z"},
                     "subscription_id": "f2264fe5-a0f6-4ed1-9a7d-28a8c0d1f5a6", "event_type": "transfers#state-change",
                     "schema_version": "2.0.0", "sent_at": "2023-11-14T22:13:19Z"})
    deposit = compact({"data": {"resource": {"type": "balance-account", "id": 111, "profile_id": 16781234},
                                "transaction_type": "credit", "amount": 21.0, "currency": "EUR",
                                "post_transaction_balance_amount": 121.0, "occurred_at": "2023-11-14T22:13:17Z"},
                       "subscription_id": "01234567-89ab-cdef-0123-456789abcdef",
                       "event_type": "balances#credit", "schema_version": "2.0.0", "sent_at": "2023-11-14T22:13:19Z"})
    return {
        "provider": "wise",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (Wise publishes reference code, no registry package); "
                     "signed and checked with cryptography 43.0.3 (PKCS#1 v1.5, SHA-256)",
        "docs": "https://docs.wise.com/api-docs/features/webhooks-notifications/event-handling",
        "notes": "X-Signature-SHA256 is base64 SHA256withRSA (PKCS#1 v1.5) over the raw body, checked with Wise's "
                 "public key (PEM; Wise publishes one for production and one for sandbox, here a test key). No "
                 "timestamp. Event id X-Delivery-Id (a UUID per notification; the body has none), type body "
                 "'event_type'. X-Test-Notification: true marks a test delivery (still an event). Wise retries "
                 "up to 25 times over two weeks; answer 2xx within 5 s.",
        "config": config(public_key=public_pem(key)),
        "wrong_config": config(public_key=public_pem(other)),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": [
            case("transfers#state-change", signed(state, "8c7d3f52-1a9b-4e2c-9d0f-6b5a4c3e2d1f"), state, url=url,
                 expect={"kind": "event", "event_id": "8c7d3f52-1a9b-4e2c-9d0f-6b5a4c3e2d1f",
                         "event_type": "transfers#state-change"}),
            case("balances#credit, test notification",
                 signed(deposit, "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9", test=True), deposit, url=url,
                 expect={"kind": "event", "event_id": "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9",
                         "event_type": "balances#credit"}),
        ],
    }


# --------------------------------------------------------------------------------------------- azure-event-grid
def azure_event_grid() -> dict:
    secret, other = "aeg-test-query-key-6f1d2c3b4a5e", "aeg-other-query-key-0a9b8c7d6e5f"
    base = f"{HOOKS}/azure"
    url = f"{base}?code={secret}"
    topic = ("/subscriptions/5b4b650e-28b9-4790-b3ab-ddbd88d727c4/resourceGroups/inbox-test/providers/"
             "Microsoft.Storage/storageAccounts/inboxtest")

    def aeg_headers(kind: str, delivery: int = 0) -> list:
        return [["aeg-event-type", kind], ["aeg-subscription-name", "INBOX-TEST"],
                ["aeg-delivery-count", str(delivery)], ["aeg-data-version", "1"], ["aeg-metadata-version", "1"],
                ["content-type", "application/json; charset=utf-8"]]

    def blob_created(event_id: str, name: str, when: str) -> dict:
        return {"topic": topic, "subject": f"/blobServices/default/containers/uploads/blobs/{name}",
                "eventType": "Microsoft.Storage.BlobCreated", "id": event_id,
                "data": {"api": "PutBlob", "clientRequestId": "6d79dbfb-0e37-4fc4-981f-442c9ca65760",
                         "requestId": "831e1650-001e-001b-66ab-eeb76e000000",
                         "eTag": "0x8D4BCC2E4835CD0", "contentType": "text/plain", "contentLength": 524288,
                         "blobType": "BlockBlob", "url": f"https://inboxtest.blob.core.windows.net/uploads/{name}",
                         "sequencer": "00000000000004420000000000028963",
                         "storageDiagnostics": {"batchId": "b68529f3-68cd-4744-baa4-3c0498ec19f0"}},
                "dataVersion": "", "metadataVersion": "1", "eventTime": when}

    code = "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"
    validation = compact([{
        "id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66",
        "topic": "/subscriptions/5b4b650e-28b9-4790-b3ab-ddbd88d727c4/resourceGroups/inbox-test/providers/"
                 "Microsoft.EventGrid/topics/inbox-test",
        "subject": "", "data": {"validationCode": code,
                                "validationUrl": "https://rp-eastus2.eventgrid.azure.net:553/eventsubscriptions/"
                                                 f"inbox-test/validate?id={code}&t=2023-11-14T22:13:19.0000000Z"
                                                 "&apiVersion=2018-05-01-preview&token=1A1A1A1A"},
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent", "eventTime": "2023-11-14T22:13:19.0000000Z",
        "metadataVersion": "1", "dataVersion": "1"}])
    e1 = blob_created("831e1650-001e-001b-66ab-eeb76e069631", "a.txt", "2023-11-14T22:13:17.1234567Z")
    e2 = blob_created("831e1650-001e-001b-66ab-eeb76e069632", "b.txt", "2023-11-14T22:13:18.2345678Z")
    e3 = blob_created("831e1650-001e-001b-66ab-eeb76e069633", "c.txt", "2023-11-14T22:13:18.3456789Z")
    one, three = compact([e1]), compact([e1, e2, e3])
    items = lambda evs: [{"event_id": e["id"], "event_type": e["eventType"]} for e in evs]  # noqa: E731
    return {
        "provider": "azure-event-grid",
        "made_by": "docs",
        "made_with": "built from the documented delivery and validation formats (Event Grid does not sign "
                     "deliveries; no SDK verifies them)",
        "docs": "https://learn.microsoft.com/en-us/azure/event-grid/security-authentication",
        "notes": "Event Grid signs nothing. Of the documented ways to authenticate a webhook delivery, the one "
                 "that is a plain token is the client secret in the endpoint URL's query (docs: 'Using client "
                 "secret as a query parameter'): the subscription's URL is the receiver's URL plus ?code=SECRET "
                 "(the name this preset reads; the secret is secrets[], compared in constant time; never log the "
                 "query). Event Grid can instead send a static secret header via delivery properties "
                 "('Authorization: Bearer SECRET', last case), which this preset also accepts. Entra ID bearer "
                 "tokens would need a JWT preset. (aeg-sas-key is what a publisher sends TO Event Grid, not what "
                 "it sends to webhooks.) Event Grid schema: the body is a JSON array, one event per item, id "
                 "'id', type 'eventType'; header aeg-event-type Notification or SubscriptionValidation. "
                 "Validation handshake (authenticated like any delivery, never stored): the event "
                 "Microsoft.EventGrid.SubscriptionValidationEvent, answered 200 {\"validationResponse\": "
                 "data.validationCode}. The CloudEvents 1.0 schema is not covered: its handshake is an OPTIONS "
                 "request answered with a WebHook-Allowed-Origin header. Nothing signs the body, so the vector "
                 "harness's changed-body check cannot pass. Docs for the formats: "
                 "https://learn.microsoft.com/en-us/azure/event-grid/webhook-event-delivery",
        "config": config(secrets=[secret]),
        "wrong_config": config(secrets=[other]),
        "signs_timestamp": False,
        "signs_body": False,  # no byte of the body is signed (see the notes)
        "tolerance_secs": 300,
        "cases": [
            case("SubscriptionValidationEvent", aeg_headers("SubscriptionValidation"), validation, url=url,
                 expect={"kind": "handshake",
                         "answer": {"status": 200, "content_type": "application/json",
                                    "body": compact({"validationResponse": code})}}),
            case("one BlobCreated event", aeg_headers("Notification"), one, url=url,
                 expect={"kind": "batch", "items": items([e1])}),
            case("three BlobCreated events", aeg_headers("Notification", 1), three, url=url,
                 expect={"kind": "batch", "items": items([e1, e2, e3])}),
            case("delivery-property header instead of the query key",
                 [["authorization", f"Bearer {secret}"]] + aeg_headers("Notification"), one, url=base,
                 expect={"kind": "batch", "items": items([e1])}),
        ],
    }


# --------------------------------------------------------------------------------------------- main
def main() -> None:
    if "--new-keys" in sys.argv:
        new_keys()
    vectors = [discord(), sendgrid(), paypal(), aws_sns(), plaid(), google_pubsub(), netlify(), wise(),
               azure_event_grid()]
    for v in vectors:
        write_vector(v)
    if not (HERE / "node_modules").is_dir():
        fail("node_modules/ is missing: run `npm ci` in this folder (verify.mjs checks aws-sns, discord and "
             "sendgrid with their npm SDKs)")
    done = subprocess.run(["node", str(HERE / "verify.mjs")], cwd=HERE)
    if done.returncode != 0:
        fail("verify.mjs failed: an npm SDK refused a vector (see above)")


if __name__ == "__main__":
    main()
