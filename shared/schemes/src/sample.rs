//! A body a provider could have sent, holding a given id and type where the scheme looks for them: for
//! `inbox send` and for end-to-end tests of any source.

use serde_json::{Map, Value};

use crate::identity::Identity;
use crate::locator::Locator;
use crate::providers::Identify;
use crate::scheme::Scheme;

/// The body, its content type, and headers the provider sends beside its signature.
pub struct Sample {
    pub body: Vec<u8>,
    pub content_type: &'static str,
    pub headers: Vec<(http::HeaderName, String)>,
}

impl Scheme {
    /// A body whose id and type (for a batch, each item's) are where `identify` finds them. A scheme whose
    /// identity is its own rule gets a small JSON event with `id` and `type`.
    pub fn sample(&self, items: &[Identity]) -> Sample {
        self.sample_at(items, 0)
    }

    /// [`Scheme::sample`] at `now_unix`, for examples that carry a time.
    pub fn sample_at(&self, items: &[Identity], now_unix: i64) -> Sample {
        let first = items.first();
        if let (Some(example), Some(i)) = (self.preset().and_then(|p| p.example), first) {
            let fill = |text: &str| {
                text.replace("{id}", &i.event_id)
                    .replace("{type}", i.event_type.as_deref().unwrap_or("sample"))
                    .replace("{now_ms}", &(now_unix * 1000).to_string())
                    .replace("{now}", &now_unix.to_string())
            };
            return Sample {
                body: fill(example.body).into_bytes(),
                content_type: example.content_type,
                headers: example
                    .headers
                    .iter()
                    .filter_map(|(n, v)| Some((http::HeaderName::from_bytes(n.as_bytes()).ok()?, fill(v))))
                    .collect(),
            };
        }
        let json = |value: Value| Sample {
            body: value.to_string().into_bytes(),
            content_type: "application/json",
            headers: Vec::new(),
        };
        let Some(preset) = self.preset() else {
            let mut v = Map::new();
            if let Some(i) = first {
                for key in ["id", "event_id"] {
                    v.insert(key.into(), Value::String(i.event_id.clone()));
                }
                if let Some(t) = &i.event_type {
                    v.insert("type".into(), Value::String(t.clone()));
                }
            }
            return json(Value::Object(v));
        };
        match &preset.identify {
            Identify::At { id, event_type } => {
                let Some(i) = first else {
                    return json(Value::Object(Map::new()));
                };
                let mut fields = vec![(id, i.event_id.clone())];
                if let (Some(l), Some(t)) = (event_type, &i.event_type) {
                    fields.push((l, t.clone()));
                }
                if fields.iter().any(|(l, _)| matches!(l, Locator::Form(_))) {
                    let mut form = form_urlencoded_pairs(&fields);
                    if form.is_empty() {
                        form = "note=sample".to_owned();
                    }
                    return Sample {
                        body: form.into_bytes(),
                        content_type: "application/x-www-form-urlencoded",
                        headers: Vec::new(),
                    };
                }
                let mut root = Value::Object(Map::new());
                for (locator, value) in fields {
                    if let Locator::Json(pointer) = locator {
                        set(&mut root, pointer, Value::String(value));
                    }
                }
                json(root)
            }
            Identify::Batch(batch) => {
                let elements: Vec<Value> = items
                    .iter()
                    .map(|i| {
                        let mut event = Value::Object(Map::new());
                        set(&mut event, batch.id, Value::String(i.event_id.clone()));
                        if let (Some(p), Some(t)) = (batch.event_type, &i.event_type) {
                            set(&mut event, p, Value::String(t.clone()));
                        }
                        let mut element = Value::Object(Map::new());
                        if batch.item.is_empty() {
                            element = event;
                        } else {
                            set(&mut element, batch.item, event);
                        }
                        element
                    })
                    .collect();
                let mut root = Value::Null;
                set(&mut root, batch.items, Value::Array(elements));
                match batch.form {
                    Some(field) => Sample {
                        body: form_urlencoded_pairs_raw(&[(field, root.to_string())]).into_bytes(),
                        content_type: "application/x-www-form-urlencoded",
                        headers: Vec::new(),
                    },
                    None => json(root),
                }
            }
            Identify::Custom(_) => {
                let mut v = Map::new();
                if let Some(i) = first {
                    v.insert("id".into(), Value::String(i.event_id.clone()));
                    if let Some(t) = &i.event_type {
                        v.insert("type".into(), Value::String(t.clone()));
                    }
                }
                json(Value::Object(v))
            }
        }
    }
}

/// Sets `pointer` in `root`, making objects on the way; `""` replaces the root.
fn set(root: &mut Value, pointer: &str, value: Value) {
    if pointer.is_empty() {
        *root = value;
        return;
    }
    let mut at = root;
    let tokens: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (n, token) in tokens.iter().enumerate() {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        let Value::Object(map) = at else { return };
        if n + 1 == tokens.len() {
            map.insert((*token).to_owned(), value);
            return;
        }
        at = map
            .entry((*token).to_owned())
            .or_insert(Value::Object(Map::new()));
    }
}

fn form_urlencoded_pairs(fields: &[(&Locator, String)]) -> String {
    let pairs: Vec<(&str, String)> = fields
        .iter()
        .filter_map(|(l, v)| match l {
            Locator::Form(name) => Some((name.as_str(), v.clone())),
            _ => None,
        })
        .collect();
    form_urlencoded_pairs_raw(&pairs)
}

fn form_urlencoded_pairs_raw(pairs: &[(&str, String)]) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}
