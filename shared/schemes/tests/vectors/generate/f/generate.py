#!/usr/bin/env python3
"""Batch f vectors made in Python: vonage (vonage-jwt), workos (workos), and the
providers without an SDK that verifies their webhooks (intercom, front, x, okta),
built from each provider's documented algorithm.

Deterministic: fixed keys, fixed timestamps, fixed bodies. Every SDK check that
fails raises and stops the run. Run from anywhere: python3 generate.py
"""

import base64
import hashlib
import hmac
import json
import os
from unittest import mock

import jwt  # PyJWT, the library vonage-jwt itself builds on
from vonage_jwt import verify_signature as vonage_verify_signature
from workos.webhooks import _verification as workos_verification

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.normpath(os.path.join(HERE, "..", ".."))

NOW = 1700000000  # 2023-11-14T22:13:20Z


def version(dist):
    from importlib.metadata import version as v

    return v(dist)


def write(provider, vector):
    path = os.path.join(VECTORS, provider + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(vector, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("wrote", os.path.relpath(path, VECTORS))


def hmac_digest(algo, key, msg):
    if isinstance(key, str):
        key = key.encode("utf-8")
    if isinstance(msg, str):
        msg = msg.encode("utf-8")
    return hmac.new(key, msg, algo).digest()


def sha256_hex(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def config(secrets, public_key=None, url=None, verify_token=None):
    return {"secrets": secrets, "public_key": public_key, "url": url, "verify_token": verify_token}


# --------------------------------------------------------------------------- intercom
def intercom():
    secret = "0f4c7d2e-9a1b-4c3d-8e5f-6a7b8c9d0e1f"  # app client_secret (made up)
    wrong = "1e5d8c3f-0b2a-4d4e-9f6a-7b8c9d0e1f2a"
    url = "https://hooks.example.com/webhooks/intercom"
    body = compact({
        "type": "notification_event",
        "app_id": "a86dr8yl",
        "data": {
            "type": "notification_event_data",
            "item": {
                "type": "conversation",
                "id": "147",
                "created_at": NOW - 1,
                "updated_at": NOW,
                "source": {"type": "conversation", "delivered_as": "customer_initiated", "body": "<p>Hi there</p>"},
                "contacts": {"type": "contact.list", "contacts": [{"type": "contact", "id": "6553a1b2c3d4e5f6a7b8c9d0"}]},
                "state": "open",
            },
        },
        "links": {},
        "id": "notif_5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
        "topic": "conversation.user.created",
        "delivery_status": "pending",
        "delivery_attempts": 1,
        "delivered_at": 0,
        "first_sent_at": NOW,
        "created_at": NOW,
        "self": None,
    })
    sig = "sha1=" + hmac_digest(hashlib.sha1, secret, body).hex()
    write("intercom", {
        "provider": "intercom",
        "made_by": "docs",
        "made_with": "https://developers.intercom.com/docs/references/webhooks/webhook-models (Signed notifications: "
                     "X-Hub-Signature = 'sha1=' + hex HMAC-SHA1 of the body keyed with the app's client_secret); "
                     "no Intercom SDK verifies webhooks",
        "docs": "https://developers.intercom.com/docs/references/webhooks/webhook-models",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "Signature covers the body only (no timestamp). Id is the notification's top-level id (notif_...), "
                 "type its topic. When the endpoint URL is saved Intercom sends an unsigned HEAD request to check it; "
                 "answer 200 with no body and store nothing. A 'ping' topic is a signed test notification with an id.",
        "cases": [
            {
                "name": "conversation.user.created",
                "method": "POST",
                "url": url,
                "headers": [
                    ["x-hub-signature", sig],
                    ["content-type", "application/json"],
                    ["user-agent", "intercom-parrot-service-client/1.0"],
                ],
                "body": body,
                "now": NOW,
                "expect": {"kind": "event", "event_id": "notif_5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
                           "event_type": "conversation.user.created"},
            },
            {
                "name": "url check (HEAD)",
                "method": "HEAD",
                "url": url,
                "headers": [],
                "body": "",
                "now": NOW,
                "expect": {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": ""}},
            },
        ],
    })


# --------------------------------------------------------------------------- front
def front():
    secret = "7c1e9a4b2d8f6e3a5c0b9d7e1f4a2c8b"  # app secret (made up)
    wrong = "8d2f0b5c3e9a7f4b6d1c0e8f2a5b3d9c"
    url = "https://hooks.example.com/webhooks/front"
    ts_ms = str(NOW * 1000 + 123)

    def sign(body):
        return base64.b64encode(hmac_digest(hashlib.sha256, secret, ts_ms + ":" + body)).decode()

    body = compact({
        "type": "inbound_received",
        "authorization": {"id": "cmp_2a9f"},
        "payload": {
            "_links": {"self": "https://acme.api.frontapp.com/events/evt_55c8c149"},
            "id": "evt_55c8c149",
            "type": "inbound",
            "emitted_at": NOW + 0.012,
            "conversation": {"id": "cnv_yo1kg5q", "subject": "Order question", "status": "unassigned"},
            "source": {"_meta": {"type": "inboxes"}, "data": [{"id": "inb_55c8c149", "name": "Support"}]},
            "target": {"_meta": {"type": "message"}, "data": {"id": "msg_1q15qmtq", "type": "email", "is_inbound": True}},
        },
    })
    sync = compact({"type": "sync", "authorization": {"id": "cmp_2a9f"}})
    challenge = "4f1d2b7a9c3e"
    write("front", {
        "provider": "front",
        "made_by": "docs",
        "made_with": "https://dev.frontapp.com/docs/application-webhooks (Verifying integrity: base64 HMAC-SHA256 of "
                     "x-front-request-timestamp + ':' + raw body keyed with the app secret); no Front SDK verifies webhooks",
        "docs": "https://dev.frontapp.com/docs/application-webhooks",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": "Application webhooks (today's scheme): x-front-request-timestamp is in milliseconds; Front's docs "
                 "recommend rejecting requests older than 5 minutes. Saving the webhook sends a signed POST "
                 "{type: sync} with an x-front-challenge header that must be echoed within 10 s; Front's own sample "
                 "answers JSON {\"challenge\": value}. Id: payload.id (evt_...), type: top-level type. The older rule "
                 "webhooks (https://dev.frontapp.com/docs/rule-webhooks) sign only the body: x-front-signature = base64 "
                 "HMAC-SHA1 keyed with the API secret, no timestamp, never retried; not this preset.",
        "cases": [
            {
                "name": "inbound_received",
                "method": "POST",
                "url": url,
                "headers": [
                    ["x-front-signature", sign(body)],
                    ["x-front-request-timestamp", ts_ms],
                    ["content-type", "application/json"],
                ],
                "body": body,
                "now": NOW,
                "expect": {"kind": "event", "event_id": "evt_55c8c149", "event_type": "inbound_received"},
            },
            {
                "name": "sync challenge",
                "method": "POST",
                "url": url,
                "headers": [
                    ["x-front-signature", sign(sync)],
                    ["x-front-request-timestamp", ts_ms],
                    ["x-front-challenge", challenge],
                    ["content-type", "application/json"],
                ],
                "body": sync,
                "now": NOW,
                "expect": {"kind": "handshake", "answer": {"status": 200, "content_type": "application/json",
                                                           "body": compact({"challenge": challenge})}},
            },
        ],
    })


# --------------------------------------------------------------------------- vonage
def vonage():
    secret = "vonage-test-signature-secret-7f3a9c21"  # account signature secret (made up)
    wrong = "vonage-other-signature-secret-0b8e4d56"
    url = "https://hooks.example.com/webhooks/vonage"
    inbound = compact({
        "channel": "sms",
        "message_uuid": "aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab",
        "to": "447700900000",
        "from": "447700900001",
        "timestamp": "2023-11-14T22:13:20Z",
        "text": "Hello From Vonage!",
        "sms": {"num_messages": "1"},
        "message_type": "text",
    })
    status = compact({
        "message_uuid": "bbbbbbbb-cccc-4ddd-8eee-0123456789ab",
        "to": "447700900001",
        "from": "447700900000",
        "timestamp": "2023-11-14T22:13:19Z",
        "status": "delivered",
        "usage": {"currency": "EUR", "price": "0.0333"},
        "channel": "sms",
    })

    def token(body, jti):
        claims = {
            "iat": NOW,
            "jti": jti,
            "iss": "Vonage",
            "payload_hash": sha256_hex(body),
            "api_key": "a1b2c3d4",
            "application_id": "aaaaaaaa-bbbb-cccc-dddd-0123456789ab",
        }
        tok = jwt.encode(claims, secret, algorithm="HS256", headers={"typ": "JWT"})
        # The SDK's own check (it verifies the HS256 signature; iat lies in the past).
        if not vonage_verify_signature(tok, secret):
            raise SystemExit("vonage-jwt verify_signature refused the vonage vector")
        if vonage_verify_signature(tok, wrong):
            raise SystemExit("vonage-jwt verify_signature accepted the wrong secret")
        decoded = jwt.decode(tok, secret, algorithms=["HS256"], options={"verify_iat": False})
        if decoded["payload_hash"] != sha256_hex(body):
            raise SystemExit("payload_hash mismatch")
        return tok

    cases = []
    for name, body, jti in (("inbound text", inbound, "c5ba8f24-1a14-4c10-bfdf-3fbe8ce511b5"),
                            ("status delivered", status, "d6cb9035-2b25-4d21-80e0-4acf9df622c6")):
        obj = json.loads(body)
        cases.append({
            "name": name,
            "method": "POST",
            "url": url,
            "headers": [
                ["authorization", "Bearer " + token(body, jti)],
                ["content-type", "application/json"],
            ],
            "body": body,
            "now": NOW,
            "expect": {"kind": "event", "event_id": sha256_hex(body),
                       "event_type": obj.get("status") or obj.get("message_type")},
        })
    write("vonage", {
        "provider": "vonage",
        "made_by": "sdk",
        "made_with": "vonage-jwt %s (PyPI): verify_signature; token built with PyJWT %s HS256 as the docs describe"
                     % (version("vonage-jwt"), version("PyJWT")),
        "docs": "https://developer.vonage.com/en/messages/concepts/signed-webhooks",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": "Messages API signed webhooks: Authorization: Bearer <JWT HS256 keyed with the account signature "
                 "secret>; claims iat, jti, iss=Vonage, payload_hash (hex SHA-256 of the raw body, which must match), "
                 "api_key, application_id. No exp: the receiver checks iat (documented tolerance none, so 300 s). "
                 "jti is new on every attempt, so it is no id. No event id is sent: the id is the hex SHA-256 of the "
                 "body (the payload_hash Vonage signs). Type: 'status' of a status webhook, else 'message_type' of an "
                 "inbound message. Voice API signs GET webhooks over the query, not covered here.",
        "cases": cases,
    })


# --------------------------------------------------------------------------- x
def x():
    secret = "Q7vN2pLk9sXw4tRb8yHc3mJd6fGz1aVe5uKq0oPi2nSl7hTr4W"  # app consumer secret (made up)
    wrong = "R8wO3qMl0tYx5uSc9zId4nKe7gHa2bWf6vLr1pQj3oTm8iUs5X"
    url = "https://hooks.example.com/webhooks/x"

    def sig(msg):
        return "sha256=" + base64.b64encode(hmac_digest(hashlib.sha256, secret, msg)).decode()

    body = compact({
        "for_user_id": "2244994945",
        "tweet_create_events": [{
            "created_at": "Tue Nov 14 22:13:20 +0000 2023",
            "id": 1724571823061524480,
            "id_str": "1724571823061524480",
            "text": "@XDevelopers hello from a test",
            "user": {"id": 6253282, "id_str": "6253282", "name": "Test User", "screen_name": "testuser"},
            "in_reply_to_user_id_str": "2244994945",
        }],
    })
    crc_token = "9b4507b3-9040-4669-9ca3-6b94edb50553"
    write("x", {
        "provider": "x",
        "made_by": "docs",
        "made_with": "https://docs.x.com/x-api/webhooks/quickstart (CRC response_token and x-twitter-webhooks-signature: "
                     "'sha256=' + base64 HMAC-SHA256 keyed with the app consumer secret); no X SDK (xdk, tweepy) "
                     "verifies webhooks",
        "docs": "https://docs.x.com/x-api/webhooks/quickstart",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "POST: x-twitter-webhooks-signature = 'sha256=' + base64 HMAC-SHA256(consumer secret, raw body); no "
                 "timestamp. CRC: unsigned GET ?crc_token=T (at registration, hourly, on demand) answered within 3 s "
                 "with JSON {\"response_token\": \"sha256=\" + base64 HMAC-SHA256(consumer secret, T)}. Beware: the CRC "
                 "answer is exactly the signature a POST whose body is T would carry, so answer only tokens that cannot "
                 "be a body (e.g. refuse a crc_token containing '{' or '\"', or longer than 128 bytes). No event id: the "
                 "id is the hex SHA-256 of the body. Type: the top-level key ending in _events (or user_event).",
        "cases": [
            {
                "name": "tweet_create_events",
                "method": "POST",
                "url": url,
                "headers": [
                    ["x-twitter-webhooks-signature", sig(body)],
                    ["content-type", "application/json; charset=utf-8"],
                ],
                "body": body,
                "now": NOW,
                "expect": {"kind": "event", "event_id": sha256_hex(body), "event_type": "tweet_create_events"},
            },
            {
                "name": "crc",
                "method": "GET",
                "url": url + "?crc_token=" + crc_token,
                "headers": [],
                "body": "",
                "now": NOW,
                "expect": {"kind": "handshake", "answer": {"status": 200, "content_type": "application/json",
                                                           "body": compact({"response_token": sig(crc_token)})}},
            },
        ],
    })


# --------------------------------------------------------------------------- workos
def workos_vector():
    secret = "wh_sec_test_Zb8x2Vq5Nc1Lm7Kp4Rt9"  # endpoint secret (made up)
    wrong = "wh_sec_test_Ya7w1Up4Mb0Kl6Jo3Qs8"
    url = "https://hooks.example.com/webhooks/workos"
    ts_ms = str(NOW * 1000 + 456)
    body = compact({
        "id": "event_01HF2Z8V6Q9X3M4N5P6R7S8T9V",
        "data": {
            "object": "user",
            "id": "user_01HF2Z8V6Q9X3M4N5P6R7S8T9W",
            "email": "todd@example.com",
            "first_name": "Todd",
            "last_name": "Rundgren",
            "email_verified": False,
            "profile_picture_url": None,
            "last_sign_in_at": None,
            "external_id": None,
            "metadata": {},
            "locale": None,
            "created_at": "2023-11-14T22:13:19.000Z",
            "updated_at": "2023-11-14T22:13:19.000Z",
        },
        "event": "user.created",
        "object": "event",
        "created_at": "2023-11-14T22:13:20.000Z",
    })
    v1 = hmac_digest(hashlib.sha256, secret, ts_ms + "." + body).hex()
    header = "t=%s, v1=%s" % (ts_ms, v1)
    with mock.patch("time.time", return_value=float(NOW)):
        event = workos_verification.verify_event(event_body=body.encode(), event_signature=header, secret=secret)
        if event.id != "event_01HF2Z8V6Q9X3M4N5P6R7S8T9V" or event.event != "user.created":
            raise SystemExit("workos verify_event returned an unexpected event")
        try:
            workos_verification.verify_header(event_body=body.encode(), event_signature=header, secret=wrong)
        except ValueError:
            pass
        else:
            raise SystemExit("workos verify_header accepted the wrong secret")
    with mock.patch("time.time", return_value=float(NOW + 181)):
        try:
            workos_verification.verify_header(event_body=body.encode(), event_signature=header, secret=secret)
        except ValueError:
            pass
        else:
            raise SystemExit("workos verify_header accepted a stale timestamp")
    write("workos", {
        "provider": "workos",
        "made_by": "sdk",
        "made_with": "workos %s (PyPI): workos.webhooks verify_event / verify_header" % version("workos"),
        "docs": "https://workos.com/docs/events/data-syncing/webhooks",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": True,
        "tolerance_secs": 180,
        "notes": "WorkOS-Signature: 't=<unix ms>, v1=<hex HMAC-SHA256(secret, t + \".\" + raw body)>' (comma and space); "
                 "t is in milliseconds; the SDKs' default tolerance is 180 s both ways. Id: body id (event_...), "
                 "type: body event.",
        "cases": [
            {
                "name": "user.created",
                "method": "POST",
                "url": url,
                "headers": [
                    ["workos-signature", header],
                    ["content-type", "application/json"],
                ],
                "body": body,
                "now": NOW,
                "expect": {"kind": "event", "event_id": "event_01HF2Z8V6Q9X3M4N5P6R7S8T9V", "event_type": "user.created"},
            },
        ],
    })


# --------------------------------------------------------------------------- okta
def okta():
    secret = "okta-hook-test-3c9f1e7a2b5d"  # the Authorization value typed into the event hook (made up)
    wrong = "okta-hook-test-4d0a2f8b3c6e"
    url = "https://hooks.example.com/webhooks/okta"

    def event(uuid, etype, msg, published, tx):
        return {
            "uuid": uuid,
            "published": published,
            "eventType": etype,
            "version": "0",
            "displayMessage": msg,
            "severity": "INFO",
            "client": {"userAgent": {"rawUserAgent": "Mozilla/5.0", "os": "Mac OS X", "browser": "CHROME"},
                       "zone": "null", "device": "Computer", "ipAddress": "203.0.113.7"},
            "actor": {"id": "00u1qw1mqitPHM8AJ0g7", "type": "User", "alternateId": "admin@example.com",
                      "displayName": "Admin"},
            "outcome": {"result": "SUCCESS", "reason": None},
            "target": [{"id": "00u1qw1mqitPHM8AJ0g8", "type": "User", "alternateId": "jane@example.com",
                        "displayName": "Jane Doe"}],
            "transaction": {"type": "WEB", "id": tx},
            "legacyEventType": None,
        }

    def envelope(event_id, events):
        return compact({
            "eventType": "com.okta.event_hook",
            "eventTypeVersion": "1.0",
            "cloudEventsVersion": "0.1",
            "source": "https://example.okta.com/api/v1/eventHooks/who8vt36qfNpCGz9H1e6",
            "eventId": event_id,
            "data": {"events": events},
            "eventTime": "2023-11-14T22:13:20.456Z",
            "contentType": "application/json",
        })

    one = envelope("b5a188b9-5ece-4636-b041-482ffda96311", [
        event("f2a6b4c8-1d3e-11ee-9a7b-0242ac120002", "user.lifecycle.create", "Create Okta user",
              "2023-11-14T22:13:19.101Z", "ZVPvXbN1abc"),
    ])
    many = envelope("c6b299ca-6fdf-4747-8152-593aaeb07422", [
        event("f2a6b4c9-1d3e-11ee-9a7b-0242ac120002", "user.lifecycle.activate", "Activate Okta user",
              "2023-11-14T22:13:19.202Z", "ZVPvXbN1abd"),
        event("f2a6b4ca-1d3e-11ee-9a7b-0242ac120002", "group.user_membership.add", "Add user to group membership",
              "2023-11-14T22:13:19.303Z", "ZVPvXbN1abd"),
        event("f2a6b4cb-1d3e-11ee-9a7b-0242ac120002", "user.session.start", "User login to Okta",
              "2023-11-14T22:13:19.404Z", "ZVPvXbN1abe"),
    ])

    def items(body):
        return [{"event_id": e["uuid"], "event_type": e["eventType"]} for e in json.loads(body)["data"]["events"]]

    headers = [["authorization", secret], ["content-type", "application/json"], ["accept", "application/json"]]
    challenge = "X-Okta-Test-6CkrrMx9LkH4E1mK"
    write("okta", {
        "provider": "okta",
        "made_by": "docs",
        "made_with": "https://developer.okta.com/docs/concepts/event-hooks/ (the Authorization header carries the "
                     "secret configured on the hook, verbatim; one-time verification GET); Okta's SDKs do not "
                     "receive event hooks",
        "docs": "https://developer.okta.com/docs/concepts/event-hooks/",
        "config": config([secret]),
        "wrong_config": {"secrets": [wrong]},
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": "Token family: the hook's authScheme {type: HEADER, key: Authorization, value: secret} is sent as "
                 "'Authorization: <value>' verbatim (for Basic, the value is 'Basic ' + base64(user:password)); the key "
                 "may name another header. No signature, no timestamp (so a changed body cannot be detected: "
                 "signs_body false). Verification: GET with "
                 "x-okta-verification-challenge, answered 200 JSON {\"verification\": value} within 3 s. Deliveries "
                 "batch: data.events[] each with uuid (the id) and eventType (the type); the envelope eventId "
                 "identifies the delivery. Answer 200 or 204 with an empty body.",
        "cases": [
            {
                "name": "one event",
                "method": "POST",
                "url": url,
                "headers": headers,
                "body": one,
                "now": NOW,
                "expect": {"kind": "batch", "items": items(one)},
                "signs_body": False,
            },
            {
                "name": "three events",
                "method": "POST",
                "url": url,
                "headers": headers,
                "body": many,
                "now": NOW,
                "expect": {"kind": "batch", "items": items(many)},
                "signs_body": False,
            },
            {
                "name": "one-time verification",
                "method": "GET",
                "url": url,
                "headers": [["authorization", secret], ["x-okta-verification-challenge", challenge],
                            ["accept", "application/json"]],
                "body": "",
                "now": NOW,
                "expect": {"kind": "handshake", "answer": {"status": 200, "content_type": "application/json",
                                                           "body": compact({"verification": challenge})}},
            },
        ],
    })


if __name__ == "__main__":
    intercom()
    front()
    vonage()
    x()
    workos_vector()
    okta()
