#!/usr/bin/env python3
"""Rewrites the batch-b provider vectors in tests/vectors/ (all but chargebee.json, which generate.mjs writes).

Every key, timestamp and body is fixed, so a run rewrites the same bytes. Where the provider's own SDK signs
(Adyen, Braintree), the SDK makes the signature; where it only verifies (Square, Paddle, Razorpay, GoCardless),
the signature is built here from the documented algorithm and the SDK must accept it, refuse the wrong key and,
where the timestamp is signed, refuse a stale one. Any refusal stops the run with an error. Checkout.com, Lemon
Squeezy and Recurly have no verifying package on PyPI or npm: their vectors follow the documented algorithm.

Run: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -r requirements.txt && /tmp/venv/bin/python generate.py
"""

import base64
import datetime
import hashlib
import hmac
import json
import sys
import urllib.parse
from importlib.metadata import version
from pathlib import Path

VECTORS = Path(__file__).resolve().parents[2]

# 2026-01-01T00:00:00Z; each provider signs at its own offset from it.
T0 = 1767225600


class GeneratorError(Exception):
    pass


def check(condition, message):
    if not condition:
        raise GeneratorError(message)


def compact(value):
    """A JSON body the way most senders write it: no spaces, keys in the given order, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def hmac_hex(key: bytes, message: bytes, digest=hashlib.sha256) -> str:
    return hmac.new(key, message, digest).hexdigest()


def hmac_b64(key: bytes, message: bytes, digest=hashlib.sha256) -> str:
    return base64.b64encode(hmac.new(key, message, digest).digest()).decode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config(secrets, public_key=None, url=None, verify_token=None):
    return {"secrets": secrets, "public_key": public_key, "url": url, "verify_token": verify_token}


def write(vector):
    path = VECTORS / f"{vector['provider']}.json"
    path.write_text(json.dumps(vector, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.name}: {len(vector['cases'])} case(s), made by {vector['made_by']}")


# ---------------------------------------------------------------------------------------------------------------
# Square: base64 HMAC-SHA256 over notification URL + raw body; squareup WebhooksHelper verifies.
def square():
    from square.utils.webhooks_helper import verify_signature

    key = "Tq9mWc3vXb7LrN2kPz5hYd"
    wrong = "Hs4nJf8aQe1uVg6tKo0wBy"
    url = "https://hooks.example.com/webhooks/square?source=inbox"
    ts = T0 + 100
    cases = []
    for name, body_obj in [
        (
            "payment.updated",
            {
                "merchant_id": "6SSW7HV8K2ST5",
                "type": "payment.updated",
                "event_id": "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
                "created_at": "2026-01-01T00:01:40.553Z",
                "data": {
                    "type": "payment",
                    "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY",
                    "object": {
                        "payment": {
                            "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY",
                            "amount_money": {"amount": 1850, "currency": "EUR"},
                            "note": "Café crème ×2",
                            "status": "COMPLETED",
                            "version": 3,
                        }
                    },
                },
            },
        ),
        (
            "customer.created",
            {
                "merchant_id": "6SSW7HV8K2ST5",
                "type": "customer.created",
                "event_id": "a1d3a0f4-6f5c-4c3c-9a77-1c2b8f0e5d21",
                "created_at": "2026-01-01T00:01:41.010Z",
                "data": {
                    "type": "customer",
                    "id": "JDKYHBWT1D4F8MFH63DBMEN8Y4",
                    "object": {"customer": {"id": "JDKYHBWT1D4F8MFH63DBMEN8Y4", "given_name": "Amélie"}},
                },
            },
        ),
    ]:
        body = compact(body_obj)
        signature = hmac_b64(key.encode(), (url + body).encode())
        check(
            verify_signature(request_body=body, signature_header=signature, signature_key=key, notification_url=url),
            "square: squareup refused the signature",
        )
        check(
            not verify_signature(request_body=body, signature_header=signature, signature_key=wrong, notification_url=url),
            "square: squareup accepted the wrong key",
        )
        check(
            not verify_signature(
                request_body=body, signature_header=signature, signature_key=key, notification_url=url + "&x=1"
            ),
            "square: squareup accepted another URL",
        )
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [
                    ["x-square-hmacsha256-signature", signature],
                    ["content-type", "application/json"],
                    ["square-environment", "Production"],
                    ["square-initial-delivery-timestamp", "2026-01-01T00:01:40.612Z"],
                    ["square-retry-number", "0"],
                ],
                "body": body,
                "now": ts,
                "expect": {"kind": "event", "event_id": body_obj["event_id"], "event_type": body_obj["type"]},
            }
        )
    write(
        {
            "provider": "square",
            "made_by": "sdk",
            "made_with": f"squareup {version('squareup')} (PyPI): square.utils.webhooks_helper.verify_signature",
            "docs": "https://developer.squareup.com/docs/webhooks/step3validate",
            "config": config([key], url=url),
            "wrong_config": config([wrong], url=url),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Signature: base64 HMAC-SHA256, key = the subscription's signature key as UTF-8 bytes, message = "
            "notification URL exactly as registered + raw body. No timestamp is signed. The legacy "
            "x-square-signature (HMAC-SHA1) header is not used. Id = body event_id, type = body type.",
            "cases": cases,
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Paddle Billing: Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256("<ts>:<body>")>[;h1=...]; 5 s tolerance.
def paddle():
    from paddle_billing.Notifications import PaddleSignature, Secret, Verifier

    verifier_module = sys.modules["paddle_billing.Notifications.Verifier"]

    key = "pdl_ntfset_01jg6v3tq8c2k4m9x0r5w7y1zb_Vq3XoPz8LmN4tR6sKc1WbYd0HjE2uFaG"
    wrong = "pdl_ntfset_01jg6v3tq8c2k4m9x0r5w7y1zb_Ab9CdE8fGh7IjK6lMn5OpQ4rSt3UvW2x"
    other_rotated = "pdl_ntfset_01jg6v3tq8c2k4m9x0r5w7y1zb_OldOldOldOldOldOldOldOldOldOld00"
    url = "https://hooks.example.com/webhooks/paddle"

    class Request:
        def __init__(self, body: str, header: str):
            self.body = body.encode("utf-8")
            self.headers = {"Paddle-Signature": header}

    def verify_at(now, request, secret):
        saved = verifier_module.time
        verifier_module.time = lambda: now
        try:
            return Verifier().verify(request, Secret(secret))
        finally:
            verifier_module.time = saved

    cases = []
    for name, ts, body_obj, rotated in [
        (
            "transaction.completed",
            T0 + 200,
            {
                "event_id": "evt_01jg6v4b3m5n7p9q1r3s5t7v9w",
                "event_type": "transaction.completed",
                "occurred_at": "2026-01-01T00:03:20.000000Z",
                "notification_id": "ntf_01jg6v4b3xk2m4n6p8q0r2s4t6",
                "data": {
                    "id": "txn_01jg6v3zc8e0g2j4l6n8q0s2u4",
                    "status": "completed",
                    "customer_id": "ctm_01jg6v3y7a9b1c3d5e7f9g1h3j",
                    "currency_code": "EUR",
                    "details": {"totals": {"total": "1190", "tax": "190"}},
                },
            },
            False,
        ),
        (
            "subscription.created, two h1 during secret rotation",
            T0 + 201,
            {
                "event_id": "evt_01jg6v4c8p0r2t4v6x8z0b2d4f",
                "event_type": "subscription.created",
                "occurred_at": "2026-01-01T00:03:21.000000Z",
                "notification_id": "ntf_01jg6v4c8yq1s3u5w7y9a1c3e5",
                "data": {"id": "sub_01jg6v3zq4s6u8w0y2a4c6e8g0", "status": "active", "currency_code": "EUR"},
            },
            True,
        ),
    ]:
        body = compact(body_obj)
        signed = f"{ts}:{body}".encode()
        h1 = hmac_hex(key.encode(), signed)
        header = f"ts={ts};h1={h1}"
        if rotated:
            header = f"ts={ts};h1={hmac_hex(other_rotated.encode(), signed)};h1={h1}"
        request = Request(body, header)
        now = ts + 2
        check(verify_at(now, request, key), f"paddle: SDK refused {name}")
        check(not verify_at(now, request, wrong), "paddle: SDK accepted the wrong key")
        check(not verify_at(ts + 6, request, key), "paddle: SDK accepted a stale timestamp")
        check(not verify_at(ts - 6, request, key), "paddle: SDK accepted a timestamp from the future")
        check(PaddleSignature().verify(header, body, Secret(key)), "paddle: PaddleSignature refused the header")
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["paddle-signature", header], ["content-type", "application/json"]],
                "body": body,
                "now": now,
                "expect": {"kind": "event", "event_id": body_obj["event_id"], "event_type": body_obj["event_type"]},
            }
        )
    write(
        {
            "provider": "paddle",
            "made_by": "sdk",
            "made_with": f"paddle-python-sdk {version('paddle-python-sdk')} (PyPI): "
            "paddle_billing.Notifications.Verifier().verify (clock pinned to each case's now)",
            "docs": "https://developer.paddle.com/webhooks/signature-verification",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": True,
            "tolerance_secs": 5,
            "notes": "Paddle-Signature: ts=<unix s>;h1=<hex HMAC-SHA256(ts + ':' + raw body)>, several h1 during "
            "rotation (any may match). Key = the whole pdl_ntfset_... string as UTF-8. The SDKs' default "
            "tolerance is 5 s both ways. Id = body event_id (notification_id differs per destination), "
            "type = body event_type.",
            "cases": cases,
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Adyen: per-item hmacSignature in additionalData, base64 HMAC-SHA256 with the hex-decoded key over
# pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success.
def adyen():
    from Adyen import util as adyen_util

    key = sha256_hex(b"webhook-inbox adyen test hmac key").upper()
    wrong = sha256_hex(b"webhook-inbox adyen other hmac key").upper()
    url = "https://hooks.example.com/webhooks/adyen"
    accepted = {"status": 200, "content_type": "text/plain", "body": "[accepted]"}

    def item(**fields):
        entry = {"additionalData": {}, **fields}
        entry["additionalData"]["hmacSignature"] = adyen_util.generate_notification_sig(entry, key).decode()
        check(adyen_util.is_valid_hmac_notification(entry, key), "adyen: SDK refused its own signature")
        check(not adyen_util.is_valid_hmac_notification(entry, wrong), "adyen: SDK accepted the wrong key")
        return entry

    def ident(entry):
        return {
            "event_id": f"{entry['pspReference']}:{entry['eventCode']}:{entry['success']}",
            "event_type": entry["eventCode"],
        }

    authorisation = item(
        amount={"currency": "EUR", "value": 1130},
        eventCode="AUTHORISATION",
        eventDate="2026-01-01T01:05:00+01:00",
        merchantAccountCode="InboxTestMerchant",
        merchantReference="order-1001",
        operations=["CANCEL", "CAPTURE", "REFUND"],
        paymentMethod="visa",
        pspReference="QFQTPCQ8HXSKGK82",
        reason="033899:1111:03/2030",
        success="true",
    )
    authorisation["additionalData"] = {
        "authCode": "033899",
        "cardSummary": "1111",
        "expiryDate": "03/2030",
        "hmacSignature": authorisation["additionalData"]["hmacSignature"],
    }
    check(adyen_util.is_valid_hmac_notification(authorisation, key), "adyen: SDK refused the item")
    capture = item(
        amount={"currency": "EUR", "value": 1130},
        eventCode="CAPTURE",
        eventDate="2026-01-01T01:06:00+01:00",
        merchantAccountCode="InboxTestMerchant",
        merchantReference="order-1001",
        originalReference="QFQTPCQ8HXSKGK82",
        paymentMethod="visa",
        pspReference="V4HZ4RBFJGXXGN82",
        reason="",
        success="true",
    )
    refund = item(
        amount={"currency": "EUR", "value": 500},
        eventCode="REFUND",
        eventDate="2026-01-01T01:07:00+01:00",
        merchantAccountCode="InboxTestMerchant",
        merchantReference="order-0999",
        originalReference="NC6HT9CRT65ZGN82",
        paymentMethod="mc",
        pspReference="X3GWCDJRW2JRGN82",
        reason="Insufficient balance on payment",
        success="false",
    )

    def envelope(*items):
        return compact({"live": "false", "notificationItems": [{"NotificationRequestItem": i} for i in items]})

    ts = T0 + 300
    headers = [["content-type", "application/json"]]
    cases = [
        {
            "name": "AUTHORISATION (one item, as JSON deliveries carry)",
            "method": "POST",
            "url": url,
            "headers": headers,
            "body": envelope(authorisation),
            "now": ts,
            "expect": {"kind": "batch", "items": [ident(authorisation)], "answer": accepted},
            # Only the named fields are signed: a changed byte elsewhere (eventDate, additionalData) still verifies.
            "signs_body": False,
        },
        {
            "name": "CAPTURE and a failed REFUND in one notificationItems array",
            "method": "POST",
            "url": url,
            "headers": headers,
            "body": envelope(capture, refund),
            "now": ts,
            "expect": {"kind": "batch", "items": [ident(capture), ident(refund)], "answer": accepted},
            # Only the named fields are signed: a changed byte elsewhere (eventDate, additionalData) still verifies.
            "signs_body": False,
        },
    ]
    write(
        {
            "provider": "adyen",
            "made_by": "sdk",
            "made_with": f"Adyen {version('Adyen')} (PyPI): Adyen.util.generate_notification_sig signs, "
            "Adyen.util.is_valid_hmac_notification verifies",
            "docs": "https://docs.adyen.com/development-resources/webhooks/verify-hmac-signatures",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Each notificationItems[].NotificationRequestItem carries additionalData.hmacSignature = base64 "
            "HMAC-SHA256, key = the hex HMAC key decoded to bytes, over pspReference:originalReference:"
            "merchantAccountCode:merchantReference:amount.value:amount.currency:eventCode:success (missing "
            "fields as empty strings). Every item must verify. Only those fields are signed, no timestamp. "
            "Answer [accepted] (Adyen now also accepts any 2xx). JSON deliveries carry one item today, the "
            "array form allows several (SOAP up to six); a delivery is always split, one stored event per item, even "
            "when it holds one. Adyen sends no event id: id = "
            "pspReference:eventCode:success (Adyen's duplicate key is eventCode + pspReference; success is "
            "added because a changed success is an update, not a duplicate); type = eventCode. Optional HTTP "
            "Basic auth configured in the Customer Area is not part of this vector.",
            "cases": cases,
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Braintree: form-encoded bt_signature=<public_key>|<hex HMAC-SHA1(key=SHA1(private_key), bt_payload)> and
# bt_payload=<base64 XML>; GET ?bt_challenge=<hex> answered with <public_key>|<HMAC of the challenge>.
def braintree_vector():
    import braintree
    from braintree import webhook_testing_gateway
    from braintree.exceptions.invalid_signature_error import InvalidSignatureError

    public_key = "k7tq2x9mvb4wd3np"
    private_key = "3f1e9c0b7a2d4e6f8091a2b3c4d5e6f7"
    wrong_private = "0a9b8c7d6e5f40312a2b3c4d5e6f7089"
    url = "https://hooks.example.com/webhooks/braintree"

    class PinnedClock(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return datetime.datetime(2026, 1, 1, 0, 6, 40)

    webhook_testing_gateway.datetime = PinnedClock

    def gateway_for(private, public=public_key):
        return braintree.BraintreeGateway(
            braintree.Configuration(
                braintree.Environment.Sandbox,
                merchant_id="inboxtestmerchant",
                public_key=public,
                private_key=private,
            )
        )

    gateway = gateway_for(private_key)
    wrong_gateway = gateway_for(wrong_private)
    ts = T0 + 400
    cases = []
    kinds = braintree.WebhookNotification.Kind
    for name, kind, subject_id in [
        ("subscription_charged_successfully", kinds.SubscriptionChargedSuccessfully, "sub_inbox_0001"),
        ("check (the Control Panel's test notification)", kinds.Check, None),
    ]:
        sample = gateway.webhook_testing.sample_notification(kind, subject_id)
        signature, payload = sample["bt_signature"], sample["bt_payload"].decode("ascii")
        body = urllib.parse.urlencode({"bt_signature": signature, "bt_payload": payload})
        form = urllib.parse.parse_qs(body, strict_parsing=True)
        check(form == {"bt_signature": [signature], "bt_payload": [payload]}, "braintree: form round trip")
        notification = gateway.webhook_notification.parse(form["bt_signature"][0], form["bt_payload"][0])
        check(notification.kind == kind, "braintree: SDK parsed another kind")
        try:
            wrong_gateway.webhook_notification.parse(signature, payload)
            raise GeneratorError("braintree: SDK accepted the wrong private key")
        except InvalidSignatureError:
            pass
        # The SDK checks the payload and the payload + "\n": the same signature verifies it without its newline,
        # so the id (what is signed) is the payload with its trailing newlines made one.
        check(payload.endswith("\n"), "braintree: the SDK's payload does not end in a newline")
        notification = gateway.webhook_notification.parse(signature, payload.rstrip("\n"))
        check(notification.kind == kind, "braintree: SDK refused the payload without its newline")
        signed = payload.rstrip("\n") + "\n"
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["content-type", "application/x-www-form-urlencoded"]],
                "body": body,
                "now": ts,
                "expect": {"kind": "event", "event_id": sha256_hex(signed.encode()), "event_type": kind},
            }
        )
    challenge = "20f9f8ed05f77439fe955c977e4c8a53"
    answer = gateway.webhook_notification.verify(challenge)
    check(answer.startswith(public_key + "|"), "braintree: SDK answered the challenge oddly")
    check(wrong_gateway.webhook_notification.verify(challenge) != answer, "braintree: wrong key, same answer")
    cases.append(
        {
            "name": "bt_challenge (destination verification)",
            "method": "GET",
            "url": f"{url}?bt_challenge={challenge}",
            "headers": [],
            "body": "",
            "now": ts,
            "expect": {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": answer}},
        }
    )
    write(
        {
            "provider": "braintree",
            "made_by": "sdk",
            "made_with": f"braintree {version('braintree')} (PyPI): WebhookTestingGateway.sample_notification signs "
            "(clock pinned), WebhookNotificationGateway.parse verifies, .verify answers bt_challenge",
            "docs": "https://developer.paypal.com/braintree/docs/guides/webhooks/parse",
            "config": config([f"{public_key}:{private_key}"]),
            "wrong_config": config([f"{public_key}:{wrong_private}"]),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Secret = '<public key>:<private key>' of a Braintree API key (like Basic credentials; several "
            "for rotation). Body is form-encoded bt_signature and bt_payload; after form-decoding, bt_signature "
            "is '<public key>|<hex HMAC-SHA1>' pairs joined by '&' (pick the pair with our public key); the "
            "HMAC key is SHA1(private key) as raw 20 bytes and the message is the bt_payload string (the SDK "
            "also accepts bt_payload + '\\n'). bt_payload is base64 (with newlines) of XML holding "
            "<timestamp> (not checked) and <kind> = type. No event id: id = hex SHA-256 of the decoded "
            "bt_payload as signed, its trailing newlines made one (the payload with and without its newline is one "
            "signature). GET ?bt_challenge=<20-32 hex> is answered, unsigned request, with "
            "'<public key>|<hex HMAC-SHA1(SHA1(private key), challenge)>'.",
            "cases": cases,
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Checkout.com: Cko-Signature = hex HMAC-SHA256 of the raw body with the webhook's signature key. No SDK verifies.
def checkout():
    key = "3c2b1a09-e8f7-4d6c-b5a4-93827160fedc"
    wrong = "0f1e2d3c-4b5a-4697-8887-a9b8c7d6e5f4"
    url = "https://hooks.example.com/webhooks/checkout"
    ts = T0 + 500
    body_obj = {
        "id": "evt_az5sblvku4ge3dwpztvyizgcau",
        "type": "payment_captured",
        "version": "1.0.33",
        "created_on": "2026-01-01T00:08:20.2430413Z",
        "data": {
            "id": "pay_waji3oxwg4uelhrdt6aawdl2b4",
            "action_id": "act_y5ab2nfhq2uutjuaqnpkvehdp4",
            "amount": 4200,
            "currency": "GBP",
            "reference": "ORD-5023-4E89",
            "metadata": {"note": "Thé vert"},
        },
        "_links": {"self": {"href": "https://api.checkout.com/workflows/events/evt_az5sblvku4ge3dwpztvyizgcau"}},
    }
    body = compact(body_obj)
    signature = hmac_hex(key.encode(), body.encode())
    write(
        {
            "provider": "checkout",
            "made_by": "docs",
            "made_with": "built from the documented algorithm (hex HMAC-SHA256 of the raw body): "
            "https://www.checkout.com/docs/developer-resources/webhooks/manage-webhooks/set-up-your-webhook-receiver",
            "docs": "https://www.checkout.com/docs/developer-resources/webhooks/manage-webhooks/set-up-your-webhook-receiver",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "No PyPI/npm package verifies Checkout.com webhooks (checkout-sdk and checkout-sdk-node only "
            "manage workflows). Cko-Signature = hex HMAC-SHA256(raw body), key = the signature key set in the "
            "workflow's webhook action, as UTF-8. No timestamp. An Authorization header value can also be "
            "configured per webhook (token family); not part of this vector. Id = body id, type = body type.",
            "cases": [
                {
                    "name": "payment_captured",
                    "method": "POST",
                    "url": url,
                    "headers": [["cko-signature", signature], ["content-type", "application/json"]],
                    "body": body,
                    "now": ts,
                    "expect": {"kind": "event", "event_id": body_obj["id"], "event_type": body_obj["type"]},
                }
            ],
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Razorpay: X-Razorpay-Signature = hex HMAC-SHA256 of the raw body; id in x-razorpay-event-id.
def razorpay_vector():
    import razorpay
    from razorpay.errors import SignatureVerificationError

    key = "inbox-test-razorpay-webhook-secret"
    wrong = "inbox-test-razorpay-other-secret"
    url = "https://hooks.example.com/webhooks/razorpay"
    ts = T0 + 600
    client = razorpay.Client(auth=("rzp_test_inboxkeyid0001", "rzp_test_inbox_api_secret"))
    body_obj = {
        "entity": "event",
        "account_id": "acc_BFQ7uQEaa7j2z7",
        "event": "payment.captured",
        "contains": ["payment"],
        "payload": {
            "payment": {
                "entity": {
                    "id": "pay_NpQ5yS6T7u8V9w",
                    "entity": "payment",
                    "amount": 50000,
                    "currency": "INR",
                    "status": "captured",
                    "order_id": "order_NpQ4xR5S6t7U8v",
                    "method": "upi",
                    "description": "Chai ☕",
                }
            }
        },
        "created_at": ts,
    }
    body = compact(body_obj)
    signature = hmac_hex(key.encode(), body.encode())
    check(client.utility.verify_webhook_signature(body, signature, key), "razorpay: SDK refused the signature")
    try:
        client.utility.verify_webhook_signature(body, signature, wrong)
        raise GeneratorError("razorpay: SDK accepted the wrong secret")
    except SignatureVerificationError:
        pass
    event_id = "NpQ6zT7U8v9W0x"
    write(
        {
            "provider": "razorpay",
            "made_by": "sdk",
            "made_with": f"razorpay {version('razorpay')} (PyPI): Client.utility.verify_webhook_signature",
            "docs": "https://razorpay.com/docs/webhooks/validate-test/",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "X-Razorpay-Signature = hex HMAC-SHA256(raw body), key = the webhook secret chosen in the "
            "Dashboard, as UTF-8. No timestamp is signed (created_at is in the body only). Id = the "
            "x-razorpay-event-id header (unique per event, Razorpay's documented duplicate key); type = body event.",
            "cases": [
                {
                    "name": "payment.captured",
                    "method": "POST",
                    "url": url,
                    "headers": [
                        ["x-razorpay-signature", signature],
                        ["x-razorpay-event-id", event_id],
                        ["content-type", "application/json"],
                    ],
                    "body": body,
                    "now": ts,
                    "expect": {"kind": "event", "event_id": event_id, "event_type": body_obj["event"]},
                }
            ],
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Lemon Squeezy: X-Signature = hex HMAC-SHA256 of the raw body; X-Event-Name carries the type. No SDK verifies.
def lemonsqueezy():
    key = "ls-inbox-test-signing-secret"
    wrong = "ls-inbox-other-signing-secret"
    url = "https://hooks.example.com/webhooks/lemonsqueezy"
    ts = T0 + 700
    body_obj = {
        "meta": {
            "test_mode": True,
            "event_name": "order_created",
            "custom_data": {"user_id": "u_1001"},
        },
        "data": {
            "type": "orders",
            "id": "4810231",
            "attributes": {
                "store_id": 51234,
                "identifier": "636f855c-1fb9-4c07-b75c-3a10afef010a",
                "order_number": 1001,
                "user_name": "Zoë Example",
                "currency": "USD",
                "total": 1199,
                "status": "paid",
                "created_at": "2026-01-01T00:11:40.000000Z",
            },
        },
    }
    body = compact(body_obj)
    signature = hmac_hex(key.encode(), body.encode())
    write(
        {
            "provider": "lemonsqueezy",
            "made_by": "docs",
            "made_with": "built from the documented algorithm (hex HMAC-SHA256 of the raw body): "
            "https://docs.lemonsqueezy.com/help/webhooks/signing-requests",
            "docs": "https://docs.lemonsqueezy.com/help/webhooks/signing-requests",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "@lemonsqueezy/lemonsqueezy.js has no webhook verifier. X-Signature = hex HMAC-SHA256(raw "
            "body), key = the signing secret chosen when creating the webhook, as UTF-8. No timestamp. Type = "
            "X-Event-Name header (same as meta.event_name). Lemon Squeezy sends no event id: id = hex SHA-256 "
            "of the raw body (what it signs).",
            "cases": [
                {
                    "name": "order_created",
                    "method": "POST",
                    "url": url,
                    "headers": [
                        ["x-signature", signature],
                        ["x-event-name", "order_created"],
                        ["content-type", "application/json"],
                    ],
                    "body": body,
                    "now": ts,
                    "expect": {"kind": "event", "event_id": sha256_hex(body.encode()), "event_type": "order_created"},
                }
            ],
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# GoCardless: Webhook-Signature = hex HMAC-SHA256 of the raw body; events[] is a batch.
def gocardless():
    from gocardless_pro import webhooks
    from gocardless_pro.errors import InvalidSignatureError

    key = "gc-inbox-test-webhook-endpoint-secret-0001"
    wrong = "gc-inbox-test-webhook-endpoint-secret-9999"
    url = "https://hooks.example.com/webhooks/gocardless"
    ts = T0 + 800

    def event(eid, resource_type, action, link_key, link_id, cause, created_at):
        return {
            "id": eid,
            "created_at": created_at,
            "resource_type": resource_type,
            "action": action,
            "links": {link_key: link_id, "organisation": "OR000INBOX0001"},
            "details": {"origin": "gocardless", "cause": cause, "description": f"{resource_type} {action}."},
            "metadata": {},
        }

    single = [event("EV01JG6V7Q2R", "payments", "confirmed", "payment", "PM01JG6V5A1B", "payment_confirmed",
                    "2026-01-01T00:13:20.000Z")]
    batch = [
        event("EV01JG6V7R3S", "payments", "paid_out", "payment", "PM01JG6V5A1B", "payment_paid_out",
              "2026-01-01T00:13:21.000Z"),
        event("EV01JG6V7S4T", "mandates", "cancelled", "mandate", "MD01JG6V4Z9Y", "bank_account_disabled",
              "2026-01-01T00:13:22.000Z"),
        event("EV01JG6V7T5U", "payouts", "paid", "payout", "PO01JG6V6C3D", "payout_paid",
              "2026-01-01T00:13:23.000Z"),
    ]
    cases = []
    for name, events, webhook_id in [
        ("payments.confirmed (one event)", single, "WB01JG6V8A1B"),
        ("three events in one events[] array", batch, "WB01JG6V8B2C"),
    ]:
        body = compact({"events": events, "meta": {"webhook_id": webhook_id}})
        signature = hmac_hex(key.encode(), body.encode())
        parsed = webhooks.parse(body, key, signature)
        check([e.id for e in parsed] == [e["id"] for e in events], "gocardless: SDK parsed other events")
        try:
            webhooks.parse(body, wrong, signature)
            raise GeneratorError("gocardless: SDK accepted the wrong secret")
        except InvalidSignatureError:
            pass
        idents = [{"event_id": e.id, "event_type": f"{e.resource_type}.{e.action}"} for e in parsed]
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [
                    ["webhook-signature", signature],
                    ["content-type", "application/json"],
                    ["origin", "https://api.gocardless.com"],
                    ["user-agent", "gocardless-webhook-service/1.1"],
                ],
                "body": body,
                "now": ts,
                "expect": {"kind": "batch", "items": idents},
            }
        )
    write(
        {
            "provider": "gocardless",
            "made_by": "sdk",
            "made_with": f"gocardless-pro {version('gocardless-pro')} (PyPI): gocardless_pro.webhooks.parse",
            "docs": "https://developer.gocardless.com/getting-started/api/staying-up-to-date-with-webhooks",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": False,
            "tolerance_secs": 300,
            "notes": "Webhook-Signature = hex HMAC-SHA256(raw body), key = the webhook endpoint secret as UTF-8. No "
            "timestamp. One request carries events[] (any mix of resources): always split, one event per item (also "
            "for a single item), id = "
            "events[].id, type = events[].resource_type + '.' + events[].action (e.g. payments.confirmed). "
            "meta.webhook_id names the delivery, not an event. GoCardless documents that an invalid "
            "signature must be answered 498 (Token Invalid).",
            "cases": cases,
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Recurly: recurly-signature: <unix ms>,<hex HMAC-SHA256("<ms>.<body>")>[,<hex>...]; 5 min tolerance.
def recurly():
    key = "9d2c5e1f7a3b4c6d8e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"
    wrong = "1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c"
    previous = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f"
    url = "https://hooks.example.com/webhooks/recurly"
    cases = []
    for name, ts_ms, body_obj, rotated in [
        (
            "subscription.created",
            (T0 + 900) * 1000 + 123,
            {
                "id": "ra8foq26o2dt",
                "object_type": "subscription",
                "site_id": "qc326l1hl8k9",
                "event_type": "created",
                "event_time": "2026-01-01T00:15:00Z",
                "uuid": "63ab531e1d5b1d47eaf1ef44eeb853c3",
            },
            False,
        ),
        (
            "account.updated, two signatures during key regeneration",
            (T0 + 901) * 1000 + 456,
            {
                "id": "r3oplsj3zo7a",
                "object_type": "account",
                "site_id": "qc326l1hl8k9",
                "event_type": "updated",
                "event_time": "2026-01-01T00:15:01Z",
                "account_code": "verena",
            },
            True,
        ),
    ]:
        body = compact(body_obj)
        signed = f"{ts_ms}.{body}".encode()
        header = f"{ts_ms},{hmac_hex(key.encode(), signed)}"
        if rotated:
            header = f"{ts_ms},{hmac_hex(previous.encode(), signed)},{hmac_hex(key.encode(), signed)}"
        cases.append(
            {
                "name": name,
                "method": "POST",
                "url": url,
                "headers": [["recurly-signature", header], ["content-type", "application/json"]],
                "body": body,
                "now": ts_ms // 1000 + 1,
                "expect": {
                    "kind": "event",
                    "event_id": sha256_hex(body.encode()),
                    "event_type": f"{body_obj['object_type']}.{body_obj['event_type']}",
                },
            }
        )
    write(
        {
            "provider": "recurly",
            "made_by": "docs",
            "made_with": "built from the documented algorithm: https://docs.recurly.com/v1.3/docs/signature-verification "
            "(checked against recurly-client-go webhook.go, which is not on PyPI or npm)",
            "docs": "https://docs.recurly.com/v1.3/docs/signature-verification",
            "config": config([key]),
            "wrong_config": config([wrong]),
            "signs_timestamp": True,
            "tolerance_secs": 300,
            "notes": "The recurly PyPI/npm clients have no webhook verifier (the Ruby and Go clients do). "
            "recurly-signature = '<unix ms>,<hex HMAC-SHA256(ms + \".\" + raw body)>[,<hex>...]'; after a key "
            "regeneration both keys sign for 24 h (any may match). Key = the endpoint's secret key string "
            "as UTF-8 (it looks like hex but is not decoded). Timestamp in milliseconds, 5 min tolerance "
            "(recurly-client-go DEFAULT_WEBHOOK_TOLERANCE). Only JSON webhooks are signed (XML ones are not). "
            "The JSON body's id is the object's id, shared by every event of that object, so it is not an "
            "event id: id = hex SHA-256 of the raw body; type = object_type + '.' + event_type.",
            "cases": cases,
        }
    )


def main():
    for build in (square, paddle, adyen, braintree_vector, checkout, razorpay_vector, lemonsqueezy, gocardless, recurly):
        try:
            build()
        except GeneratorError as error:
            print(f"generator failed: {error}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
