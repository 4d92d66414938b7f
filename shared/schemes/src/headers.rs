//! Reading signature and timestamp headers as text for verification: an absent header is `MissingHeader`, one
//! that is not UTF-8 or not as expected is `MalformedHeader`, naming the header and never its value.

use http::{HeaderMap, HeaderName};

use crate::errors::VerifyError;

/// A `MalformedHeader` that names the header and why, never its value.
pub(crate) fn malformed(header: &HeaderName, why: &str) -> VerifyError {
    VerifyError::MalformedHeader(format!("{header} ({why})"))
}

/// Every value of a header, as text. None present is `MissingHeader`; non-UTF-8 is `MalformedHeader`.
pub(crate) fn header_values<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Vec<&'a str>, VerifyError> {
    let values = headers
        .get_all(name)
        .iter()
        .map(|v| std::str::from_utf8(v.as_bytes()).map_err(|_| malformed(name, "not UTF-8")))
        .collect::<Result<Vec<_>, _>>()?;
    if values.is_empty() {
        return Err(VerifyError::MissingHeader(name.to_string()));
    }
    Ok(values)
}

/// The first value of a header, as text.
pub(crate) fn header_first<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<&'a str, VerifyError> {
    let value = headers
        .get(name)
        .ok_or_else(|| VerifyError::MissingHeader(name.to_string()))?;
    std::str::from_utf8(value.as_bytes()).map_err(|_| malformed(name, "not UTF-8"))
}
