//! The body as a filter sees it: JSON parsed into CEL values, keeping only the parts the filter names.
//!
//! A filter reading `body.data.object.id` keeps that one string: every other key is skipped by the parser without
//! being built, so the cost of a large body is one pass over its bytes. What is kept is bounded too: past `limit`
//! units (a value, or a KiB of a string) the parse stops, and the filter's verdict is an error. A body that is not
//! JSON is `null`.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use cel::objects::{Key, Map};
use cel::Value;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The parts of the body a filter reads, as a tree of keys: a leaf keeps everything under it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Wanted {
    whole: bool,
    keys: BTreeMap<String, Wanted>,
}

impl Wanted {
    /// Keeps everything under `path`.
    pub fn add(&mut self, path: &[String]) {
        if self.whole {
            return;
        }
        match path.split_first() {
            None => {
                self.whole = true;
                self.keys.clear();
            }
            Some((first, rest)) => self.keys.entry(first.clone()).or_default().add(rest),
        }
    }

    /// Nothing of the body is read: it need not be parsed at all.
    pub fn is_empty(&self) -> bool {
        !self.whole && self.keys.is_empty()
    }
}

/// The parts of the body a filter reads hold more than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    pub limit: u64,
}

/// What the parse stops with when the limit is passed (told apart from a body that is not JSON).
const OVER: &str = "over the limit of kept values";

/// `body` parsed and pruned to `wanted`, keeping at most `limit` units; `null` if it is not JSON.
pub fn parse(body: &[u8], wanted: &Wanted, limit: u64) -> Result<Value, TooLarge> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let left = Cell::new(limit);
    match (Pruned(wanted, &left).deserialize(&mut de), de.end()) {
        (Ok(v), Ok(())) => Ok(v),
        (Err(e), _) if e.to_string().starts_with(OVER) => Err(TooLarge { limit }),
        _ => Ok(Value::Null),
    }
}

/// Deserializes a value keeping only what its [`Wanted`] names (everything when it is whole or a leaf), charging
/// what it keeps to the units left.
struct Pruned<'w>(&'w Wanted, &'w Cell<u64>);

impl Pruned<'_> {
    fn charge<E: serde::de::Error>(&self, units: u64) -> Result<(), E> {
        match self.1.get().checked_sub(units) {
            Some(rest) => {
                self.1.set(rest);
                Ok(())
            }
            None => Err(E::custom(OVER)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Pruned<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pruned<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Int(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.charge(1)?;
        // CEL compares an int with a uint only by overload; JSON numbers are ints where they fit.
        Ok(i64::try_from(v).map_or(Value::UInt(v), Value::Int))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Float(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(1 + v.len() as u64 / 1024)?;
        Ok(Value::String(Arc::new(v.to_owned())))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.charge(1 + v.len() as u64 / 1024)?;
        Ok(Value::String(Arc::new(v)))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(1)?;
        // A list on the way to a named key is kept whole: a path through a list names an index, which a filter
        // reaches with `[n]` or a comprehension over the whole list.
        let all = Wanted {
            whole: true,
            keys: BTreeMap::new(),
        };
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Pruned(&all, self.1))? {
            items.push(v);
        }
        Ok(Value::List(Arc::new(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(1)?;
        let mut kept: HashMap<Key, Value> = HashMap::new();
        while let Some(key) = map.next_key::<String>()? {
            let inner = if self.0.whole {
                Some(self.0)
            } else {
                self.0.keys.get(&key)
            };
            match inner {
                Some(w) => {
                    self.charge(1)?;
                    let v = map.next_value_seed(Pruned(w, self.1))?;
                    kept.insert(Key::String(Arc::new(key)), v);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Map(Map::from(kept)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(paths: &[&[&str]]) -> Wanted {
        let mut w = Wanted::default();
        for p in paths {
            w.add(&p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        }
        w
    }

    fn keys(v: &Value) -> Vec<String> {
        match v {
            Value::Map(m) => {
                let mut k: Vec<String> = m
                    .map
                    .keys()
                    .map(|k| match k {
                        Key::String(s) => s.to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                k.sort();
                k
            }
            _ => Vec::new(),
        }
    }

    #[test]
    fn only_the_named_parts_are_kept() {
        let body = br#"{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","lines":[1,2,3]},"x":1},"big":"zzz"}"#;
        let v = parse(body, &wanted(&[&["data", "object", "id"]]), 100).unwrap();
        assert_eq!(keys(&v), ["data"]);
        let Value::Map(m) = &v else { panic!("not a map") };
        let data = m.get(&Key::String(Arc::new("data".into()))).cloned();
        assert_eq!(keys(&data.unwrap_or(Value::Null)), ["object"]);
        let whole = parse(body, &wanted(&[&[]]), 100).unwrap();
        assert_eq!(keys(&whole), ["big", "data", "id", "type"]);
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let body = br#"{"type":"x","items":[1,2,3,4,5,6,7,8,9,10]}"#;
        assert_eq!(parse(body, &wanted(&[&["items"]]), 8), Err(TooLarge { limit: 8 }));
        assert!(
            parse(body, &wanted(&[&["type"]]), 8).is_ok(),
            "the skipped items cost nothing"
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_null() {
        let w = wanted(&[&[]]);
        assert_eq!(parse(b"a=1&b=2", &w, 100), Ok(Value::Null));
        assert_eq!(parse(br#"{"a":1} trailing"#, &w, 100), Ok(Value::Null));
        assert_eq!(parse(b"", &w, 100), Ok(Value::Null));
    }
}
