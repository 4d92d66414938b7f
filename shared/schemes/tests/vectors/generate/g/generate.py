#!/usr/bin/env python3
"""Vectors for batch g: auth0, microsoft-graph, hubspot, calendly, typeform,
docusign, zendesk, dropbox, dropbox-sign, box.

Deterministic: fixed keys, fixed clock (NOW), fixed bodies. Where the
provider ships a verifying SDK (hubspot-api-client, box-sdk-gen,
dropbox-sign) every signature made here is checked by that SDK, with its
clock pinned to the case's `now`, and the run fails loudly if the SDK
refuses one or accepts a wrong key or a stale time.

Run: python generate.py  (inside a venv made from requirements.txt)
"""

import base64
import datetime as _dt
import hashlib
import hmac
import json
import os
import sys
from urllib.parse import quote_plus

OUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

NOW = 1700000000  # 2023-11-14T22:13:20Z
BASE = "https://hooks.example.com/webhooks"


# ---------------------------------------------------------------- helpers

def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def hmac_sha256(key: str, msg: bytes) -> bytes:
    return hmac.new(key.encode("utf-8"), msg, hashlib.sha256).digest()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def iso_z(ts: int) -> str:
    return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def config(secrets, url=None, public_key=None, verify_token=None):
    return {"secrets": secrets, "public_key": public_key, "url": url, "verify_token": verify_token}


def case(name, url, headers, body, expect, method="POST", now=NOW):
    return {
        "name": name,
        "method": method,
        "url": url,
        "headers": [[k.lower(), v] for k, v in headers],
        "body": body,
        "now": now,
        "expect": expect,
    }


def event(event_id, event_type, answer=None):
    e = {"kind": "event", "event_id": event_id, "event_type": event_type}
    if answer is not None:
        e["answer"] = answer
    return e


def batch(items):
    return {"kind": "batch", "items": [{"event_id": i, "event_type": t} for i, t in items]}


def write(doc):
    for c in doc["cases"]:
        # every body must be exact UTF-8 text; none of this batch needs body_base64
        c["body"].encode("utf-8")
    path = os.path.join(OUT, doc["provider"] + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("wrote", os.path.relpath(path, OUT), "(%d cases)" % len(doc["cases"]))


def must(cond, what):
    if not cond:
        sys.exit("SDK CHECK FAILED: " + what)


# ---------------------------------------------------------------- auth0

def auth0():
    token = "Bearer a0ls_test_3f9c1e7b2d4a6f80"
    wrong = "Bearer a0ls_other_0000000000000000"
    url = BASE + "/auth0"
    logs = [
        {"log_id": "90020231114221318000000000000000000000000000000000000001",
         "data": {"date": "2023-11-14T22:13:18.000Z", "type": "s",
                  "description": "Successful login", "client_id": "aI61p8I8aFjmYRliLWgvM9ev97kCCNDB",
                  "client_name": "Default App", "ip": "203.0.113.7", "user_id": "auth0|6552f0a1b2c3d4e5f6a7b8c9",
                  "user_name": "ada@example.com", "hostname": "example-tenant.eu.auth0.com",
                  "log_id": "90020231114221318000000000000000000000000000000000000001"}},
        {"log_id": "90020231114221319000000000000000000000000000000000000002",
         "data": {"date": "2023-11-14T22:13:19.000Z", "type": "fp",
                  "description": "Wrong email or password.", "client_id": "aI61p8I8aFjmYRliLWgvM9ev97kCCNDB",
                  "client_name": "Default App", "ip": "198.51.100.23", "user_name": "bob@example.com",
                  "hostname": "example-tenant.eu.auth0.com",
                  "log_id": "90020231114221319000000000000000000000000000000000000002"}},
        {"log_id": "90020231114221320000000000000000000000000000000000000003",
         "data": {"date": "2023-11-14T22:13:20.000Z", "type": "sapi",
                  "description": "Update a user", "client_id": "mgmtClientIdXXXXXXXXXXXXXXXXXXXXX",
                  "ip": "192.0.2.44", "hostname": "example-tenant.eu.auth0.com",
                  "log_id": "90020231114221320000000000000000000000000000000000000003"}},
    ]
    hdr = [("authorization", token), ("content-type", "application/json"),
           ("user-agent", "auth0-log-streams")]
    items = [(l["log_id"], l["data"]["type"]) for l in logs]
    cases = [
        case("json-array batch (Content Format: JSON Array)", url, hdr,
             compact(logs), batch(items)),
        case("json-lines batch (Content Format: JSON Lines)", url, hdr,
             "\n".join(compact(l) for l in logs[:2]), batch(items[:2])),
        case("json-object single log (Content Format: JSON Object)", url, hdr,
             compact(logs[2]), event(logs[2]["log_id"], "sapi")),
    ]
    write({
        "provider": "auth0",
        "made_by": "docs",
        "made_with": "built from the documented custom-webhook log stream: the configured Authorization Token is sent verbatim as the Authorization header",
        "docs": "https://auth0.com/docs/customize/log-streams/custom-log-streams",
        "config": config([token]),
        "wrong_config": config([wrong]),
        "signs_timestamp": False,
        "signs_body": False,
        "tolerance_secs": 300,
        "notes": ("No signature: a shared token compared in constant time with the whole Authorization value, "
                  "exactly as typed in the dashboard (here with its 'Bearer ' prefix). A request carries a batch "
                  "of log records; Content Format JSON Array sends a JSON array, JSON Lines one record per line, "
                  "JSON Object a single record. Each record is {log_id, data}; id = log_id, type = data.type "
                  "(Auth0 log event type codes). No SDK verifies log streams."),
        "cases": cases,
    })


# ---------------------------------------------------------------- microsoft graph

def microsoft_graph():
    client_state = "graph-clientstate-test-7f3a91c2"
    wrong = "graph-clientstate-other-00000000"
    url = BASE + "/graph"
    sub = "7f105c7d-2dc5-4530-97cd-4e7ae6534c07"
    tenant = "84bd8158-6d4d-4958-8b9f-9d6445542f95"
    exp = "2023-11-17T22:13:20.0000000Z"

    def note(change, msg_id, extra=None):
        n = {"subscriptionId": sub, "subscriptionExpirationDateTime": exp, "changeType": change,
             "resource": "Users/b2f3c1a0-1111-4222-8333-944455556666/Messages/" + msg_id,
             "resourceData": {"@odata.type": "#Microsoft.Graph.Message",
                              "@odata.id": "Users/b2f3c1a0-1111-4222-8333-944455556666/Messages/" + msg_id,
                              "@odata.etag": "W/\"CQAAABYAAADkrWGo7bouTKlsgTZMr9KwAAAUWRHf\"",
                              "id": msg_id},
             "clientState": client_state, "tenantId": tenant}
        if extra:
            n.update(extra)
        return n

    def body_of(items):
        raws = [compact(i) for i in items]
        return '{"value":[' + ",".join(raws) + "]}", raws

    token = ("Validation: Testing client application reachability for subscription "
             "Request-Id: 4c1a5e2b-9d3f-4e6a-8b7c-0d1e2f3a4b5c")
    hs_url = url + "?validationToken=" + quote_plus(token).replace("%3A", "%3a")

    b2, r2 = body_of([note("created", "AAMkAGI2TG93AAA="), note("updated", "AAMkAGI2TG94AAA=")])
    lifecycle = {"subscriptionId": sub, "subscriptionExpirationDateTime": exp, "tenantId": tenant,
                 "clientState": client_state, "lifecycleEvent": "reauthorizationRequired"}
    b3, r3 = body_of([lifecycle])
    with_id = note("deleted", "AAMkAGI2TG95AAA=", {"id": "lsgTZMr9KwAAA"})
    b4, _ = body_of([with_id])
    hdr = [("content-type", "application/json; charset=utf-8")]
    cases = [
        case("validationToken handshake (POST ?validationToken=, echoed as text/plain)", hs_url,
             [("content-type", "text/plain; charset=utf-8")], "",
             {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": token}}),
        case("value[] batch of two change notifications (no id: sha256 of each item)", url, hdr, b2,
             batch([(sha256_hex(r.encode()), t) for r, t in zip(r2, ["created", "updated"])])),
        case("lifecycle notification reauthorizationRequired", url, hdr, b3,
             batch([(sha256_hex(r3[0].encode()), "reauthorizationRequired")])),
        case("change notification that carries its optional id", url, hdr, b4,
             batch([("lsgTZMr9KwAAA", "deleted")])),
    ]
    write({
        "provider": "microsoft-graph",
        "made_by": "docs",
        "made_with": "built from the documented change-notification format (changeNotificationCollection) and validation handshake",
        "docs": "https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks",
        "config": config([client_state]),
        "wrong_config": config([wrong]),
        "signs_timestamp": False,
        "signs_body": False,
        "tolerance_secs": 300,
        "notes": ("No signature: each value[] item carries clientState, the secret given at subscription time, "
                  "compared in constant time; every item must match a configured secret. Handshake: Graph POSTs "
                  "?validationToken=<url-encoded, '+' for space> with an empty text/plain body; answer 200 "
                  "text/plain with the decoded token within 10 s, never stored (unsigned: answer it without a "
                  "secret). The same handshake comes to a lifecycleNotificationUrl. Batch: value[] split per "
                  "item. id = item.id when present (optional per changeNotification), else lowercase hex "
                  "sha256 of the item's exact JSON bytes as they appear in the body; type = changeType, or "
                  "lifecycleEvent for lifecycle notifications. The stored payload contains the clientState. "
                  "Graph wants a 2xx (202 Accepted preferred) within 3 s. Rich notifications "
                  "(validationTokens JWTs, encryptedContent) are not covered here. msgraph-sdk has no "
                  "notification verifier."),
        "cases": cases,
    })


# ---------------------------------------------------------------- hubspot

def hubspot():
    from hubspot.utils import signature as hs_sig
    from hubspot.utils.signature import Signature
    from hubspot.exceptions import InvalidSignatureTimestampError

    secret = "7c1d2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    wrong = "00000000-0000-4000-8000-000000000000"
    url = BASE + "/hubspot"
    ts = str(NOW * 1000)

    real_datetime = _dt.datetime

    class Pinned(real_datetime):
        pinned = NOW

        @classmethod
        def now(cls, tz=None):
            return real_datetime.fromtimestamp(cls.pinned, tz=tz)

    def sign_and_prove(body, now):
        sig = Signature.get_signature(secret, body, "v3", http_uri=url, http_method="POST", timestamp=ts)
        mine = b64(hmac_sha256(secret, ("POST" + url + body + ts).encode("utf-8")))
        must(sig == mine, "hubspot get_signature differs from the documented algorithm")
        hs_sig.datetime = Pinned
        try:
            Pinned.pinned = now
            must(Signature.is_valid(sig, secret, body, http_uri=url, http_method="POST",
                                    signature_version="v3", timestamp=ts), "hubspot is_valid refused")
            must(not Signature.is_valid(sig, wrong, body, http_uri=url, http_method="POST",
                                        signature_version="v3", timestamp=ts), "hubspot accepted a wrong secret")
            Pinned.pinned = now + 301
            try:
                Signature.is_valid(sig, secret, body, http_uri=url, http_method="POST",
                                   signature_version="v3", timestamp=ts)
                sys.exit("SDK CHECK FAILED: hubspot accepted a stale timestamp")
            except InvalidSignatureTimestampError:
                pass
        finally:
            hs_sig.datetime = real_datetime
        return sig

    def ev(event_id, sub_type, obj, sub_id, extra=None):
        e = {"eventId": event_id, "subscriptionId": sub_id, "portalId": 62515, "appId": 54321,
             "occurredAt": NOW * 1000 - 1500, "subscriptionType": sub_type, "attemptNumber": 0,
             "objectId": obj, "changeSource": "CRM_UI", "changeFlag": "NEW"}
        if extra:
            e.update(extra)
        return e

    def key(e):
        return "%s:%s:%s:%s" % (e["portalId"], e["subscriptionId"], e["objectId"], e["eventId"])

    evs = [
        ev(1001, "contact.creation", 123, 12345),
        ev(1002, "contact.propertyChange", 123, 12346,
           {"propertyName": "firstname", "propertyValue": "Ada", "changeFlag": None}),
        ev(1002, "contact.propertyChange", 123, 12347,
           {"propertyName": "lastname", "propertyValue": "Lovelace", "changeFlag": None}),
    ]
    for e in evs:
        if e.get("changeFlag") is None:
            del e["changeFlag"]
    single = [ev(2001, "deal.deletion", 987, 22222, {"changeFlag": "DELETED"})]

    cases = []
    for name, items in [("batch of three events (two share an eventId)", evs),
                        ("single-event array", single)]:
        body = compact(items)
        sig = sign_and_prove(body, NOW)
        cases.append(case(name, url, [("content-type", "application/json"),
                                      ("x-hubspot-signature-v3", sig),
                                      ("x-hubspot-request-timestamp", ts)],
                          body, batch([(key(e), e["subscriptionType"]) for e in items])))

    import importlib.metadata as md
    write({
        "provider": "hubspot",
        "made_by": "sdk",
        "made_with": "hubspot-api-client %s (PyPI): Signature.get_signature(v3) made it, Signature.is_valid(v3) verified it with the clock pinned" % md.version("hubspot-api-client"),
        "docs": "https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation",
        "config": config([secret], url=url),
        "wrong_config": config([wrong], url=url),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": ("X-HubSpot-Signature-v3 = base64(HMAC-SHA256(client secret as UTF-8, method + requestUri + raw "
                  "body + X-HubSpot-Request-Timestamp)); the timestamp is Unix milliseconds; reject older than "
                  "5 minutes (the SDK checks only the past). requestUri is the full URL HubSpot called, so it "
                  "comes from config.url (+ the query as received); the docs say to decode %3A %2F %3F %40 %21 "
                  "%24 %27 %28 %29 %2A %2C %3B in it before signing (not covered by a case here). The body is a "
                  "JSON array of up to 100 events. HubSpot documents eventId as not guaranteed unique and "
                  "attemptNumber changes on retries, so id = portalId:subscriptionId:objectId:eventId; type = "
                  "subscriptionType. The v1/v2 X-HubSpot-Signature headers are also sent and are ignored."),
        "cases": cases,
    })


# ---------------------------------------------------------------- calendly

def calendly():
    key = "calendly-test-signing-key-uN5b0cXq2Wm8"
    wrong = "calendly-other-signing-key-000000000000"
    url = BASE + "/calendly"

    def body_of(ev, uri_tail, status):
        return compact({
            "created_at": "2023-11-14T22:13:19.000000Z",
            "created_by": "https://api.calendly.com/users/AAAAAAAAAAAAAAAA",
            "event": ev,
            "payload": {
                "cancel_url": "https://calendly.com/cancellations/" + uri_tail,
                "created_at": "2023-11-14T22:13:18.000000Z",
                "email": "ada@example.com",
                "event": "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2",
                "name": "Ada Lovelace",
                "status": status,
                "timezone": "Europe/London",
                "updated_at": "2023-11-14T22:13:19.000000Z",
                "uri": "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/" + uri_tail,
            },
        })

    cases = []
    for ev, tail, status in [("invitee.created", "AAAAAAAAAAAAAAAA", "active"),
                             ("invitee.canceled", "BBBBBBBBBBBBBBBB", "canceled")]:
        body = body_of(ev, tail, status)
        sig = hmac.new(key.encode(), (str(NOW) + "." + body).encode(), hashlib.sha256).hexdigest()
        cases.append(case(ev, url, [("content-type", "application/json; charset=utf-8"),
                                    ("calendly-webhook-signature", "t=%d,v1=%s" % (NOW, sig))],
                          body, event(sha256_hex(body.encode()), ev)))
    write({
        "provider": "calendly",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (no registry SDK verifies Calendly webhooks)",
        "docs": "https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures",
        "config": config([key]),
        "wrong_config": config([wrong]),
        "signs_timestamp": True,
        "tolerance_secs": 180,
        "notes": ("Calendly-Webhook-Signature: t=<unix s>,v1=<hex HMAC-SHA256(signing key as UTF-8, t + '.' + "
                  "raw body)>. The docs' verification example rejects signatures older than 3 minutes. No event "
                  "id is sent and t changes per delivery, so id = lowercase hex sha256 of the raw body (the "
                  "signed event, without the per-delivery t); type = body.event."),
        "cases": cases,
    })


# ---------------------------------------------------------------- typeform

def typeform():
    secret = "typeform-test-secret-4q8Lk2Zp"
    wrong = "typeform-other-secret-0000000"
    url = BASE + "/typeform"

    def body_of(event_id, event_type, token):
        return compact({
            "event_id": event_id,
            "event_type": event_type,
            "form_response": {
                "form_id": "lT4Z3j",
                "token": token,
                "landed_at": "2023-11-14T22:12:05Z",
                "submitted_at": "2023-11-14T22:13:19Z",
                "definition": {"id": "lT4Z3j", "title": "Webhooks example",
                               "fields": [{"id": "DlXFaesGBpoF", "title": "Your name?", "type": "short_text",
                                           "ref": "name"}]},
                "answers": [{"type": "text", "text": "Ada Lovelace",
                             "field": {"id": "DlXFaesGBpoF", "type": "short_text", "ref": "name"}}],
            },
        })

    cases = []
    for eid, et, tok in [("01HFA1B2C3D4E5F6G7H8J9K0MN", "form_response", "a3a12ec67a1365927098a606107fac15"),
                         ("01HFA1B2C3D4E5F6G7H8J9K0MP", "form_response_partial", "b4b23fd78b2476038109b717218abd26")]:
        body = body_of(eid, et, tok)
        sig = "sha256=" + b64(hmac_sha256(secret, body.encode()))
        cases.append(case(et, url, [("content-type", "application/json"), ("typeform-signature", sig),
                                    ("user-agent", "Typeform Webhooks")],
                          body, event(eid, et)))
    write({
        "provider": "typeform",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (no registry SDK verifies Typeform webhooks)",
        "docs": "https://www.typeform.com/developers/webhooks/secure-your-webhooks/",
        "config": config([secret]),
        "wrong_config": config([wrong]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": ("Typeform-Signature: 'sha256=' + base64(HMAC-SHA256(secret as UTF-8, raw body)). No timestamp. "
                  "id = body.event_id, type = body.event_type."),
        "cases": cases,
    })


# ---------------------------------------------------------------- docusign

def docusign():
    key = "dsHMACtestKey1+QmF0Y2hHVmVjdG9yS2V5MDE="
    old = "dsHMACtestKey0+T2xkS2V5Tm90Q29uZmlndXJlZA="
    wrong = "dsHMACwrongKey+V3JvbmdLZXlXcm9uZ0tleTA="
    url = BASE + "/docusign"
    acct = "9a4b1c2d-0000-4e5f-8a9b-0c1d2e3f4a5b"

    def body_of(ev, env, generated, extra):
        data = {"accountId": acct, "userId": "5d1e2f3a-1111-4b2c-9d3e-4f5a6b7c8d9e", "envelopeId": env}
        data.update(extra)
        return compact({
            "event": ev, "apiVersion": "v2.1",
            "uri": "/restapi/v2.1/accounts/%s/envelopes/%s" % (acct, env),
            "retryCount": 0, "configurationId": 10418365,
            "generatedDateTime": generated, "data": data,
        })

    e1 = "3f2a1b0c-aaaa-4bbb-8ccc-0d1e2f3a4b5c"
    e2 = "7c6b5a49-dddd-4eee-9fff-1a2b3c4d5e6f"
    cases = []
    b1 = body_of("envelope-completed", e1, "2023-11-14T22:13:19.4510000Z", {})
    cases.append(case("envelope-completed (one key)", url,
                      [("content-type", "application/json"), ("x-authorization-digest", "HMACSHA256"),
                       ("x-docusign-signature-1", b64(hmac_sha256(key, b1.encode())))],
                      b1, event("%s:envelope-completed:2023-11-14T22:13:19.4510000Z" % e1, "envelope-completed")))
    b2 = body_of("recipient-completed", e2, "2023-11-14T22:13:18.1230000Z", {"recipientId": "1"})
    cases.append(case("recipient-completed during key rotation (signature-2 matches)", url,
                      [("content-type", "application/json"), ("x-authorization-digest", "HMACSHA256"),
                       ("x-docusign-signature-1", b64(hmac_sha256(old, b2.encode()))),
                       ("x-docusign-signature-2", b64(hmac_sha256(key, b2.encode())))],
                      b2, event("%s:recipient-completed:2023-11-14T22:13:18.1230000Z:1" % e2, "recipient-completed")))
    write({
        "provider": "docusign",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (docusign-esign has no Connect HMAC verifier)",
        "docs": "https://developers.docusign.com/platform/webhooks/connect/validate",
        "config": config([key]),
        "wrong_config": config([wrong]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": ("X-DocuSign-Signature-N (N = 1..100, one header per active Connect HMAC key) = base64(HMAC-SHA256(key "
                  "as UTF-8, raw body)); any header may match any configured key; x-authorization-digest names "
                  "HMACSHA256. No timestamp is signed. JSON SIM body; no event id, and retryCount in the body "
                  "changes per retry, so id = data.envelopeId:event:generatedDateTime (as strings), and :data.recipientId where "
                  "there is one (parallel recipients' events can share the instant); type = event."),
        "cases": cases,
    })


# ---------------------------------------------------------------- zendesk

def zendesk():
    secret = "dGVzdC16ZW5kZXNrLXNpZ25pbmctc2VjcmV0LWJhdGNoLWc="
    wrong = "b3RoZXItemVuZGVzay1zaWduaW5nLXNlY3JldC0wMDAwMA=="
    url = BASE + "/zendesk"
    ts = iso_z(NOW)

    def sign(body):
        return b64(hmac_sha256(secret, (ts + body).encode("utf-8")))

    ev_body = compact({
        "type": "zen:event-type:ticket.created",
        "account_id": 12514403,
        "id": "01HFA2Z6D4W3N5Q7R9T1V3X5Z7",
        "time": "2023-11-14T22:13:19.000Z",
        "zendesk_event_version": "2022-11-06",
        "subject": "zen:ticket:4711",
        "detail": {"id": "4711", "subject": "Printer on fire", "status": "NEW", "priority": "HIGH",
                   "requester_id": "366224412", "created_at": "2023-11-14T22:13:19Z"},
        "event": {},
    })
    trig_body = compact({"ticket_id": "4712", "status": "solved", "note": "sent by a trigger, body written by the admin"})

    def hdr(inv, body):
        return [("content-type", "application/json"), ("x-zendesk-account-id", "12514403"),
                ("x-zendesk-webhook-id", "01F1KRFQ6BG29CNWFR60NK5FNY"),
                ("x-zendesk-webhook-invocation-id", inv),
                ("x-zendesk-webhook-signature", sign(body)),
                ("x-zendesk-webhook-signature-timestamp", ts)]

    cases = [
        case("event subscription: zen:event-type:ticket.created", url, hdr("8350205582", ev_body), ev_body,
             event("8350205582", "zen:event-type:ticket.created")),
        case("trigger webhook with an admin-written body (no type)", url, hdr("8350205583", trig_body), trig_body,
             event("8350205583", None)),
    ]
    write({
        "provider": "zendesk",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (no registry SDK verifies Zendesk webhooks)",
        "docs": "https://developer.zendesk.com/documentation/webhooks/verifying/",
        "config": config([secret]),
        "wrong_config": config([wrong]),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "notes": ("X-Zendesk-Webhook-Signature = base64(HMAC-SHA256(signing secret as UTF-8, "
                  "X-Zendesk-Webhook-Signature-Timestamp + raw body)); the timestamp is ISO 8601 UTC "
                  "(2023-11-14T22:13:20Z), not a number; no tolerance is documented (300 s). "
                  "id = X-Zendesk-Webhook-Invocation-Id (kept across retry attempts of one invocation; present for "
                  "event and trigger webhooks alike); type = body.type when it is a Zendesk event, else null. "
                  "Trigger/automation webhooks may also use GET/PUT/PATCH/DELETE with an empty body (signed over "
                  "the timestamp alone); not covered here."),
        "cases": cases,
    })


# ---------------------------------------------------------------- dropbox

def dropbox():
    secret = "q7w2e9r4t1y6u3i"
    wrong = "a1s2d3f4g5h6j7k"
    url = BASE + "/dropbox"
    body = compact({"list_folder": {"accounts": ["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc",
                                                 "dbid:AACwLbKmLhHm4dGEQbgqXUtYgEwgGxD2wAc"]},
                    "delta": {"users": [12345678, 23456789]}})
    sig = hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()
    challenge = "Zx5fG2kP9qR1sT8u"
    cases = [
        case("verification request: GET ?challenge= echoed", url + "?challenge=" + challenge, [], "",
             {"kind": "handshake", "answer": {"status": 200, "content_type": "text/plain", "body": challenge}},
             method="GET"),
        case("change notification for two accounts", url,
             [("content-type", "application/json"), ("x-dropbox-signature", sig),
              ("user-agent", "DropboxWebhooks/1.0")],
             # The same body recurs for later changes: the id is its hash with the minute it arrived (at NOW).
             body, event("%s:%d" % (sha256_hex(body.encode()), NOW * 1000 // 60000), None)),
    ]
    write({
        "provider": "dropbox",
        "made_by": "docs",
        "made_with": "built from the documented algorithm (the dropbox SDK does not verify webhooks)",
        "docs": "https://www.dropbox.com/developers/reference/webhooks",
        "config": config([secret]),
        "wrong_config": config([wrong]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "notes": ("X-Dropbox-Signature = lowercase hex HMAC-SHA256(app secret as UTF-8, raw body). Verification "
                  "request: GET ?challenge=<random>, answer 200 text/plain with the challenge (also "
                  "X-Content-Type-Options: nosniff), unsigned, never stored. A notification only says 'these "
                  "accounts changed'; the docs tell the app to call /files/list_folder/continue with its stored "
                  "cursor, so handling is idempotent. It has no id, and the same body recurs for every later change "
                  "of the same accounts: id = hex sha256 of the body, ':', and the minute it arrived (UTC ms / "
                  "60000; the harness receives each case at its `now`), so a later change is its own event; type = "
                  "null."),
        "cases": cases,
    })


# ---------------------------------------------------------------- dropbox sign

def dropbox_sign():
    from dropbox_sign import EventCallbackHelper
    from dropbox_sign.models import EventCallbackRequest
    import importlib.metadata as md

    api_key = "c4f1a9e27b3d58f6a0e1c2d3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3a2b"
    wrong = "0000000000000000000000000000000000000000000000000000000000000000"
    url = BASE + "/dropbox-sign"
    answer = {"status": 200, "content_type": "text/plain", "body": "Hello API Event Received"}
    boundary = "----DropboxSignBoundary7MA4YWxkTrZu0gW"

    def payload(ev_type, ev_time, extra):
        h = hmac.new(api_key.encode(), (ev_time + ev_type).encode(), hashlib.sha256).hexdigest()
        p = {"event": {"event_time": ev_time, "event_type": ev_type, "event_hash": h,
                       "event_metadata": {"related_signature_id": extra.pop("related", None),
                                          "reported_for_account_id": "63522885f9261e2b04eea043933ee7313eb674fd",
                                          "reported_for_app_id": None, "event_message": None}}}
        p.update(extra)
        raw = compact(p)
        req = EventCallbackRequest.init(raw)
        must(EventCallbackHelper.is_valid(api_key, req), "dropbox-sign is_valid refused " + ev_type)
        must(not EventCallbackHelper.is_valid(wrong, req), "dropbox-sign accepted a wrong key")
        return raw

    def multipart(raw):
        return ("--%s\r\nContent-Disposition: form-data; name=\"json\"\r\n\r\n%s\r\n--%s--\r\n"
                % (boundary, raw, boundary))

    sr = {"signature_request_id": "fa5c8a0b0f492d768749333ad6fcc214c111e967", "title": "NDA",
          "is_complete": False, "has_error": False, "test_mode": True,
          "signatures": [{"signature_id": "78caf2a1d01cd39cea2bc1cbb340dac3", "signer_email_address": "ada@example.com",
                          "signer_name": "Ada", "status_code": "awaiting_signature"}]}
    sent = payload("signature_request_sent", str(NOW - 1), {"signature_request": dict(sr)})
    done_sr = dict(sr, is_complete=True,
                   signatures=[dict(sr["signatures"][0], status_code="signed")])
    signed = payload("signature_request_all_signed", str(NOW - 1),
                     {"signature_request": done_sr, "related": "78caf2a1d01cd39cea2bc1cbb340dac3"})
    test = payload("callback_test", str(NOW), {})

    def event_id(raw):
        """What event_hash signs (event_time, event_type) and what the event is about, read as JSON values: the
        hex SHA-256 of the compact JSON array of them (null where absent). Never the event's bytes, which nothing
        signs."""
        p = json.loads(raw)

        def at(*path):
            v = p
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            return str(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None

        ev = p["event"]
        parts = [str(ev["event_time"]), str(ev["event_type"]),
                 at("event", "event_metadata", "related_signature_id"),
                 at("event", "event_metadata", "reported_for_account_id"),
                 at("event", "event_metadata", "reported_for_app_id"),
                 at("signature_request", "signature_request_id"), at("template", "template_id"),
                 at("account", "account_id")]
        return sha256_hex(json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode())

    mp = [("content-type", "multipart/form-data; boundary=" + boundary), ("user-agent", "Dropbox Sign API")]
    cases = [
        case("signature_request_sent (multipart/form-data, field json)", url, mp, multipart(sent),
             event(event_id(sent), "signature_request_sent", answer)),
        case("signature_request_all_signed (application/json body)", url,
             [("content-type", "application/json"), ("user-agent", "Dropbox Sign API")], signed,
             event(event_id(signed), "signature_request_all_signed", answer)),
        case("callback_test sent when the callback URL is set", url, mp, multipart(test),
             {"kind": "handshake", "answer": answer}),
    ]
    write({
        "provider": "dropbox-sign",
        "made_by": "sdk",
        "made_with": "dropbox-sign %s (PyPI): EventCallbackHelper.is_valid(api_key, EventCallbackRequest.init(json)) verified each event_hash" % md.version("dropbox-sign"),
        "docs": "https://developers.hellosign.com/docs/events/walkthrough/",
        "config": config([api_key]),
        "wrong_config": config([wrong]),
        "signs_timestamp": False,
        "signs_body": False,
        "tolerance_secs": 300,
        "notes": ("Signature inside the body: event.event_hash = lowercase hex HMAC-SHA256(API key as UTF-8, "
                  "event.event_time + event.event_type). The event is the 'json' field of a multipart/form-data "
                  "POST (as documented), or the whole body when it is application/json. event_time is signed but "
                  "retries over ~3 days keep it, so it is not checked for freshness. Every callback must be "
                  "answered 200 with exactly 'Hello API Event Received' or it is retried. No event id: "
                  "event_hash only covers time + type (two requests signed in one second collide) and nothing "
                  "signs the rest (its bytes can be rewritten freely), so id = lowercase hex sha256 of the compact "
                  "JSON array [event_time, event_type, event_metadata.related_signature_id, "
                  "event_metadata.reported_for_account_id, event_metadata.reported_for_app_id, "
                  "signature_request.signature_request_id, template.template_id, account.account_id] read as "
                  "values (null where absent); type = event.event_type. callback_test (sent when the URL is "
                  "set) is answered the same way and not stored."),
        "cases": cases,
    })


# ---------------------------------------------------------------- box

def box():
    from box_sdk_gen.managers import webhooks as bw
    from box_sdk_gen.managers.webhooks import WebhooksManager
    import importlib.metadata as md

    primary = "SamplePrimaryKey0123456789abcdef"
    secondary = "SampleSecondaryKey0123456789abcd"
    new_primary = "NewPrimaryKeyNotConfiguredYet000"
    wrong = "WrongKeyWrongKeyWrongKeyWrongKey"
    url = BASE + "/box"
    ts = "2023-11-14T14:13:20-08:00"  # == NOW, with an offset as Box sends it

    def sign(key, body):
        h = hmac.new(key.encode(), digestmod=hashlib.sha256)
        h.update(body.encode())
        h.update(ts.encode())
        return b64(h.digest())

    def prove(body, headers):
        hd = dict(headers)
        real = bw.get_epoch_time_in_seconds
        try:
            bw.get_epoch_time_in_seconds = lambda: NOW
            must(WebhooksManager.validate_message(body, hd, primary, secondary_key=secondary),
                 "box validate_message refused")
            must(not WebhooksManager.validate_message(body, hd, wrong, secondary_key=wrong),
                 "box accepted a wrong key")
            bw.get_epoch_time_in_seconds = lambda: NOW + 601
            must(not WebhooksManager.validate_message(body, hd, primary, secondary_key=secondary),
                 "box accepted a stale timestamp")
        finally:
            bw.get_epoch_time_in_seconds = real

    def body_of(ev_id, trigger, file_id, name):
        b = compact({
            "type": "webhook_event", "id": ev_id, "created_at": "2023-11-14T14:13:19-08:00",
            "trigger": trigger,
            "webhook": {"id": "1234567890", "type": "webhook"},
            "created_by": {"type": "user", "id": "11446498", "name": "Ada Lovelace", "login": "ada@example.com"},
            "source": {"id": file_id, "type": "file", "name": name,
                       "parent": {"type": "folder", "id": "22222", "name": "Reports"}},
            "additional_info": [],
        })
        return b.replace("/", "\\/")  # Box's body escapes slashes (PHP json_encode style)

    cases = []
    b1 = body_of("eb0c4e06-751f-442c-86f8-fd5bb404dbec", "FILE.UPLOADED", "1245354331", "Q3/report.pdf")
    h1 = [("content-type", "application/json; charset=UTF-8"),
          ("box-delivery-id", "673a081b-bb4b-4d45-b4f1-4131a29c1d07"),
          ("box-delivery-timestamp", ts), ("box-signature-algorithm", "HmacSHA256"),
          ("box-signature-primary", sign(primary, b1)), ("box-signature-secondary", sign(secondary, b1)),
          ("box-signature-version", "1"), ("user-agent", "Box-WH-Client/0.1")]
    prove(b1, h1)
    cases.append(case("FILE.UPLOADED signed with both keys", url, h1, b1,
                      event("eb0c4e06-751f-442c-86f8-fd5bb404dbec", "FILE.UPLOADED")))
    b2 = body_of("0f46a6ca-86bf-44ab-8cf5-f08e1e02876b", "FILE.DELETED", "1245354332", "old.txt")
    h2 = [("content-type", "application/json; charset=UTF-8"),
          ("box-delivery-id", "f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f"),
          ("box-delivery-timestamp", ts), ("box-signature-algorithm", "HmacSHA256"),
          ("box-signature-primary", sign(new_primary, b2)), ("box-signature-secondary", sign(secondary, b2)),
          ("box-signature-version", "1"), ("user-agent", "Box-WH-Client/0.1")]
    prove(b2, h2)
    cases.append(case("FILE.DELETED after the primary key was rotated (secondary matches)", url, h2, b2,
                      event("0f46a6ca-86bf-44ab-8cf5-f08e1e02876b", "FILE.DELETED")))
    write({
        "provider": "box",
        "made_by": "sdk",
        "made_with": "box-sdk-gen %s (PyPI): WebhooksManager.validate_message(body, headers, primary, secondary_key=) verified each case with the clock pinned" % md.version("box-sdk-gen"),
        "docs": "https://developer.box.com/guides/webhooks/v2/signatures-v2/",
        "config": config([primary, secondary]),
        "wrong_config": config([wrong]),
        "signs_timestamp": True,
        "tolerance_secs": 600,
        "notes": ("box-signature-primary / box-signature-secondary = base64(HMAC-SHA256(key as UTF-8, raw body "
                  "bytes then box-delivery-timestamp bytes)), one per key configured in the developer console "
                  "(config.secrets = [primary, secondary]); either header matching either configured key "
                  "passes. Only box-signature-version 1 with box-signature-algorithm HmacSHA256 is defined. "
                  "box-delivery-timestamp is RFC 3339 with an offset; reject older than 10 minutes (the SDK also "
                  "rejects any future time). id = body.id (stable across retries; box-delivery-id changes per "
                  "delivery), type = body.trigger."),
        "cases": cases,
    })


def main():
    auth0()
    microsoft_graph()
    hubspot()
    calendly()
    typeform()
    docusign()
    zendesk()
    dropbox()
    dropbox_sign()
    box()


if __name__ == "__main__":
    main()
