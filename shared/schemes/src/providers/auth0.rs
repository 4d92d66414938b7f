//! Auth0 log streams (custom webhook): no signature; the stream's "Authorization Token" is sent as the whole
//! `Authorization` header value, exactly as typed (often `Bearer ...`), and compared in constant time. A request
//! carries log records `{log_id, data}` as the stream's Content Format says: a JSON array, JSON Lines (one record
//! per line) or one JSON object; each record is its own event, id `log_id`, type `data.type` (Auth0's log event
//! codes, `s`, `fp`, ...). No handshake, no required answer.
//! <https://auth0.com/docs/customize/log-streams/custom-log-streams>

use serde_json::value::RawValue;
use serde_json::Value;

use crate::families::{Family, Token};
use crate::providers::{Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Identified, Item, Request};
use crate::errors::IdError;
use crate::identity::{valid_id, Identity};

pub(super) fn preset() -> Preset {
    Preset {
        // One log record, as a stream with Content Format "JSON Object" sends it.
        example: Some(Example {
            body: r#"{"log_id":"{id}","data":{"date":"2023-11-14T22:13:18.000Z","type":"{type}","description":"Successful login","client_id":"aI61p8I8aFjmYRliLWgvM9ev97kCCNDB","client_name":"Default App","ip":"203.0.113.7","user_id":"auth0|6552f0a1b2c3d4e5f6a7b8c9","user_name":"ada@example.com","hostname":"example-tenant.eu.auth0.com","log_id":"{id}"}}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new(
            "auth0",
            Family::Token(Token::header("authorization")),
            Identify::Custom(identify),
        )
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let text = std::str::from_utf8(req.body).map_err(|_| IdError::MalformedBody)?;
    let records: Vec<&str> = if text.trim_start().starts_with('[') {
        let list: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
        list.into_iter().map(RawValue::get).collect()
    } else {
        let lines: Vec<&str> = text
            .split('\n')
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.trim().is_empty())
            .collect();
        if lines.len() <= 1 {
            // JSON Object: one record, the body itself.
            return Ok(Identified::One(identity(text, 0)?));
        }
        lines
    };
    if records.is_empty() {
        return Err(IdError::Missing("the delivery holds no log records".to_owned()));
    }
    if records.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    records
        .into_iter()
        .enumerate()
        .map(|(i, record)| {
            Ok(Item {
                identity: identity(record, i)?,
                payload: record.as_bytes().to_vec(),
            })
        })
        .collect::<Result<Vec<_>, IdError>>()
        .map(Identified::Batch)
}

fn identity(record: &str, i: usize) -> Result<Identity, IdError> {
    let value: Value = serde_json::from_str(record).map_err(|_| IdError::MalformedBody)?;
    let place = format!("record {i}: json /log_id");
    let log_id = value
        .get("log_id")
        .and_then(Value::as_str)
        .ok_or_else(|| IdError::Missing(place.clone()))?;
    Ok(Identity {
        event_id: valid_id(&place, log_id.to_owned())?,
        event_type: value
            .pointer("/data/type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use crate::{Credentials, Identity, Request, Scheme, Signer};

    /// Every provider of this batch verifies what its own signer signs (what `inbox send` relies on).
    #[test]
    fn batch_g_verifies_what_it_signs() {
        let graph = br#"{"value":[{"subscriptionId":"s","changeType":"created","resource":"r"}]}"#;
        let sign = br#"{"event":{"event_time":"1700000000","event_type":"signature_request_sent"}}"#;
        let cases: [(&str, &[u8]); 10] = [
            ("auth0", br#"{"log_id":"1","data":{"type":"s"}}"#),
            ("microsoft-graph", graph),
            ("hubspot", br#"[{"eventId":1,"subscriptionType":"contact.creation"}]"#),
            ("calendly", br#"{"event":"invitee.created"}"#),
            ("typeform", br#"{"event_id":"e","event_type":"form_response"}"#),
            ("docusign", br#"{"event":"envelope-sent","generatedDateTime":"t","data":{}}"#),
            ("zendesk", br#"{"type":"zen:event-type:ticket.created"}"#),
            ("dropbox", br#"{"list_folder":{"accounts":[]}}"#),
            ("dropbox-sign", sign),
            ("box", br#"{"id":"e","trigger":"FILE.UPLOADED"}"#),
        ];
        let uri = Uri::from_static("/webhooks/x");
        let identity = Identity {
            event_id: "e".to_owned(),
            event_type: None,
        };
        let now = 1_700_000_000;
        for (name, body) in cases {
            let scheme = Scheme::named(name).unwrap();
            let key = scheme.key_from_secret("batch-g-test-secret").unwrap();
            let creds = Credentials {
                url: Some("https://hooks.example.com/webhooks/x".to_owned()),
                ..Credentials::secrets(vec![key.clone()])
            };
            let mut headers = HeaderMap::new();
            headers.insert("content-type", HeaderValue::from_static("application/json"));
            let signed = scheme
                .sign_request(
                    &Signer::Secret(key),
                    &creds,
                    &Request::post(&uri, &headers, body),
                    &identity,
                    now,
                )
                .unwrap();
            for (header, value) in signed.headers {
                headers.append(header, HeaderValue::from_str(&value).unwrap());
            }
            let body = signed.body.unwrap_or_else(|| body.to_vec());
            let req = Request::post(&uri, &headers, &body);
            scheme
                .verify_request(&creds, &req, now, 300, None)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let wrong = Credentials {
                url: creds.url.clone(),
                ..Credentials::secrets(vec![scheme.key_from_secret("another-secret").unwrap()])
            };
            assert!(scheme.verify_request(&wrong, &req, now, 300, None).is_err(), "{name}");
            scheme.identify_request(&req).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
