#!/usr/bin/env python3
"""Test vectors for twilio, mailgun, postmark, mandrill, resend, telegram and line.

Every secret below is a made-up test value. Each vector is signed (or checked) with the provider's own
SDK where one exists on PyPI; the generator stops with an error if an SDK refuses what it is given.
Run it from anywhere: it rewrites ../../<provider>.json deterministically.
"""

import base64
import hashlib
import hmac
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qsl, quote, urlencode

VECTORS = Path(__file__).resolve().parents[2]


def fail(provider, what):
    sys.exit(f"generate.py: {provider}: the SDK refused the vector: {what}")


def write(provider, vector):
    path = VECTORS / f"{provider}.json"
    text = json.dumps(vector, indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.relative_to(VECTORS.parent)} ({len(vector['cases'])} cases)")


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def version(dist):
    from importlib.metadata import version as v

    return v(dist)


# --------------------------------------------------------------------------------------------- twilio
def twilio():
    from twilio.request_validator import HMAC_SHA256, RequestValidator, get_signature_algorithm
    from twilio.twiml.messaging_response import MessagingResponse

    auth_token = "9f3c2b7a41d85e60c1f4a2b3d6e7f809"
    shared_key = "tw_sharedkey_secret_TestOnly_5b8c1d"
    url = "https://hooks.example.com/webhooks/twilio"
    now = 1718000000
    # Twilio's own answer for "nothing to do": empty TwiML. A text/plain answer to an incoming message
    # would be sent back to the sender as a reply, so the answer matters.
    twiml = str(MessagingResponse())
    answer = {"status": 200, "content_type": "text/xml", "body": twiml}
    cases = []

    def form_case(name, params, token, idem, algorithm=None, settings=None):
        body = urlencode(params)  # application/x-www-form-urlencoded, as Twilio posts it
        received = dict(parse_qsl(body, keep_blank_values=True))  # what a server decodes
        validator = RequestValidator(token)
        signature = validator.compute_signature(url, received, algorithm)
        if get_signature_algorithm(settings) != (algorithm or "HMAC_SHA1"):
            fail("twilio", f"{name}: settings header names another algorithm")
        if not validator.validate(url, received, signature, get_signature_algorithm(settings)):
            fail("twilio", name)
        for other in ("0" * 32, "tw_sharedkey_other"):
            if RequestValidator(other).validate(url, received, signature, algorithm):
                fail("twilio", f"{name}: a wrong token verified")
        headers = [["x-twilio-signature", signature]]
        if settings:
            headers.append(["x-twilio-webhooks-signature-settings", settings])
        headers += [
            ["i-twilio-idempotency-token", idem],
            ["content-type", "application/x-www-form-urlencoded"],
        ]
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": headers,
                "body": body,
                "now": now,
                "expect": {"kind": "event", "event_id": idem, "event_type": None, "answer": answer},
            }
        )

    form_case(
        "incoming-sms",
        [
            ("ToCountry", "US"),
            ("ToState", "CA"),
            ("SmsMessageSid", "SM0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
            ("NumMedia", "0"),
            ("ToCity", "SAN FRANCISCO"),
            ("FromZip", "94107"),
            ("SmsSid", "SM0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
            ("FromState", "CA"),
            ("SmsStatus", "received"),
            ("FromCity", "SAN FRANCISCO"),
            ("Body", "Café at 8? Bring 2 & a half croissants :) 100%"),
            ("FromCountry", "US"),
            ("To", "+14155550100"),
            ("ToZip", "94105"),
            ("NumSegments", "1"),
            ("MessageSid", "SM0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
            ("AccountSid", "AC00000000000000000000000000000000"),
            ("From", "+14155550123"),
            ("ApiVersion", "2010-04-01"),
        ],
        auth_token,
        "0f6e4b1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b",
    )
    form_case(
        "message-status-callback",
        [
            ("SmsSid", "SMf1e2d3c4b5a69788796a5b4c3d2e1f00"),
            ("SmsStatus", "delivered"),
            ("MessageStatus", "delivered"),
            ("To", "+14155550123"),
            ("MessageSid", "SMf1e2d3c4b5a69788796a5b4c3d2e1f00"),
            ("AccountSid", "AC00000000000000000000000000000000"),
            ("From", "+14155550100"),
            ("ApiVersion", "2010-04-01"),
            ("ErrorCode", ""),
        ],
        auth_token,
        "7c2d9e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5",
    )
    form_case(
        "sharedkey-hmac-sha256",
        [
            ("CallSid", "CA5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"),
            ("CallStatus", "completed"),
            ("AccountSid", "AC00000000000000000000000000000000"),
            ("From", "+14155550123"),
            ("To", "+14155550100"),
            ("Direction", "inbound"),
            ("ApiVersion", "2010-04-01"),
        ],
        shared_key,
        "3b4c5d6e-7f80-4192-a3b4-c5d6e7f80912",
        algorithm=HMAC_SHA256,
        settings="key=webhooks_sharedkey_0000000000000000000000000000,algorithm=HMAC_SHA256",
    )

    # JSON bodies: Twilio adds bodySHA256 (hex SHA-256 of the raw body) to the URL and signs the URL alone.
    body = compact(
        {
            "account_sid": "AC00000000000000000000000000000000",
            "event_type": "com.twilio.messaging.message.delivered",
            "data": {"messageSid": "SMabcdef0123456789abcdef0123456789", "to": "+14155550123"},
        }
    )
    validator = RequestValidator(auth_token)
    signed_url = f"{url}?bodySHA256={validator.compute_hash(body)}"
    signature = validator.compute_signature(signed_url, {})
    if not validator.validate(signed_url, body, signature):
        fail("twilio", "json-body")
    if validator.validate(signed_url, body.replace("delivered", "failed"), signature):
        fail("twilio", "json-body: a changed body verified")
    idem = "9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a"
    cases.append(
        {
            "name": "json-body-bodySHA256",
            "method": "POST",
            "url": signed_url,
            "headers": [
                ["x-twilio-signature", signature],
                ["i-twilio-idempotency-token", idem],
                ["content-type", "application/json"],
            ],
            "body": body,
            "now": now,
            "expect": {"kind": "event", "event_id": idem, "event_type": None, "answer": answer},
        }
    )

    write(
        "twilio",
        {
            "provider": "twilio",
            "made_by": "sdk",
            "made_with": f"twilio {version('twilio')} (PyPI): RequestValidator.compute_signature, "
            "compute_hash and validate; twiml.MessagingResponse for the answer",
            "docs": "https://www.twilio.com/docs/usage/webhooks/webhooks-security",
            "config": {
                "secrets": [auth_token, shared_key],
                "public_key": None,
                "url": url,
                "verify_token": None,
            },
            "wrong_config": {"secrets": ["0" * 32, "tw_sharedkey_other"], "url": url},
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Signed string: the full URL Twilio called (config.url plus the request's query string) "
            "followed by every POST parameter, sorted by name, as name+value with no separators; "
            "HMAC-SHA1 with the Auth Token, base64. With X-Twilio-Webhooks-Signature-Settings "
            "(algorithm=HMAC_SHA256) the hash is SHA-256 and the key is that Webhook Rule's SharedKey "
            "secret (config.secrets[1] here). JSON bodies: no parameters; the URL carries bodySHA256 = hex "
            "SHA-256 of the raw body, which must match too. No event id in the body: the id is the "
            "I-Twilio-Idempotency-Token header (the same on Twilio's retries). The SDK also accepts the URL "
            "with the default port added (:443). The answer is empty TwiML so that Twilio sends no reply.",
            "cases": cases,
        },
    )


# -------------------------------------------------------------------------------------------- mailgun
def mailgun():
    from mailgun.security import SecurityGuard

    key = "f7c1a0e2b9d84c3a5e6f70812a3b4c5d-5e6f7a8b-9c0d1e2f"
    parent_key = "0a1b2c3d4e5f60718293a4b5c6d7e8f9-1a2b3c4d-5e6f7a8b"  # the parent account's key
    sub_key = "subaccount-key-not-configured-0000000000000000000"
    url = "https://hooks.example.com/webhooks/mailgun"
    tolerance = 900

    def sign(k, timestamp, token):
        return hmac.new(k.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()

    def check(name, k, timestamp, token, signature, now):
        with mock.patch("mailgun.security.time.time", return_value=float(now)):
            if not SecurityGuard.verify_webhook(k, token, timestamp, signature, max_age_seconds=tolerance):
                fail("mailgun", name)
            if SecurityGuard.verify_webhook("wrong-" + k, token, timestamp, signature, tolerance):
                fail("mailgun", f"{name}: a wrong key verified")
        with mock.patch("mailgun.security.time.time", return_value=float(now + tolerance + 1)):
            if SecurityGuard.verify_webhook(k, token, timestamp, signature, max_age_seconds=tolerance):
                fail("mailgun", f"{name}: a stale delivery verified")

    cases = []

    def case(name, timestamp, token, event_data, subaccount=False):
        now = int(timestamp) + 2
        if subaccount:
            signature = {
                "token": token,
                "timestamp": timestamp,
                "signature": sign(sub_key, timestamp, token),
                "parent-signature": sign(parent_key, timestamp, token),
            }
            check(name, parent_key, timestamp, token, signature["parent-signature"], now)
        else:
            signature = {"token": token, "timestamp": timestamp, "signature": sign(key, timestamp, token)}
            check(name, key, timestamp, token, signature["signature"], now)
        body = json.dumps({"signature": signature, "event-data": event_data}, indent=2, ensure_ascii=False)
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["content-type", "application/json"], ["user-agent", "mailgun/treq-16.12.0"]],
                "body": body,
                "now": now,
                # Mailgun keeps an id unique within a day only: the id is it with the event's timestamp.
                "expect": {"kind": "event", "event_id": f"{event_data['id']}:{json.dumps(event_data['timestamp'])}",
                           "event_type": event_data["event"]},
            }
        )

    case(
        "delivered",
        "1718100000",
        "c0ffee5e9b1a2d3c4e5f60718293a4b5c6d7e8f90a1b2c3d4e",
        {
            "id": "CPgfbmQMTCKtHW6uIWtuVe",
            "timestamp": 1718099998.412305,
            "log-level": "info",
            "event": "delivered",
            "delivery-status": {"code": 250, "message": "OK", "description": "", "attempt-no": 1},
            "envelope": {"sender": "bob@mg.example.com", "targets": "alice@example.org", "transport": "smtp"},
            "message": {
                "headers": {
                    "to": "Alice <alice@example.org>",
                    "message-id": "20240611100000.1.ABCDEF@mg.example.com",
                    "from": "Bob <bob@mg.example.com>",
                    "subject": "Votre reçu n°42",
                },
                "size": 1536,
            },
            "recipient": "alice@example.org",
            "recipient-domain": "example.org",
            "tags": ["receipt"],
            "user-variables": {"order": "42"},
        },
    )
    case(
        "failed-permanent",
        "1718100300",
        "9a8b7c6d5e4f30211203f4e5d6c7b8a90f1e2d3c4b5a697887",
        {
            "id": "G9Bn5sl1TC6nu79C8C0bwg",
            "timestamp": 1718100299.129874,
            "log-level": "error",
            "event": "failed",
            "severity": "permanent",
            "reason": "suppress-bounce",
            "delivery-status": {"code": 605, "message": "", "description": "Not delivering to previously bounced address", "attempt-no": 1},
            "recipient": "nobody@example.net",
            "recipient-domain": "example.net",
            "message": {"headers": {"message-id": "20240611100500.2.FEDCBA@mg.example.com"}},
        },
    )
    case(
        "subaccount-parent-signature",
        "1718100600",
        "5f4e3d2c1b0a99887766554433221100ffeeddccbbaa998877",
        {
            "id": "hK7mN2pQ4rS6tU8vW0xY1z",
            "timestamp": 1718100598.5,
            "log-level": "info",
            "event": "opened",
            "recipient": "carol@example.com",
            "recipient-domain": "example.com",
            "message": {"headers": {"message-id": "20240611101000.3.ABC123@sub.mg.example.com"}},
        },
        subaccount=True,
    )

    write(
        "mailgun",
        {
            "provider": "mailgun",
            "made_by": "sdk",
            "made_with": f"mailgun {version('mailgun')} (PyPI, mailgun/mailgun-python): "
            "SecurityGuard.verify_webhook (signatures built from the documented algorithm, then verified)",
            "docs": "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks",
            "config": {
                "secrets": [key, parent_key],
                "public_key": None,
                "url": None,
                "verify_token": None,
            },
            "wrong_config": {"secrets": ["e3b0c44298fc1c149afbf4c8996fb924-27ae41e4-649b934c"]},
            "signs_timestamp": True,
            "signs_body": False,  # no byte of the body is signed (see the notes)
            "tolerance_secs": tolerance,
            "notes": "The signature is in the JSON body: signature.{timestamp, token, signature}; signature = hex "
            "HMAC-SHA256(webhook signing key, timestamp + token), the strings concatenated. The body itself "
            "is not signed. Subaccount events add signature.parent-signature, the same HMAC with the parent "
            "account's key: a receiver holding the parent's key verifies that one (case 3: 'signature' is "
            "made with a subaccount key not configured here). Mailgun's docs call the timestamp check "
            "optional and warn against a strict window; 900 s is the SDK's default max_age_seconds. Id: "
            "event-data.id; type: event-data.event. Mailgun suggests refusing a token seen before.",
            "cases": cases,
        },
    )


# ------------------------------------------------------------------------------------------- postmark
def postmark():
    creds = "inbox-hooks:Pm-test-9c1f2e3d4b5a"
    url = "https://hooks.example.com/webhooks/postmark"
    now = 1718200000
    basic = "Basic " + base64.b64encode(creds.encode()).decode()
    cases = []
    for name, record in [
        (
            "delivery",
            {
                "RecordType": "Delivery",
                "ServerID": 23,
                "MessageStream": "outbound",
                "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
                "Recipient": "john@example.com",
                "Tag": "welcome-email",
                "DeliveredAt": "2024-06-12T13:46:38Z",
                "Details": "Test delivery webhook details",
                "Metadata": {"example": "value", "example_2": "value"},
            },
        ),
        (
            "bounce",
            {
                "RecordType": "Bounce",
                "ID": 42,
                "Type": "HardBounce",
                "TypeCode": 1,
                "Name": "Hard bounce",
                "Tag": "Test",
                "MessageID": "00000000-0000-0000-0000-000000000000",
                "ServerID": 23,
                "MessageStream": "outbound",
                "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
                "Details": "Test bounce details",
                "Email": "john@example.com",
                "From": "sender@example.com",
                "BouncedAt": "2024-06-12T13:47:00Z",
                "DumpAvailable": True,
                "Inactive": True,
                "CanActivate": True,
                "Subject": "Test subject",
                "Content": "",
                "Metadata": {"a_key": "a_value"},
            },
        ),
    ]:
        body = json.dumps(record, indent=2)
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["authorization", basic], ["content-type", "application/json"]],
                "body": body,
                "now": now,
                "expect": {"kind": "event", "event_id": sha256_hex(body), "event_type": record["RecordType"]},
            }
        )
    write(
        "postmark",
        {
            "provider": "postmark",
            "made_by": "docs",
            "made_with": "https://postmarkapp.com/developer/webhooks/webhooks-overview (Basic HTTP authentication); "
            "bodies modelled on the examples of https://postmarkapp.com/developer/webhooks/delivery-webhook and "
            "https://postmarkapp.com/developer/webhooks/bounce-webhook",
            "docs": "https://postmarkapp.com/developer/webhooks/webhooks-overview",
            "config": {"secrets": [creds], "public_key": None, "url": None, "verify_token": None},
            "wrong_config": {"secrets": ["inbox-hooks:wrong-password"]},
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Postmark signs nothing: the user puts Basic credentials in the webhook URL "
            "(https://user:pass@host/path) and Postmark sends them as Authorization: Basic. Neither the "
            "official postmark (npm) nor postmarker (PyPI) verifies webhooks. No event id is sent (MessageID "
            "is shared by all events of a message; Bounce has its own numeric ID): the id is the hex SHA-256 "
            "of the body. Type: RecordType (Delivery, Bounce, SpamComplaint, Open, Click, SubscriptionChange; "
            "inbound-message webhooks carry no RecordType). Postmark can also send custom HTTP headers, which "
            "fits the generic token scheme instead.",
            "cases": cases,
        },
    )


# ------------------------------------------------------------------------------------------- mandrill
def mandrill():
    key = "Mx7pQ2rS9tU4vW1yZ3aB5c"
    url = "https://hooks.example.com/webhooks/mandrill?source=transactional"
    now = 1718300000

    def signature(k, params):
        signed = url + "".join(name + value for name, value in sorted(params.items()))
        return base64.b64encode(hmac.new(k.encode(), signed.encode(), hashlib.sha1).digest()).decode()

    cases = []

    def post(name, items, k, expect):
        # the exact JSON of each item as it appears in the array (Mandrill escapes '/' as '\/')
        array = "[" + ",".join(items) + "]"
        body = "mandrill_events=" + quote(array, safe="")
        params = dict(parse_qsl(body, keep_blank_values=True))
        if params["mandrill_events"] != array:
            fail("mandrill", f"{name}: form round trip")
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [
                    ["x-mandrill-signature", signature(k, params)],
                    ["content-type", "application/x-www-form-urlencoded"],
                    ["user-agent", "Mandrill-Webhook/1.0"],
                ],
                "body": body,
                "now": now,
                "expect": expect,
            }
        )

    def msg(event, _id, ts, extra):
        m = {
            "ts": ts - 5,
            "subject": "Your order has shipped",
            "email": "kate@example.com",
            "sender": "shop@example.com",
            "tags": ["shipping"],
            "state": "sent",
            "metadata": {"user_id": "111"},
            "_id": _id,
            "_version": "exampleaaaaaaaaaaaaaaa",
        }
        return {"event": event, "msg": m, "_id": _id, "ts": ts, **extra}

    def text(obj):
        return compact(obj).replace("/", "\\/")

    send = text(msg("send", "a1b2c3d4e5f60718293a4b5c6d7e8f90", 1718299900, {}))
    opened = text(
        msg("open", "a1b2c3d4e5f60718293a4b5c6d7e8f90", 1718299950,
            {"ip": "192.0.2.10", "user_agent": "Mozilla/5.0 (X11; Linux x86_64)", "location": None})
    )
    click = text(
        msg("click", "a1b2c3d4e5f60718293a4b5c6d7e8f90", 1718299970,
            {"ip": "192.0.2.10", "url": "https://shop.example.com/orders/42?utm=mail"})
    )
    deny = text(
        {
            "type": "blacklist",
            "action": "add",
            "reject": {
                "reason": "hard-bounce",
                "detail": "550 mailbox does not exist",
                "last_event_at": "2024-06-13 17:31:00",
                "email": "gone@example.net",
                "created_at": "2024-06-13 17:31:00",
                "expires_at": "2024-12-13 17:31:00",
                "expired": False,
                "subaccount": None,
                "sender": None,
            },
            "ts": 1718299980,
        }
    )

    def item(raw, event_type):
        return {"event_id": sha256_hex(raw), "event_type": event_type}

    post(
        "batch-message-and-sync-events",
        [send, opened, click, deny],
        key,
        {
            "kind": "batch",
            "items": [item(send, "send"), item(opened, "open"), item(click, "click"), item(deny, "blacklist")],
        },
    )
    bounce = msg("hard_bounce", "f0e1d2c3b4a5968778695a4b3c2d1e0f", 1718299990, {})
    bounce["msg"].update({"state": "bounced", "bounce_description": "bad_mailbox", "diag": "smtp;550 5.1.1"})
    hard = text(bounce)
    post("single-event", [hard], key, {"kind": "batch", "items": [item(hard, "hard_bounce")]})
    # When a webhook is added: a HEAD first; if that does not answer 200, an empty POST signed with the
    # generic key 'test-webhook'. Neither carries an event.
    post(
        "add-webhook-check-post",
        [],
        "test-webhook",
        {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": ""}},
    )
    cases.append(
        {
            "name": "add-webhook-check-head",
            "method": "HEAD",
            "url": url,
            "headers": [["user-agent", "Mandrill-Webhook/1.0"]],
            "body": "",
            "now": now,
            "expect": {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": ""}},
        }
    )
    write(
        "mandrill",
        {
            "provider": "mandrill",
            "made_by": "docs",
            "made_with": "https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/"
            "#authenticating-webhook-requests (algorithm; no SDK verifies: mailchimp-transactional 1.4.1 on "
            "PyPI and @mailchimp/mailchimp_transactional 1.4.1 on npm have no webhook helper)",
            "docs": "https://mailchimp.com/developer/transactional/docs/webhooks/",
            "config": {"secrets": [key], "public_key": None, "url": url, "verify_token": None},
            "wrong_config": {"secrets": ["Zz9yX8wV7uT6sR5qP4oN3m"], "url": url},
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "X-Mandrill-Signature = base64 HMAC-SHA1(webhook key, URL exactly as registered (config.url, "
            "query included) + each POST variable sorted by name as name+value, no separators). The only "
            "variable is mandrill_events, a JSON array of up to 1000 events: a batch. Events carry no unique "
            "id (_id is the message's id, shared by its send/open/click; sync events have none), so each "
            "item's id is the hex SHA-256 of that item's exact JSON text inside the decoded array (its raw "
            "span, '\\/' escapes kept). Type: 'event' (message and inbound events), else 'type' (sync "
            "events: blacklist/whitelist). Handshakes: adding a webhook sends HEAD (answer 200), and if that "
            "fails an empty POST (mandrill_events=[]) signed with the generic key 'test-webhook': both are "
            "answered 200 and stored never, whatever key is configured.",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------------------------- resend
def resend():
    import resend as resend_sdk
    from svix.webhooks import Webhook

    secret = "whsec_" + base64.b64encode(bytes(range(1, 25))).decode()
    other = "whsec_" + base64.b64encode(bytes(range(101, 125))).decode()
    retired = "whsec_" + base64.b64encode(bytes(range(201, 225))).decode()  # configured nowhere
    url = "https://hooks.example.com/webhooks/resend"
    cases = []

    def case(name, msg_id, ts, event, extra_signature=None):
        body = compact(event)
        signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body)
        if extra_signature:
            signature = f"{Webhook(retired).sign(msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body)} {signature}"
        headers = {"id": msg_id, "timestamp": str(ts), "signature": signature}
        with mock.patch("resend.webhooks._webhooks.time.time", return_value=float(ts + 1)):
            got = resend_sdk.Webhooks.verify({"payload": body, "headers": headers, "webhook_secret": secret})
            if got.get("type") != event["type"]:
                fail("resend", name)
            try:
                resend_sdk.Webhooks.verify({"payload": body, "headers": headers, "webhook_secret": "whsec_" + base64.b64encode(b"x" * 24).decode()})
                fail("resend", f"{name}: a wrong secret verified")
            except ValueError:
                pass
        with mock.patch("resend.webhooks._webhooks.time.time", return_value=float(ts + 301)):
            try:
                resend_sdk.Webhooks.verify({"payload": body, "headers": headers, "webhook_secret": secret})
                fail("resend", f"{name}: a stale delivery verified")
            except ValueError:
                pass
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [
                    ["svix-id", msg_id],
                    ["svix-timestamp", str(ts)],
                    ["svix-signature", signature],
                    ["content-type", "application/json"],
                ],
                "body": body,
                "now": ts + 1,
                "expect": {"kind": "event", "event_id": msg_id, "event_type": event["type"]},
            }
        )

    case(
        "email.delivered",
        "msg_2hKx9mVb3QwErTyUiOpAsDfGhJk",
        1718400000,
        {
            "type": "email.delivered",
            "created_at": "2024-06-14T21:20:00.000Z",
            "data": {
                "created_at": "2024-06-14T21:19:58.000Z",
                "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
                "from": "Acme <onboarding@resend.dev>",
                "to": ["delivered@resend.dev"],
                "subject": "Bienvenue, Zoë",
            },
        },
    )
    case(
        "email.bounced-two-signatures",
        "msg_2hKxA1B2C3D4E5F6G7H8I9J0KlM",
        1718400600,
        {
            "type": "email.bounced",
            "created_at": "2024-06-14T21:30:00.000Z",
            "data": {
                "created_at": "2024-06-14T21:29:57.000Z",
                "email_id": "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b",
                "from": "Acme <onboarding@resend.dev>",
                "to": ["bounced@resend.dev"],
                "subject": "Your receipt",
                "bounce": {"message": "The recipient's mailbox does not exist.", "subType": "General", "type": "Permanent"},
            },
        },
        extra_signature=True,
    )
    write(
        "resend",
        {
            "provider": "resend",
            "made_by": "sdk",
            "made_with": f"svix {version('svix')} (PyPI): Webhook.sign; resend {version('resend')} (PyPI): "
            "Webhooks.verify",
            "docs": "https://resend.com/docs/webhooks/verify-webhooks-requests",
            "config": {"secrets": [secret], "public_key": None, "url": None, "verify_token": None},
            "wrong_config": {"secrets": [other]},
            "signs_timestamp": True,
            "tolerance_secs": 300,
            "notes": "Svix: svix-signature holds space-separated 'v1,<base64 HMAC-SHA256>' over "
            "'{svix-id}.{svix-timestamp}.{body}', keyed with the base64 after 'whsec_'; any listed signature "
            "may match (case 2 lists first a signature by a key configured nowhere). Id: svix-id; type: body 'type'.",
            "cases": cases,
        },
    )


# ------------------------------------------------------------------------------------------- telegram
def telegram():
    token = "tg_Secret-Token_4f9a2c7e1b"
    url = "https://hooks.example.com/webhooks/telegram"
    now = 1718500000
    cases = []
    for name, update, kind in [
        (
            "message",
            {
                "update_id": 734852001,
                "message": {
                    "message_id": 1365,
                    "from": {"id": 111111111, "is_bot": False, "first_name": "Zoë", "language_code": "fr"},
                    "chat": {"id": 111111111, "first_name": "Zoë", "type": "private"},
                    "date": 1718499998,
                    "text": "/start hello",
                    "entities": [{"offset": 0, "length": 6, "type": "bot_command"}],
                },
            },
            "message",
        ),
        (
            "callback_query",
            {
                "update_id": 734852002,
                "callback_query": {
                    "id": "4382bfdwdsb323b2d9",
                    "from": {"id": 111111111, "is_bot": False, "first_name": "Zoë"},
                    "message": {
                        "message_id": 1366,
                        "chat": {"id": 111111111, "type": "private"},
                        "date": 1718499999,
                        "text": "Pick one",
                    },
                    "chat_instance": "-8123456789012345678",
                    "data": "choice:2",
                },
            },
            "callback_query",
        ),
    ]:
        body = compact(update)
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["x-telegram-bot-api-secret-token", token], ["content-type", "application/json"]],
                "body": body,
                "now": now,
                "expect": {"kind": "event", "event_id": str(update["update_id"]), "event_type": kind},
            }
        )
    write(
        "telegram",
        {
            "provider": "telegram",
            "made_by": "docs",
            "made_with": "https://core.telegram.org/bots/api#setwebhook (secret_token) and "
            "https://core.telegram.org/bots/api#update; Telegram publishes no SDK of its own",
            "docs": "https://core.telegram.org/bots/api#setwebhook",
            "config": {"secrets": [token], "public_key": None, "url": None, "verify_token": None},
            "wrong_config": {"secrets": ["tg_Secret-Token_other"]},
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Nothing is signed: setWebhook's secret_token (1-256 chars of A-Z a-z 0-9 _ -) comes back "
            "as is in X-Telegram-Bot-Api-Secret-Token, compared in constant time. Id: update_id (an integer); "
            "type: the one field of the Update besides update_id (message, edited_message, callback_query, "
            "...). A bot answers 2XX; Telegram retries anything else.",
            "cases": cases,
        },
    )


# ----------------------------------------------------------------------------------------------- line
def line():
    from linebot.v3 import WebhookParser
    from linebot.v3.exceptions import InvalidSignatureError

    secret = "8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5"
    url = "https://hooks.example.com/webhooks/line"
    destination = "U0123456789abcdef0123456789abcdef"
    cases = []

    def sign(body):
        return base64.b64encode(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()).decode()

    def case(name, events, now, expect):
        body = compact({"destination": destination, "events": events})
        signature = sign(body)
        parsed = WebhookParser(secret).parse(body, signature)
        if [e.webhook_event_id for e in parsed] != [e["webhookEventId"] for e in events]:
            fail("line", name)
        try:
            WebhookParser("f" * 32).parse(body, signature)
            fail("line", f"{name}: a wrong secret verified")
        except InvalidSignatureError:
            pass
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["x-line-signature", signature], ["content-type", "application/json; charset=utf-8"]],
                "body": body,
                "now": now,
                "expect": expect,
            }
        )

    source = {"type": "user", "userId": "U4af4980629abcdef0123456789abcdef"}
    message = {
        "type": "message",
        "message": {"type": "text", "id": "468789577898262530", "quoteToken": "q3Plxr4AgKd", "text": "こんにちは 👋"},
        "webhookEventId": "01H810YECXQQZ37VAXPF6H9E6T",
        "deliveryContext": {"isRedelivery": False},
        "timestamp": 1718600000123,
        "source": source,
        "replyToken": "38ef843bde154d9b91c21320ffd17a0f",
        "mode": "active",
    }
    follow = {
        "type": "follow",
        "follow": {"isUnblocked": False},
        "webhookEventId": "01H810YECXQQZ37VAXPF6H9E6U",
        "deliveryContext": {"isRedelivery": True},
        "timestamp": 1718600000456,
        "source": source,
        "replyToken": "85cbe770fa8b4f45bbe077b1d4be4a36",
        "mode": "active",
    }
    postback = {
        "type": "postback",
        "postback": {"data": "action=buy&itemid=111"},
        "webhookEventId": "01H810YECXQQZ37VAXPF6H9E6V",
        "deliveryContext": {"isRedelivery": False},
        "timestamp": 1718600001000,
        "source": source,
        "replyToken": "b60d432864f44d079f6d8efe86cf404b",
        "mode": "active",
    }

    def item(e):
        return {"event_id": e["webhookEventId"], "event_type": e["type"]}

    case("batch-message-follow", [message, follow], 1718600002, {"kind": "batch", "items": [item(message), item(follow)]})
    case("single-postback", [postback], 1718600002, {"kind": "batch", "items": [item(postback)]})
    # The console's "Verify" button posts a signed body with no events.
    case(
        "verify-button",
        [],
        1718600002,
        {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": ""}},
    )
    write(
        "line",
        {
            "provider": "line",
            "made_by": "sdk",
            "made_with": f"line-bot-sdk {version('line-bot-sdk')} (PyPI): linebot.v3.WebhookParser.parse "
            "(signatures built from the documented algorithm, then verified and parsed)",
            "docs": "https://developers.line.biz/en/docs/messaging-api/verify-webhook-signature/",
            "config": {"secrets": [secret], "public_key": None, "url": None, "verify_token": None},
            "wrong_config": {"secrets": ["f" * 32]},
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "x-line-signature = base64 HMAC-SHA256(channel secret as UTF-8 text, raw body). The body is "
            "{destination, events[]}: a batch; each event's id is webhookEventId (a ULID, the same on "
            "redelivery, deliveryContext.isRedelivery true), type its 'type'. The console's Verify button "
            "sends a signed body whose events[] is empty: answer 200, store nothing.",
            "cases": cases,
        },
    )


if __name__ == "__main__":
    for make in (twilio, mailgun, postmark, mandrill, resend, telegram, line):
        make()
