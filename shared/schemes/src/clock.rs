//! The verifier's clock: timestamps checked against the caller's `now` and a tolerance, both ways, saturating.

use http::HeaderName;

use crate::errors::VerifyError;
use crate::headers::malformed;

/// The verifier's clock: the caller's `now` and the accepted skew either way.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now_unix: i64,
    pub tolerance_secs: u64,
}

impl Clock {
    /// Checks a unix-seconds timestamp against the tolerance, both ways; saturating.
    pub fn check_unix(self, ts: i64) -> Result<(), VerifyError> {
        let skew_secs = self.now_unix.saturating_sub(ts);
        if skew_secs.unsigned_abs() > self.tolerance_secs {
            return Err(VerifyError::Timestamp { skew_secs });
        }
        Ok(())
    }

    /// Checks a unix-seconds timestamp header value. Saturating both ways: no value can overflow.
    pub(crate) fn check(self, header: &HeaderName, raw: &str) -> Result<(), VerifyError> {
        if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed(header, "not unix seconds"));
        }
        // All digits, so a parse failure can only be an overflow: a timestamp absurdly far in the future.
        let skew_secs = raw
            .parse::<i64>()
            .map_or(i64::MIN, |ts| self.now_unix.saturating_sub(ts));
        if skew_secs.unsigned_abs() > self.tolerance_secs {
            return Err(VerifyError::Timestamp { skew_secs });
        }
        Ok(())
    }
}
