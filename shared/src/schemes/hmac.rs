//! The generic scheme: `params.header` carries `params.prefix` + encode(HMAC(key, body)); the id and type are
//! found where the source's configuration says.

use http::{HeaderMap, HeaderName};

use super::{
    decode, encode, header_text, header_values, mac, type_from_header, valid_id, verify_mac, Body,
    HmacParams, IdError, Identity, Key, Locator, VerifyError,
};

pub(super) fn verify(
    params: &HmacParams,
    keys: &[Key],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), VerifyError> {
    let candidates: Vec<Vec<u8>> = header_values(headers, &params.header)?
        .into_iter()
        .filter_map(|value| decode(params.encoding, value.trim().strip_prefix(&params.prefix)?))
        .collect();
    verify_mac(params.algorithm, keys, &[body], &candidates, &params.header)
}

pub(super) fn identify(params: &HmacParams, headers: &HeaderMap, body: &[u8]) -> Result<Identity, IdError> {
    let pointers: Vec<&str> = [Some(&params.id), params.event_type.as_ref()]
        .into_iter()
        .filter_map(|locator| match locator {
            Some(Locator::Json(pointer)) => Some(pointer.as_str()),
            _ => None,
        })
        .collect();
    let body = Body::new(body, &pointers);
    let event_id = match &params.id {
        Locator::Header(name) => match header_text(headers, name)? {
            Some(value) => valid_id(&format!("header {name}"), value)?,
            None => return Err(IdError::Missing(format!("header {name}"))),
        },
        Locator::Json(pointer) => body.id_at(pointer)?,
        Locator::BodySha256 => body.sha256_hex(),
    };
    let event_type = match &params.event_type {
        None => None,
        Some(Locator::Header(name)) => type_from_header(headers, name)?,
        Some(Locator::Json(pointer)) => body.type_at(pointer)?,
        Some(Locator::BodySha256) => Some(body.sha256_hex()),
    };
    Ok(Identity { event_id, event_type })
}

pub(super) fn kept_headers(params: &HmacParams) -> Vec<HeaderName> {
    [Some(&params.id), params.event_type.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|locator| match locator {
            Locator::Header(name) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn sign(
    params: &HmacParams,
    key: &Key,
    body: &[u8],
    identity: &Identity,
) -> Vec<(HeaderName, String)> {
    let tag = mac(params.algorithm, key, &[body]);
    let mut headers = vec![(
        params.header.clone(),
        format!("{}{}", params.prefix, encode(params.encoding, &tag)),
    )];
    if let Locator::Header(name) = &params.id {
        headers.push((name.clone(), identity.event_id.clone()));
    }
    if let (Some(Locator::Header(name)), Some(event_type)) = (&params.event_type, &identity.event_type) {
        headers.push((name.clone(), event_type.clone()));
    }
    headers
}
