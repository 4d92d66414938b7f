//! A source's `scheme` from its fields: a named provider or built-in scheme, or a family configured field by field
//! (docs/DESIGN.md "Providers: who can send"). Every mistake names the source and field.

use http::HeaderName;
use inbox_schemes::families::{
    jwt::{BodyHash, JwtKey},
    Asymmetric, At, Family, Format, Hmac, Jwt, Part, Rsa, RsaAlgorithm, RsaKey, SecretEncoding, Signature,
    Template, Timestamp, Token, TokenAt, Unit,
};
use inbox_schemes::{Algorithm, Encoding, Identify, Locator, Preset, Scheme};

use super::{ConfigError, RawSource};

/// The families a source may configure field by field.
pub const FAMILIES: &[&str] = &["hmac", "token", "ed25519", "ecdsa", "rsa", "jwt"];

/// The fields only a family configured field by field takes, and whether this source set each.
fn family_fields(raw: &RawSource) -> [(&'static str, bool); 16] {
    [
        ("signature_header", raw.signature_header.is_some()),
        ("algorithm", raw.algorithm.is_some()),
        ("encoding", raw.encoding.is_some()),
        ("prefix", raw.prefix.is_some()),
        ("id", raw.id.is_some()),
        ("type", raw.event_type.is_some()),
        ("signed", raw.signed.is_some()),
        ("format", raw.format.is_some()),
        ("timestamp", raw.timestamp.is_some()),
        ("timestamp_unit", raw.timestamp_unit.is_some()),
        ("secret_encoding", raw.secret_encoding.is_some()),
        ("token", raw.token.is_some()),
        ("issuer", raw.issuer.is_some()),
        ("audience", raw.audience.is_some()),
        ("body_hash_claim", raw.body_hash_claim.is_some()),
        ("batch", raw.batch.is_some()),
    ]
}

impl RawSource {
    pub(super) fn scheme(&self, at: &str) -> Result<Scheme, ConfigError> {
        let field = |f: &str| format!("{at}.{f}");
        if !FAMILIES.contains(&self.scheme.as_str()) {
            let scheme = Scheme::named(&self.scheme).ok_or_else(|| {
                ConfigError::new(
                    field("scheme"),
                    format!(
                        "unknown scheme {:?}: a provider ({}), or a family ({})",
                        self.scheme,
                        Scheme::names().join(", "),
                        FAMILIES.join(", ")
                    ),
                )
            })?;
            if let Some((name, _)) = family_fields(self).into_iter().find(|(_, set)| *set) {
                return Err(ConfigError::new(
                    field(name),
                    format!(
                        "only a family configured field by field ({}) takes this field",
                        FAMILIES.join(", ")
                    ),
                ));
            }
            return Ok(scheme);
        }
        let parse_err = |name: &'static str| {
            move |e: inbox_schemes::ParseError| ConfigError::new(field(name), e.to_string())
        };
        let locator = |name: &'static str, v: &str| v.parse::<Locator>().map_err(parse_err(name));
        let id = self
            .id
            .as_deref()
            .ok_or_else(|| {
                ConfigError::new(
                    field("id"),
                    "missing: \"header:NAME\", \"json:/pointer\", \"form:NAME\", \"query:NAME\" or \"sha256\"",
                )
            })
            .and_then(|v| locator("id", v))?;
        let event_type = self
            .event_type
            .as_deref()
            .map(|v| locator("type", v))
            .transpose()?;
        let id_header = match &id {
            Locator::Header(name) => Some(name.clone()),
            _ => None,
        };
        let family_name = self.scheme.as_str();
        let signature = |default_encoding: Encoding| -> Result<Signature, ConfigError> {
            let place = self.signature_header.as_deref().ok_or_else(|| {
                ConfigError::new(
                    field("signature_header"),
                    format!("missing (needed by scheme {family_name:?})"),
                )
            })?;
            let at = place.parse::<At>().map_err(|_| {
                ConfigError::new(field("signature_header"), "not a valid header name or place")
            })?;
            let encoding = match self.encoding.as_deref() {
                None => default_encoding,
                Some(e) => e
                    .parse()
                    .map_err(|_| ConfigError::new(field("encoding"), "must be hex or base64"))?,
            };
            let format = match self.format.as_deref() {
                None => Format::Plain,
                Some(f) => f.parse().map_err(parse_err("format"))?,
            };
            Ok(Signature {
                at,
                format,
                prefix: self.prefix.clone().unwrap_or_default(),
                encoding,
            })
        };
        let signed = match self.signed.as_deref() {
            None => Template::body(),
            Some(t) => Template::parse(t, id_header.as_ref()).map_err(parse_err("signed"))?,
        };
        let timestamp = match self.timestamp.as_deref() {
            None => None,
            Some(place) => {
                let unit = match self.timestamp_unit.as_deref() {
                    None | Some("s") => Unit::Seconds,
                    Some("ms") => Unit::Millis,
                    Some(_) => {
                        return Err(ConfigError::new(
                            field("timestamp_unit"),
                            "must be \"s\" or \"ms\"",
                        ))
                    }
                };
                let at = match place {
                    "signature" => None,
                    _ => Some(place.parse::<At>().map_err(parse_err("timestamp"))?),
                };
                Some(Timestamp { at, unit })
            }
        };
        if self.timestamp.is_none() && signed.uses(&Part::Timestamp) {
            return Err(ConfigError::new(
                field("signed"),
                "uses {timestamp}, but no timestamp = \"header:NAME\" (or \"signature\") says where it is",
            ));
        }
        // What every signed family takes; each adds its own.
        const SIGNED: &[&str] = &[
            "signature_header",
            "encoding",
            "prefix",
            "id",
            "type",
            "signed",
            "format",
            "timestamp",
            "timestamp_unit",
            "batch",
        ];
        let extra: &[&str] = match family_name {
            "hmac" => &["algorithm", "secret_encoding"],
            "rsa" => &["algorithm"],
            _ => &[],
        };
        let used: Vec<&str> = match family_name {
            "token" => vec!["token", "id", "type", "batch"],
            "jwt" => vec![
                "signature_header",
                "algorithm",
                "prefix",
                "id",
                "type",
                "issuer",
                "audience",
                "body_hash_claim",
                "batch",
            ],
            _ => SIGNED.iter().chain(extra).copied().collect(),
        };
        if let Some((name, _)) = family_fields(self)
            .into_iter()
            .find(|(name, set)| *set && !used.contains(name))
        {
            return Err(ConfigError::new(
                field(name),
                format!("scheme {family_name:?} does not take this field"),
            ));
        }
        let family = match family_name {
            "hmac" => Family::Hmac(Hmac {
                signature: signature(Encoding::Hex)?,
                signed: signed.clone(),
                algorithm: match self.algorithm.as_deref() {
                    None => Algorithm::Sha256,
                    Some(a) => a.parse().map_err(|_| {
                        ConfigError::new(field("algorithm"), "must be sha1, sha256 or sha512")
                    })?,
                },
                timestamp: timestamp.clone(),
                secret: match self.secret_encoding.as_deref() {
                    None => SecretEncoding::Raw,
                    Some(e) => e.parse().map_err(parse_err("secret_encoding"))?,
                },
            }),
            "token" => Family::Token(Token {
                at: match self.token.as_deref() {
                    None | Some("bearer") => TokenAt::Header {
                        name: http::header::AUTHORIZATION,
                        prefix: "Bearer ".to_owned(),
                    },
                    Some("basic") => TokenAt::Basic,
                    Some(place) => match place.parse::<At>().map_err(parse_err("token"))? {
                        At::Header(name) => TokenAt::Header {
                            name,
                            prefix: String::new(),
                        },
                        At::Query(name) => TokenAt::Query(name),
                        _ => {
                            return Err(ConfigError::new(
                                field("token"),
                                "must be \"bearer\", \"basic\", \"header:NAME\" or \"query:NAME\"",
                            ))
                        }
                    },
                },
            }),
            "ed25519" | "ecdsa" | "rsa" => {
                let spec = Asymmetric {
                    signature: signature(if family_name == "ed25519" {
                        Encoding::Hex
                    } else {
                        Encoding::Base64
                    })?,
                    signed: signed.clone(),
                    timestamp: timestamp.clone(),
                };
                match family_name {
                    "ed25519" => Family::Ed25519(spec),
                    "ecdsa" => Family::Ecdsa(spec),
                    _ => Family::Rsa(Rsa {
                        spec,
                        algorithm: match self.algorithm.as_deref() {
                            None | Some("pkcs1-sha256") => RsaAlgorithm::Pkcs1Sha256,
                            Some("pss-sha256") => RsaAlgorithm::PssSha256,
                            Some("pkcs1-sha1") => RsaAlgorithm::Pkcs1Sha1,
                            Some(_) => {
                                return Err(ConfigError::new(
                                    field("algorithm"),
                                    "must be pkcs1-sha256, pss-sha256 or pkcs1-sha1",
                                ))
                            }
                        },
                        key: RsaKey::Configured,
                        message: None,
                        message_signer: None,
                    }),
                }
            }
            _ => {
                let header = self.signature_header.as_deref().unwrap_or("authorization");
                let algorithm = match self.algorithm.as_deref() {
                    None | Some("HS256") => jsonwebtoken::Algorithm::HS256,
                    Some("ES256") => jsonwebtoken::Algorithm::ES256,
                    Some("RS256") => jsonwebtoken::Algorithm::RS256,
                    Some(_) => {
                        return Err(ConfigError::new(
                            field("algorithm"),
                            "must be HS256, ES256 or RS256",
                        ))
                    }
                };
                Family::Jwt(Jwt {
                    header: HeaderName::try_from(header).map_err(|_| {
                        ConfigError::new(field("signature_header"), "not a valid header name")
                    })?,
                    prefix: leak(self.prefix.clone().unwrap_or_default()),
                    algorithms: vec![algorithm],
                    key: if algorithm == jsonwebtoken::Algorithm::HS256 {
                        JwtKey::Secret
                    } else {
                        JwtKey::Configured
                    },
                    issuer: self.issuer.clone().map(leak),
                    audience_is_url: match self.audience.as_deref() {
                        None => false,
                        Some("url") => true,
                        Some(_) => {
                            return Err(ConfigError::new(
                                field("audience"),
                                "must be \"url\" (the token's audience is the source's url)",
                            ))
                        }
                    },
                    body_hash: self.body_hash_claim.clone().map(|claim| BodyHash {
                        claim: leak(claim),
                        hex: true,
                    }),
                    max_age_secs: None,
                })
            }
        };
        // An id hashed from the body (`sha256`, or a batch item that carries no id) must hash bytes the signature
        // covers: where it does not cover the raw body (a `signed` template without `{body}`, `{params}` alone
        // included, or a jwt without `body_hash_claim`), anyone who saw one delivery could change a byte of it (a
        // space) and have it run again under a new id. A token signs nothing: whoever saw a delivery holds the
        // token itself and can send anything, so no id could tell, and token sources are left as they are.
        let body_unsigned = match &family {
            Family::Hmac(h) => !h.signed.uses(&Part::Body),
            Family::Ed25519(a) | Family::Ecdsa(a) => !a.signed.uses(&Part::Body),
            Family::Rsa(r) => !r.spec.signed.uses(&Part::Body),
            Family::Jwt(j) => j.body_hash.is_none(),
            Family::Token(_) | Family::Custom(_) => false,
        };
        if body_unsigned {
            let why = "hashes the body for ids, which this signature does not cover: a delivery resent with one byte \
                       changed would be a new event (sign {body}, or for jwt set body_hash_claim)";
            if id == Locator::BodySha256 {
                return Err(ConfigError::new(field("id"), format!("\"sha256\" {why}")));
            }
            if self.batch.is_some() {
                return Err(ConfigError::new(
                    field("batch"),
                    format!("a batch (its items without an id) {why}"),
                ));
            }
        }
        let identify = match &self.batch {
            None => Identify::At {
                id: id.clone(),
                event_type: event_type.clone(),
            },
            Some(items) => {
                let Locator::Json(id_pointer) = &id else {
                    return Err(ConfigError::new(
                        field("id"),
                        "a batch's id is a JSON pointer inside each item",
                    ));
                };
                let type_pointer = match &event_type {
                    None => None,
                    Some(Locator::Json(p)) => Some(leak(p.clone())),
                    Some(_) => {
                        return Err(ConfigError::new(
                            field("type"),
                            "a batch's type is a JSON pointer inside each item",
                        ))
                    }
                };
                if !(items.is_empty() || items.starts_with('/')) {
                    return Err(ConfigError::new(
                        field("batch"),
                        "a JSON pointer to the array (\"\" for the body)",
                    ));
                }
                Identify::Batch(inbox_schemes::providers::Batch {
                    form: None,
                    items: leak(items.clone()),
                    item: "",
                    id: leak(id_pointer.clone()),
                    event_type: type_pointer,
                })
            }
        };
        // A query parameter is signed only where the template names it, or signs the path and query whole.
        let signs_id = match &id {
            Locator::Header(name) => signed.uses(&Part::Header(name.clone())),
            Locator::Query(name) => {
                signed.uses(&Part::Query(name.clone())) || signed.uses(&Part::PathAndQuery)
            }
            _ => true,
        };
        let kept = [Some(&id), event_type.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|l| match l {
                Locator::Header(name) => Some(name.clone()),
                _ => None,
            })
            .chain(match &timestamp {
                Some(Timestamp {
                    at: Some(At::Header(name)),
                    ..
                }) => Some(name.clone()),
                _ => None,
            })
            .collect();
        let name: &'static str = FAMILIES
            .iter()
            .find(|f| **f == family_name)
            .copied()
            .unwrap_or("hmac");
        Ok(Scheme::Preset(Box::new(Preset {
            kept,
            // A signed timestamp only bounds a resend under a fresh id to its tolerance.
            resendable: !signs_id,
            ..Preset::new(name, family, identify)
        })))
    }
}

/// Configuration is read once at start and lives as long as the process: the few strings a family keeps as
/// `&'static str` are leaked once per source, never per request.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}
