//! Reads a few values out of a JSON body by JSON pointer in one pass, without building the document: the rest of
//! the body is only checked for syntax, so a body that is not JSON is still an error. On the receiver's hot path
//! this replaces parsing every body into a `serde_json::Value` (a map and a string per key) to read one id.
//!
//! The answers are those of `serde_json::Value::pointer` on the parsed document: a repeated key counts by its
//! last occurrence, array indexes are decimal without leading zeros, `~1` and `~0` are unescaped. One difference:
//! nesting deeper than `serde_json`'s recursion limit (128) is valid JSON here, as it is, where no pointer leads.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What a pointer found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Leaf {
    String(String),
    /// A number, as `serde_json` prints it.
    Number(String),
    /// An object, array, boolean or null.
    Other,
}

/// The values at `pointers` (`None` where a pointer finds nothing), or an error if `raw` is not one JSON value.
pub(super) fn at_pointers(raw: &[u8], pointers: &[&str]) -> Result<Vec<Option<Leaf>>, serde_json::Error> {
    let targets: Vec<Option<Vec<String>>> = pointers.iter().map(|p| tokens(p)).collect();
    let found = RefCell::new(vec![None; pointers.len()]);
    let live: Vec<usize> = (0..targets.len()).filter(|&i| targets[i].is_some()).collect();
    let mut de = serde_json::Deserializer::from_slice(raw);
    Node {
        targets: &targets,
        live: &live,
        depth: 0,
        found: &found,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(found.into_inner())
}

/// A pointer's reference tokens; `None` for text that is not a pointer (it finds nothing, as in `serde_json`).
fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// An array index as JSON pointer (and `serde_json`) reads one.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// One value of the document, reached by the pointers in `live` (their first `depth` tokens matched).
struct Node<'a> {
    targets: &'a [Option<Vec<String>>],
    live: &'a [usize],
    depth: usize,
    found: &'a RefCell<Vec<Option<Leaf>>>,
}

impl Node<'_> {
    fn tokens(&self, i: usize) -> &[String] {
        self.targets[i].as_deref().unwrap_or_default()
    }

    /// Records `leaf` for the pointers that end here.
    fn leaf(&self, leaf: impl Fn() -> Leaf) {
        let mut found = self.found.borrow_mut();
        for &i in self.live {
            if self.tokens(i).len() == self.depth {
                found[i] = Some(leaf());
            }
        }
    }

    /// The pointers that go on into the member or element `matches` accepts.
    fn next(&self, matches: impl Fn(&str) -> bool) -> Vec<usize> {
        self.live
            .iter()
            .copied()
            .filter(|&i| self.tokens(i).get(self.depth).is_some_and(|t| matches(t)))
            .collect()
    }

    fn child<'b>(&'b self, live: &'b [usize]) -> Node<'b> {
        Node {
            targets: self.targets,
            live,
            depth: self.depth + 1,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        // A later occurrence of a repeated key replaces what an earlier one found below it.
        {
            let mut found = self.found.borrow_mut();
            for &i in self.live {
                found[i] = None;
            }
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.leaf(|| Leaf::String(v.to_owned()));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.leaf(|| Leaf::Number(serde_json::Number::from(v).to_string()));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.leaf(|| Leaf::Number(serde_json::Number::from(v).to_string()));
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.leaf(|| match serde_json::Number::from_f64(v) {
            Some(n) => Leaf::Number(n.to_string()),
            None => Leaf::Other,
        });
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.leaf(|| Leaf::Other);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.leaf(|| Leaf::Other);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.leaf(|| Leaf::Other);
        while let Some(live) = map.next_key_seed(Key(&self))? {
            if live.is_empty() {
                map.next_value::<IgnoredAny>()?;
            } else {
                map.next_value_seed(self.child(&live))?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.leaf(|| Leaf::Other);
        let mut at = 0usize;
        loop {
            let live = self.next(|t| index(t) == Some(at));
            let more = if live.is_empty() {
                seq.next_element::<IgnoredAny>()?.is_some()
            } else {
                seq.next_element_seed(self.child(&live))?.is_some()
            };
            if !more {
                return Ok(());
            }
            at = at.saturating_add(1);
        }
    }
}

/// A member name: answers which pointers go on into the member, without allocating for the others.
struct Key<'n, 'a>(&'n Node<'a>);

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = Vec<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = Vec<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, v: &str) -> Result<Vec<usize>, E> {
        Ok(self.0.next(|t| t == v))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// What `serde_json::Value::pointer` answers, in the same shape.
    fn reference(raw: &[u8], pointers: &[&str]) -> Option<Vec<Option<Leaf>>> {
        let value: serde_json::Value = serde_json::from_slice(raw).ok()?;
        Some(
            pointers
                .iter()
                .map(|p| {
                    value.pointer(p).map(|v| match v {
                        serde_json::Value::String(s) => Leaf::String(s.clone()),
                        serde_json::Value::Number(n) => Leaf::Number(n.to_string()),
                        _ => Leaf::Other,
                    })
                })
                .collect(),
        )
    }

    const POINTERS: [&str; 14] = [
        "",
        "/id",
        "/type",
        "/data/id",
        "/data/object/id",
        "/a~1b",
        "/m~0n",
        "/list/0",
        "/list/1/id",
        "/list/01",
        "/list/+1",
        "/n",
        "/f",
        "not-a-pointer",
    ];

    #[test]
    fn agrees_with_serde_json_pointer() {
        let docs: &[&str] = &[
            r#"{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":100}}}"#,
            r#"{"id":17,"type":null,"data":{"id":-4},"n":1.5e3,"f":-0.25}"#,
            r#"{"a/b":"slash","m~n":"tilde","list":["zero",{"id":"one"}]}"#,
            r#"{"id":"first","id":"second","data":{"id":"x"},"data":5}"#,
            r#"{"id":{"nested":true},"type":["t"]}"#,
            r#"{"id":"esc\"aped\u00e9","type":"\ud83d\ude00"}"#,
            r#"  "just a string"  "#,
            "[1,2,3]",
            "{}",
            r#"{"list":[[],{},"x"],"id":18446744073709551615,"type":-9223372036854775808}"#,
        ];
        for doc in docs {
            let ours = at_pointers(doc.as_bytes(), &POINTERS).unwrap();
            assert_eq!(Some(ours), reference(doc.as_bytes(), &POINTERS), "{doc}");
        }
    }

    #[test]
    fn a_body_that_is_not_json_is_an_error() {
        for doc in [
            "",
            "{",
            r#"{"id":"x"} trailing"#,
            r#"{"id":"x",}"#,
            "{'id':'x'}",
            "\u{0}",
            "[1,2",
            r#"{"id":"x" "type":"y"}"#,
        ] {
            assert!(at_pointers(doc.as_bytes(), &["/id"]).is_err(), "{doc:?}");
            assert!(reference(doc.as_bytes(), &["/id"]).is_none(), "{doc:?}");
        }
    }

    #[test]
    fn deep_nesting_is_skipped_without_recursion() {
        // What no pointer goes into is skipped by serde_json's iterative `IgnoredAny`, so nesting far past the
        // recursion limit of a `Value` parse neither overflows the stack nor makes valid JSON an error.
        let deep = format!(
            r#"{{"id":"evt_deep","x":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let found = at_pointers(deep.as_bytes(), &["/id"]).unwrap();
        assert_eq!(found, vec![Some(Leaf::String("evt_deep".into()))]);
        let unclosed = format!(r#"{{"id":"evt_deep","x":{}}}"#, "[".repeat(100_000));
        assert!(at_pointers(unclosed.as_bytes(), &["/id"]).is_err());
    }
}
