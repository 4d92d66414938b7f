#!/usr/bin/env python3
"""Writes the batch-c provider vectors (tests/vectors/<provider>.json).

Every vector is deterministic: fixed secrets, fixed timestamps, fixed bodies. Where the provider ships a
registry package that verifies its webhooks, the signature built here is handed to that package's own verify
function and the run stops with an error if the package refuses it (or accepts a wrong key or a stale time).
Where no such package exists the signature is built from the algorithm on the provider's documentation page
(cited in each vector's "docs") and the vector says made_by "docs".

Run: python3 generate.py   (inside a venv made from requirements.txt; see README.md)
"""

import base64
import hashlib
import hmac
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock

OUT = Path(__file__).resolve().parent.parent.parent  # tests/vectors/
BASE_URL = "https://hooks.example.com/webhooks/"


def fail(msg):
    sys.stderr.write(f"generate.py: {msg}\n")
    sys.exit(1)


def must_raise(what, fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 - any refusal by the SDK is what we want here
        return
    fail(f"the SDK accepted {what}")


def sha256_hex(body):
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def hmac_hex(key, msg, algo=hashlib.sha256):
    return hmac.new(key, msg.encode("utf-8"), algo).hexdigest()


def hmac_b64(key, msg, algo=hashlib.sha256):
    return base64.b64encode(hmac.new(key, msg.encode("utf-8"), algo).digest()).decode()


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def case(name, provider, body, headers, now, expect, url=None, method="POST", signs_body=True):
    out = {
        "name": name,
        "method": method,
        "url": url or BASE_URL + provider,
        "headers": [[k.lower(), v] for k, v in headers],
        "body": body,
        "now": now,
        "expect": expect,
    }
    if not signs_body:
        # The provider does not sign this body (a bare token, or only fields outside the body): a changed body
        # byte is not something the receiver can detect.
        out["signs_body"] = False
    return out


def event(event_id, event_type):
    return {"kind": "event", "event_id": event_id, "event_type": event_type}


def config(secrets):
    return {"secrets": secrets, "public_key": None, "url": None, "verify_token": None}


def write(vector):
    path = OUT / f"{vector['provider']}.json"
    text = json.dumps(vector, indent=2, ensure_ascii=False)
    # One header pair per line: ["name", "value"].
    text = re.sub(r'\[\n\s+("(?:[^"\\]|\\.)*"),\n\s+("(?:[^"\\]|\\.)*")\n\s+\]', r"[\1, \2]", text)
    path.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {path.name}: {len(vector['cases'])} cases ({vector['made_by']})")


# ---------------------------------------------------------------------------------------------------------------
# Coinbase Commerce: X-CC-Webhook-Signature = hex HMAC-SHA256(shared secret, raw body). No timestamp.
# ---------------------------------------------------------------------------------------------------------------
def coinbase():
    from coinbase_commerce.webhook import Webhook

    secret = "6f0b8a1e-3c2d-4e5f-9a7b-1c2d3e4f5a6b"
    wrong = "0d5e2c4b-1a3f-4b6c-8d7e-9f0a1b2c3d4e"
    cases = []
    for name, delivery_id, event_id, etype, status, attempt in [
        ("charge:confirmed", "8ac7a5ae-6b0e-4b8f-a3a1-3e2f5c9d1b70", "24934862-5b59-4cd6-9c2f-d6f1b4a2e2f1",
         "charge:confirmed", "COMPLETED", 1),
        ("charge:pending (second attempt)", "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
         "5e1f4b1a-7d2c-4f3e-b6a5-9c8d7e6f5a4b", "charge:pending", "PENDING", 2),
    ]:
        body = compact({
            "attempt_number": attempt,
            "event": {
                "api_version": "2018-03-22",
                "created_at": "2023-11-14T22:13:20Z",
                "data": {
                    "code": "XA6G6ZFR",
                    "id": "2aee9dd1-67b8-43ef-8dfe-977959850f27",
                    "metadata": {"email": "buyer@example.com", "name": "Ada Lovelace"},
                    "pricing": {"local": {"amount": "1.00", "currency": "USD"},
                                "settlement": {"amount": "1", "currency": "USDC"}},
                    "timeline": [{"status": "NEW", "time": "2023-11-14T22:10:00Z"},
                                 {"status": status, "time": "2023-11-14T22:13:19Z"}],
                },
                "id": event_id,
                "resource": "event",
                "type": etype,
            },
            "id": delivery_id,
            "scheduled_for": "2023-11-14T22:13:20Z",
        })
        sig = hmac_hex(secret.encode(), body)
        ev = Webhook.construct_event(body, sig, secret)
        if ev.id != event_id or ev.type != etype:
            fail("coinbase: the SDK read another event")
        must_raise("coinbase with the wrong secret", lambda: Webhook.construct_event(body, sig, wrong))
        cases.append(case(name, "coinbase", body,
                          [("Content-Type", "application/json"), ("X-CC-Webhook-Signature", sig)],
                          1700000001, event(event_id, etype)))
    write({
        "provider": "coinbase",
        "made_by": "sdk",
        "made_with": "coinbase-commerce 1.0.1 (PyPI): coinbase_commerce.webhook.Webhook.construct_event",
        "docs": "https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "Coinbase Commerce (not Coinbase CDP). The event id is event.id (stable across retries); the "
                 "top-level id names the delivery and attempt_number changes on a retry, so the body differs "
                 "between attempts of one event.",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Revolut Business: Revolut-Signature = v1=hex HMAC-SHA256(secret, "v1.{Revolut-Request-Timestamp}.{body}"),
# timestamp in milliseconds, 5 minutes tolerance, several v1= values comma-separated during rotation.
# ---------------------------------------------------------------------------------------------------------------
def revolut():
    secret = "wsk_TestSigningSecretForVectors01"
    old = "wsk_OldSigningSecretStillValid987"
    wrong = "wsk_OtherSigningSecretNotOurs5555"

    def sign(key, ts, body):
        return "v1=" + hmac_hex(key.encode(), f"v1.{ts}.{body}")

    created = compact({
        "data": {
            "completed_at": None,
            "created_at": "2023-11-14T22:13:19.512Z",
            "id": "65540bdf-9c6e-a0c4-8f1d-2f35a7c8e0b1",
            "legs": [{"account_id": "d56dd396-523b-4613-8cc7-54974c17bcac", "amount": -12.5,
                      "counterparty": {"account_id": "0f2b7c1d-3e4a-4b5c-8d6e-7f8091a2b3c4",
                                       "account_type": "external", "id": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"},
                      "currency": "GBP", "description": "To Acme Ltd", "leg_id": "65540bdf-9c6e-a0c4-0000-2f35a7c8e0b1"}],
            "reference": "Invoice 42",
            "request_id": "inbox-vector-0001",
            "state": "pending",
            "type": "transfer",
            "updated_at": "2023-11-14T22:13:19.512Z",
        },
        "event": "TransactionCreated",
        "timestamp": "2023-11-14T22:13:19.601Z",
    })
    changed = compact({
        "data": {"id": "65540bdf-9c6e-a0c4-8f1d-2f35a7c8e0b1", "new_state": "completed", "old_state": "pending",
                 "request_id": "inbox-vector-0001"},
        "event": "TransactionStateChanged",
        "timestamp": "2023-11-14T22:15:02.030Z",
    })
    ts1, ts2 = "1700000000123", "1700000102456"
    cases = [
        case("TransactionCreated", "revolut", created,
             [("Content-Type", "application/json"), ("Revolut-Request-Timestamp", ts1),
              ("Revolut-Signature", sign(secret, ts1, created))],
             1700000000, event(sha256_hex(created), "TransactionCreated")),
        case("TransactionStateChanged, two signatures while a rotated secret is still active", "revolut", changed,
             [("Content-Type", "application/json"), ("Revolut-Request-Timestamp", ts2),
              ("Revolut-Signature", sign(old, ts2, changed) + "," + sign(secret, ts2, changed))],
             1700000103, event(sha256_hex(changed), "TransactionStateChanged")),
    ]
    write({
        "provider": "revolut",
        "made_by": "docs",
        "made_with": "built from the documented algorithm: "
                     "https://developer.revolut.com/docs/guides/manage-accounts/webhooks/verify-the-payload-signature "
                     "(no registry package of Revolut's verifies Business webhooks)",
        "docs": "https://developer.revolut.com/docs/guides/manage-accounts/webhooks/about-webhooks",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": "Revolut-Request-Timestamp is in milliseconds. The body carries no event id and the signed "
                 "timestamp changes on every retry (up to 3 more, 10 minutes apart), so the id is the hex SHA-256 "
                 "of the raw body (stable across retries); the type is the body's \"event\". The Merchant API "
                 "signs the same way (its body has \"event\" and \"order_id\").",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Mercado Pago: x-signature: ts=<unix s>,v1=<hex HMAC-SHA256(secret, "id:{data.id};request-id:{x-request-id};ts:{ts};")>
# data.id comes from the query string (lower-cased when alphanumeric); x-request-id is a header. Body not signed.
# ---------------------------------------------------------------------------------------------------------------
def mercadopago():
    from mercadopago.webhook import WebhookSignatureValidator

    secret = "c2a4f1e9b7d35a8c6e0f2b4d6a8c0e2f4b6d8a0c2e4f6b8d0a2c4e6f8b0d2a4c"
    wrong = "0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d"
    base = BASE_URL + "mercadopago"
    runs = [
        {
            "name": "payment.updated",
            "query_id": "123456789", "type": "payment", "ts": "1700000000",
            "request_id": "bb56a2f1-6aae-46ac-982e-9dcd3581d08e",
            "body": compact({"action": "payment.updated", "api_version": "v1", "data": {"id": "123456789"},
                             "date_created": "2023-11-14T19:13:18Z", "id": 108947239471, "live_mode": False,
                             "type": "payment", "user_id": "1234567890"}),
            "now": 1700000002,
            "id": "108947239471", "etype": "payment.updated",
        },
        {
            "name": "order.processed, alphanumeric data.id (signed lower-cased)",
            "query_id": "ORD01HF7Z3Q9K4M2N8P6R5S1T0V3W", "type": "order", "ts": "1700000300",
            "request_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
            "body": compact({"action": "order.processed", "api_version": "v1",
                             "application_id": "8734957298374923",
                             "data": {"external_reference": "inbox-vector-42", "id": "ORD01HF7Z3Q9K4M2N8P6R5S1T0V3W",
                                      "status": "processed", "status_detail": "accredited",
                                      "total_paid_amount": "150.00", "type": "online", "version": 3},
                             "date_created": "2023-11-14T19:18:19.010-03:00", "live_mode": False,
                             "type": "order", "user_id": "1234567890"}),
            "now": 1700000301,
            "id": None, "etype": "order.processed",
        },
    ]
    cases = []
    for r in runs:
        signed_id = r["query_id"].lower() if not r["query_id"].isdigit() else r["query_id"]
        manifest = f"id:{signed_id};request-id:{r['request_id']};ts:{r['ts']};"
        header = f"ts={r['ts']},v1={hmac_hex(secret.encode(), manifest)}"
        now_ms = lambda n=r["now"]: n * 1000  # noqa: E731
        WebhookSignatureValidator.validate(header, r["request_id"], signed_id, secret,
                                           tolerance_seconds=300, now=now_ms)
        must_raise("mercadopago with the wrong secret", lambda: WebhookSignatureValidator.validate(
            header, r["request_id"], signed_id, wrong, tolerance_seconds=300, now=now_ms))
        must_raise("mercadopago at a stale time", lambda: WebhookSignatureValidator.validate(
            header, r["request_id"], signed_id, secret, tolerance_seconds=300,
            now=lambda: (int(r["ts"]) + 301) * 1000))
        event_id = r["id"] or sha256_hex(r["body"])
        cases.append(case(r["name"], "mercadopago", r["body"],
                          [("Content-Type", "application/json"), ("X-Request-Id", r["request_id"]),
                           ("X-Signature", header)],
                          r["now"], event(event_id, r["etype"]),
                          url=f"{base}?data.id={r['query_id']}&type={r['type']}", signs_body=False))
    write({
        "provider": "mercadopago",
        "made_by": "sdk",
        "made_with": "mercadopago 3.6.0 (PyPI): mercadopago.webhook.WebhookSignatureValidator.validate",
        "docs": "https://www.mercadopago.com.mx/developers/en/docs/checkout-pro-preferences/payment-notifications",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": "ts is unix seconds (both SDKs multiply it by 1000); no tolerance is documented, so 300. The "
                 "manifest is built from the query parameter data.id (lower-cased when alphanumeric, as the docs "
                 "say; the SDK takes it as passed, so the caller lower-cases) and the x-request-id header; a "
                 "missing part is left out of the manifest. The body is not signed: the event id is the body's "
                 "top-level \"id\" (the notification id) where present, else the hex SHA-256 of the body; the "
                 "type is the body's \"action\". A receiver should also require the body's data.id to equal the "
                 "signed query data.id (case-insensitively), else a captured signature could carry another body.",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Paystack: x-paystack-signature = hex HMAC-SHA512(secret key, raw body). No timestamp, no event id.
# ---------------------------------------------------------------------------------------------------------------
def paystack():
    secret = "sk_test_inboxvectors0000000000000000000000000000"
    wrong = "sk_test_inboxvectorsffffffffffffffffffffffffffff"
    charge = compact({
        "event": "charge.success",
        "data": {"amount": 10000, "authorization": {"authorization_code": "AUTH_8dfhjjdt", "bank": "TEST BANK",
                                                    "bin": "408408", "brand": "visa", "card_type": "visa",
                                                    "channel": "card", "country_code": "NG", "exp_month": "12",
                                                    "exp_year": "2030", "last4": "4081", "reusable": True},
                 "channel": "card", "created_at": "2023-11-14T22:13:00.000Z", "currency": "NGN",
                 "customer": {"customer_code": "CUS_xnxdt6s1zg1f4nx", "email": "buyer@example.com", "id": 84312},
                 "domain": "test", "fees": 150, "gateway_response": "Successful", "id": 302961,
                 "metadata": {"order": "inbox-vector-7"}, "paid_at": "2023-11-14T22:13:19.000Z",
                 "reference": "qTPrJoy9Bx", "status": "success"},
    })
    transfer = compact({
        "event": "transfer.success",
        "data": {"amount": 30000, "currency": "NGN", "domain": "test", "id": 37272792, "integration": 463433,
                 "reason": "Vendor payout", "recipient": {"recipient_code": "RCP_2mn1ebvqfm0rpwj", "type": "nuban"},
                 "reference": "1jhbs3ozmen0k7y5efmw", "status": "success",
                 "transfer_code": "TRF_zy6w214r4aw9971", "transferred_at": "2023-11-14T22:13:20.000Z"},
    })
    cases = []
    for name, body in [("charge.success", charge), ("transfer.success", transfer)]:
        sig = hmac_hex(secret.encode(), body, hashlib.sha512)
        cases.append(case(name, "paystack", body,
                          [("Content-Type", "application/json"), ("X-Paystack-Signature", sig)],
                          1700000001, event(sha256_hex(body), name)))
    write({
        "provider": "paystack",
        "made_by": "docs",
        "made_with": "built from the documented algorithm: https://paystack.com/docs/payments/webhooks/ "
                     "(Paystack's registry packages verify no webhooks)",
        "docs": "https://paystack.com/docs/payments/webhooks/",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "The key is the account's secret key (sk_live_/sk_test_), as shown. The body has no event id "
                 "(data.id names the resource, shared by its events), so the id is the hex SHA-256 of the raw "
                 "body; the type is the body's \"event\".",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Flutterwave: the dashboard's "secret hash" is sent as is in verif-hash (v3, legacy) and/or used as the key of
# flutterwave-signature = base64 HMAC-SHA256(secret hash, raw body) (current deliveries, v4).
# ---------------------------------------------------------------------------------------------------------------
def flutterwave():
    secret = "flw-secret-hash-test-7c1e9a"
    wrong = "flw-secret-hash-other-2b9d4f"
    v3 = compact({
        "event": "charge.completed",
        "data": {"id": 285959875, "tx_ref": "Links-616626414629", "flw_ref": "PeterEkene/FLW270177170",
                 "device_fingerprint": "a42937f4a73ce8bb8b8df14e63a2df31", "amount": 100, "currency": "NGN",
                 "charged_amount": 100, "app_fee": 1.4, "merchant_fee": 0,
                 "processor_response": "Approved by Financial Institution", "auth_model": "PIN",
                 "ip": "197.210.64.96", "narration": "CARD Transaction ", "status": "successful",
                 "payment_type": "card", "created_at": "2023-11-14T22:13:19.000Z", "account_id": 17321,
                 "customer": {"id": 215604089, "name": "Yemi Desola", "phone_number": None,
                              "email": "buyer@example.com", "created_at": "2023-11-14T22:13:19.000Z"}},
        "event.type": "CARD_TRANSACTION",
    })
    v4 = compact({
        "webhook_id": "wbk_R5rLxGJ2mNQp8TvWc3Yd",
        "timestamp": 1700000000123,
        "type": "charge.completed",
        "data": {"id": "chg_e1f3a2b1c4", "amount": 25000, "currency": "NGN", "status": "succeeded",
                 "reference": "inbox-vector-0042", "customer": {"id": "cus_4fa9c2b5", "email": "buyer@example.com"},
                 "payment_method": {"type": "mobile_money", "mobile_money": {"network": "MTN", "country_code": "234"}},
                 "processor_response": {"type": "approved", "code": "00"},
                 "created_datetime": "2023-11-14T22:13:19.001Z"},
    })
    cases = [
        case("charge.completed (v3, verif-hash token)", "flutterwave", v3,
             [("Content-Type", "application/json"), ("verif-hash", secret)],
             1700000001, event(sha256_hex(v3), "charge.completed"), signs_body=False),
        case("charge.completed (v4, flutterwave-signature HMAC)", "flutterwave", v4,
             [("Content-Type", "application/json"), ("flutterwave-signature", hmac_b64(secret.encode(), v4))],
             1700000001, event("wbk_R5rLxGJ2mNQp8TvWc3Yd", "charge.completed")),
    ]
    write({
        "provider": "flutterwave",
        "made_by": "docs",
        "made_with": "built from the documented algorithm: https://developer.flutterwave.com/docs/webhooks "
                     "(Flutterwave's registry packages verify no webhooks)",
        "docs": "https://developer.flutterwave.com/docs/webhooks",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "Either header authenticates: verif-hash equal to the secret hash (constant time), or "
                 "flutterwave-signature equal to base64 HMAC-SHA256 of the raw body under the secret hash used as "
                 "UTF-8 bytes. verif-hash is a bare token that signs nothing, so a source may want to require the "
                 "HMAC. v4 bodies carry webhook_id (the id) and type; v3 bodies carry only event and data, so the "
                 "id is the hex SHA-256 of the raw body and the type is \"event\".",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Xendit: x-callback-token = the account's callback verification token, sent as is. Nothing is signed.
# ---------------------------------------------------------------------------------------------------------------
def xendit():
    token = "xnd_cbtoken_TestVerificationToken0123456789abcdefABCDEF"
    wrong = "xnd_cbtoken_OtherVerificationToken9876543210fedcbaFEDCBA"
    capture = compact({
        "event": "payment.capture",
        "business_id": "6094fa76c2fd53701b8e079c",
        "created": "2023-11-14T22:13:20.123Z",
        "data": {"business_id": "6094fa76c2fd53701b8e079c", "channel_code": "BRI_VIRTUAL_ACCOUNT",
                 "country": "ID", "created": "2023-11-14T22:10:01.000Z", "currency": "IDR",
                 "customer_id": "cust-5ed61c4e-499f-49bd-9d90-f3f45028a7a3",
                 "payment_id": "py-1fdaf346-dd2e-4b6c-b938-124c7167a822",
                 "payment_request_id": "pr-1fdaf346-dd2e-4b6c-b938-124c7167a822",
                 "reference_id": "inbox-vector-9", "request_amount": 10000, "status": "SUCCEEDED",
                 "type": "SINGLE_PAYMENT", "updated": "2023-11-14T22:13:19.000Z"},
    })
    invoice = compact({
        "id": "579c8d61f23fa4ca35e52da4",
        "external_id": "invoice_inbox_vector_1",
        "user_id": "5781d19b2e2385880609791c",
        "is_high": True,
        "payment_method": "BANK_TRANSFER",
        "status": "PAID",
        "merchant_name": "Example Store",
        "amount": 50000,
        "paid_amount": 50000,
        "bank_code": "PERMATA",
        "paid_at": "2023-11-14T22:13:03.404Z",
        "payer_email": "buyer@example.com",
        "description": "Order 1001",
        "adjusted_received_amount": 47500,
        "fees_paid_amount": 0,
        "updated": "2023-11-14T22:13:03.404Z",
        "created": "2023-11-14T22:00:03.404Z",
        "currency": "IDR",
        "payment_channel": "PERMATA",
        "payment_destination": "888888888888",
    })
    cases = [
        case("payment.capture (with webhook-id)", "xendit", capture,
             [("Content-Type", "application/json"), ("x-callback-token", token),
              ("webhook-id", "6553f0a0c9a6e3b1d2f4a5b6")],
             1700000001, event("6553f0a0c9a6e3b1d2f4a5b6", "payment.capture"), signs_body=False),
        case("invoice paid (legacy callback, no webhook-id, no event)", "xendit", invoice,
             [("Content-Type", "application/json"), ("x-callback-token", token)],
             1700000001, event(sha256_hex(invoice), None), signs_body=False),
    ]
    write({
        "provider": "xendit",
        "made_by": "docs",
        "made_with": "built from the documentation: https://docs.xendit.co/apidocs/payment-webhook-notification "
                     "(xendit-python 7.0.0 has no callback verification)",
        "docs": "https://docs.xendit.co/api-integration/callback/setup",
        "config": config([token]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "A token scheme: x-callback-token compared in constant time; the body is not signed. The event id "
                 "is the webhook-id header where Xendit sends it (its deliveries carry one; the docs' duplicate "
                 "advice names payment_id/capture_id), else the hex SHA-256 of the raw body; the type is the "
                 "body's \"event\" where present (newer products), else none.",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Polar: Standard Webhooks headers, but the key is the secret string's own UTF-8 bytes (not base64-decoded).
# ---------------------------------------------------------------------------------------------------------------
def polar():
    import polar.webhooks as polar_webhooks
    from standardwebhooks.webhooks import Webhook as StandardWebhook

    secret = "polar_whs_TestVectorSecret0123456789abcdefGHIJKLmnop"
    old = "polar_whs_RotatedOutSecret9876543210zyxwvuTSRQPOnmlk"
    wrong = "polar_whs_SomebodyElsesSecret00000000000000000000000"

    def sign(key, msg_id, ts, body):
        # Polar's SDKs hand the standardwebhooks library base64(secret), i.e. the HMAC key is the secret's bytes.
        wh = StandardWebhook(base64.b64encode(key.encode()).decode())
        return wh.sign(msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body)

    def verify(body, headers, key, now):
        with mock.patch.object(polar_webhooks.time, "time", return_value=float(now)):
            return polar_webhooks.validate_event(body, headers, key, frozenset({json.loads(body)["type"]}),
                                                 lambda data: data)

    order = compact({
        "type": "order.paid",
        "timestamp": "2023-11-14T22:13:20.000000Z",
        "data": {"id": "b2c0a7f2-3d4e-4f5a-8b6c-7d8e9f0a1b2c", "created_at": "2023-11-14T22:13:18.000000Z",
                 "modified_at": "2023-11-14T22:13:19.000000Z", "status": "paid", "paid": True,
                 "subtotal_amount": 2000, "discount_amount": 0, "net_amount": 2000, "tax_amount": 0,
                 "total_amount": 2000, "currency": "usd", "billing_reason": "purchase",
                 "customer_id": "992fae2a-2a17-4b7a-8d9e-e287cf90131b",
                 "product_id": "0e5c1a2b-3c4d-4e5f-9a6b-7c8d9e0f1a2b",
                 "organization_id": "1dbfc517-0bbf-4301-9ba8-555ca42b9737", "metadata": {}},
    })
    sub = compact({
        "type": "subscription.active",
        "timestamp": "2023-11-14T22:30:00.000000Z",
        "data": {"id": "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "status": "active", "amount": 1000,
                 "currency": "usd", "recurring_interval": "month",
                 "current_period_start": "2023-11-14T22:29:58.000000Z",
                 "current_period_end": "2023-12-14T22:29:58.000000Z", "cancel_at_period_end": False,
                 "customer_id": "992fae2a-2a17-4b7a-8d9e-e287cf90131b",
                 "product_id": "0e5c1a2b-3c4d-4e5f-9a6b-7c8d9e0f1a2b", "metadata": {}},
    })
    runs = [
        ("order.paid", "msg_2YwYqL0Xc8rRnCq1yGv8lJ8bB3N", 1700000000, order, [secret]),
        ("subscription.active, signed under an old and the current secret", "msg_2YwZ0b9Qp3dXk7TnM1sLr6Vh4Fe",
         1700001000, sub, [old, secret]),
    ]
    cases = []
    for name, msg_id, ts, body, keys in runs:
        sig = " ".join(sign(k, msg_id, ts, body) for k in keys)
        headers = {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}
        verify(body, headers, secret, ts + 1)
        must_raise("polar with the wrong secret", lambda: verify(body, headers, wrong, ts + 1))
        must_raise("polar at a stale time", lambda: verify(body, headers, secret, ts + 301))
        etype = json.loads(body)["type"]
        cases.append(case(name, "polar", body,
                          [("Content-Type", "application/json"), ("webhook-id", msg_id),
                           ("webhook-timestamp", str(ts)), ("webhook-signature", sig)],
                          ts + 1, event(msg_id, etype)))
    write({
        "provider": "polar",
        "made_by": "sdk",
        "made_with": "polar-sdk 1.0.2 (PyPI): polar.webhooks.validate_event (signed with standardwebhooks 1.1.0 "
                     "Webhook.sign under base64(secret), as Polar's SDKs do)",
        "docs": "https://polar.sh/docs/integrate/webhooks/delivery",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": "Standard Webhooks (webhook-id, webhook-timestamp in seconds, webhook-signature \"v1,<base64>\" "
                 "space-separated) over \"{id}.{timestamp}.{body}\", except that the HMAC key is the secret as "
                 "shown (polar_whs_...) taken as UTF-8 bytes, not base64-decoded. The id is webhook-id, the type "
                 "the body's \"type\". polar-sdk 1.0.2 also accepts a base64-decoded whsec_ key; Polar's own "
                 "secrets never decode, so the preset takes the raw bytes. The SDK reads time.time(); the "
                 "generator pins it for the check.",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# WooCommerce: X-WC-Webhook-Signature = base64 HMAC-SHA256(secret, raw body); id X-WC-Webhook-Delivery-ID,
# type X-WC-Webhook-Topic. Saving a webhook sends an unsigned form ping "webhook_id=N" that must get a 200.
# ---------------------------------------------------------------------------------------------------------------
def woocommerce():
    secret = "wc_test_secret_3d9f2a7b1c8e4f60"
    wrong = "wc_other_secret_0a1b2c3d4e5f6789"
    ua = "WooCommerce/8.3.1 Hookshot (WordPress/6.4.1)"
    # wp_json_encode escapes "/" as "\/": kept here byte for byte, the signature is over these bytes.
    order = ('{"id":1001,"parent_id":0,"status":"processing","currency":"USD","version":"8.3.1",'
             '"prices_include_tax":false,"date_created":"2023-11-14T22:13:19","date_created_gmt":"2023-11-14T22:13:19",'
             '"total":"29.00","customer_id":7,"order_key":"wc_order_vE3qR8nT2xKp1",'
             '"billing":{"first_name":"Ada","last_name":"Lovelace","email":"buyer@example.com","country":"GB"},'
             '"payment_method":"stripe","payment_method_title":"Credit Card","transaction_id":"ch_vector_001",'
             '"line_items":[{"id":31,"name":"Caf\\u00e9 Mug","product_id":93,"quantity":1,"total":"29.00",'
             '"sku":"MUG-1","price":29}],'
             '"payment_url":"https:\\/\\/shop.example.com\\/checkout\\/order-pay\\/1001\\/?pay_for_order=true&key=wc_order_vE3qR8nT2xKp1",'
             '"_links":{"self":[{"href":"https:\\/\\/shop.example.com\\/wp-json\\/wc\\/v3\\/orders\\/1001"}]}}')
    product = ('{"id":93,"name":"Caf\\u00e9 Mug","slug":"cafe-mug","type":"simple","status":"publish",'
               '"sku":"MUG-1","price":"27","regular_price":"29","sale_price":"27","stock_quantity":41,'
               '"date_modified_gmt":"2023-11-14T22:20:00",'
               '"permalink":"https:\\/\\/shop.example.com\\/product\\/cafe-mug\\/"}')
    # Delivery ids are wp_hash(webhook id . time): a 32-hex-digit HMAC-MD5; these are fixed stand-ins.
    runs = [
        ("order.created", order, "order", "created", "6f1e8c0a4b2d9e7f3a5c1b0d8e6f4a2c"),
        ("product.updated", product, "product", "updated", "0b9a8c7d6e5f40312a4b5c6d7e8f9a0b"),
    ]
    cases = []
    for topic, body, resource, ev, delivery in runs:
        json.loads(body)
        cases.append(case(topic, "woocommerce", body, [
            ("User-Agent", ua), ("Content-Type", "application/json"),
            ("X-WC-Webhook-Source", "https://shop.example.com/"), ("X-WC-Webhook-Topic", topic),
            ("X-WC-Webhook-Resource", resource), ("X-WC-Webhook-Event", ev),
            ("X-WC-Webhook-Signature", hmac_b64(secret.encode(), body)), ("X-WC-Webhook-ID", "12"),
            ("X-WC-Webhook-Delivery-ID", delivery)], 1700000001,
            # The delivery id is wp_hash(webhook id . time()), shared by deliveries in one second: with the body's hash.
            event(f"{delivery}:{sha256_hex(body)}", topic)))
    cases.append(case("ping sent when the webhook is saved (unsigned form body)", "woocommerce", "webhook_id=12",
                      [("User-Agent", ua), ("Content-Type", "application/x-www-form-urlencoded")], 1700000001,
                      {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": ""}}))
    write({
        "provider": "woocommerce",
        "made_by": "docs",
        "made_with": "built from WooCommerce's WC_Webhook::deliver, generate_signature and deliver_ping "
                     "(plugins/woocommerce/includes/class-wc-webhook.php); no registry package verifies its webhooks",
        "docs": "https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "The secret is used as UTF-8 bytes after WordPress HTML-entity decoding (wp_specialchars_decode), "
                 "i.e. exactly as the admin screen shows it. The ping carries no X-WC headers and no signature: "
                 "answer it 200 (WooCommerce only checks the status) without storing it, and only when the body is "
                 "exactly webhook_id=<digits>. WooCommerce does not retry failed deliveries (it disables the hook "
                 "after more than 5 failures in a row).",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# Squarespace: Squarespace-Signature = hex HMAC-SHA256(hex-decoded secret, raw body); id /id, type /topic.
# ---------------------------------------------------------------------------------------------------------------
def squarespace():
    secret = "8f3c2a1b0e9d7c6b5a49382716f5e4d3c2b1a0f9e8d7c6b5a4938271605f4e3d"
    wrong = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
    key = bytes.fromhex(secret)
    created = compact({"id": "65540c8f2b7e4a1d9c3f6e5a", "websiteId": "5f3c3d55ac435e1a051f77b3",
                       "subscriptionId": "5f3c2155d947844beedda991", "topic": "order.create",
                       "createdOn": "2023-11-14T22:13:19.482Z", "data": {"orderId": "65540c8e9d1f2a3b4c5d6e7f"}})
    updated = compact({"id": "65540d1a7c6b5a4938271605", "websiteId": "5f3c3d55ac435e1a051f77b3",
                       "subscriptionId": "5f3c2155d947844beedda991", "topic": "order.update",
                       "createdOn": "2023-11-14T22:15:40.011Z",
                       "data": {"orderId": "65540c8e9d1f2a3b4c5d6e7f", "update": "FULFILLED"}})
    cases = []
    for topic, body in [("order.create", created), ("order.update", updated)]:
        cases.append(case(topic, "squarespace", body,
                          [("User-Agent", "Squarespace/1.0"), ("Content-Type", "application/json"),
                           ("Squarespace-Signature", hmac_hex(key, body))],
                          1700000001, event(json.loads(body)["id"], topic)))
    write({
        "provider": "squarespace",
        "made_by": "docs",
        "made_with": "built from the documented algorithm: "
                     "https://developers.squarespace.com/commerce-apis/webhooks/verifying-notifications "
                     "(no registry package of Squarespace's verifies notifications)",
        "docs": "https://developers.squarespace.com/webhooks/overview",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "The subscription secret is hex: the HMAC key is its decoded bytes (using the hex text as the key "
                 "does not match). The id is the notification's \"id\", the type its \"topic\" (order.create, "
                 "order.update, extension.uninstall). The send-test-notification API delivers ordinary signed "
                 "notifications; there is no handshake.",
        "cases": cases,
    })


# ---------------------------------------------------------------------------------------------------------------
# BigCommerce: nothing signed; the hook's custom "headers" are sent on each callback, documented for HTTP Basic.
# ---------------------------------------------------------------------------------------------------------------
def bigcommerce():
    creds = "bc_hook:Test-Basic-Password-8d2f"
    wrong = "bc_hook:some-other-password"
    basic = "Basic " + base64.b64encode(creds.encode()).decode()
    runs = [
        ("store/order/created", {"type": "order", "id": 250}, 1699999999),
        ("store/order/statusUpdated", {"type": "order", "id": 250,
                                        "status": {"previous_status_id": 1, "new_status_id": 11}}, 1700000100),
    ]
    cases = []
    for scope, data, created_at in runs:
        h = hashlib.sha1(compact({"scope": scope, "data": data, "created_at": created_at}).encode()).hexdigest()
        body = compact({"created_at": created_at, "store_id": "1025646", "producer": "stores/abc123def",
                        "scope": scope, "hash": h, "data": data})
        cases.append(case(scope, "bigcommerce", body,
                          [("Content-Type", "application/json"), ("Authorization", basic)],
                          created_at + 1, event(h, scope), signs_body=False))
    write({
        "provider": "bigcommerce",
        "made_by": "docs",
        "made_with": "built from the documentation: https://developer.bigcommerce.com/docs/integrations/webhooks "
                     "(BigCommerce's registry packages verify no webhooks)",
        "docs": "https://developer.bigcommerce.com/docs/integrations/webhooks",
        "config": config([creds]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "BigCommerce signs nothing: a hook's \"headers\" are sent on every callback \"so destination "
                 "URIs can be secured with basic authentication\"; the preset checks Authorization: Basic against "
                 "user:password secrets (a different custom header is the token family). The id is the body's "
                 "\"hash\" (SHA-1 of the event metadata, the same when a hook fires twice for one event: so "
                 "duplicates fold), the type its \"scope\". The hash values here are stand-ins computed by the "
                 "generator.",
        "cases": cases,
    })


def main():
    for gen in (coinbase, revolut, mercadopago, paystack, flutterwave, xendit, polar, woocommerce, squarespace,
                bigcommerce):
        gen()


if __name__ == "__main__":
    main()
