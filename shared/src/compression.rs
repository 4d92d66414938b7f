//! Stored bodies, zstd-compressed: both stores keep a body compressed where that makes it smaller (JSON shrinks
//! several times), so that a 2 KiB body costs a fraction of a page (SQLite) or of a write unit (DynamoDB).
//! One compression context per thread, reused: creating one per body cost more than compressing the body.

use std::cell::RefCell;
use std::io;

/// The embedded store's level, on the request's own thread before the write: zstd's fast mode, which is much
/// quicker than level 1 on a webhook-sized JSON body and still shrinks it several times
/// (docs/bench-log/2026-12-05.md).
pub const FAST: i32 = -1;
/// Bodies whose frame says they are larger than this are decompressed by streaming, into a buffer that grows as the
/// frame is read, rather than into one allocated up front at the size a frame claims.
const DECOMPRESS_AT_ONCE_UP_TO: u64 = 16 << 20;
/// DynamoDB's level: fast, and JSON still shrinks several times.
pub const DEFAULT: i32 = 3;

thread_local! {
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// `body` compressed at `level` (a zstd frame that records its content size).
pub fn compress(body: &[u8], level: i32) -> io::Result<Vec<u8>> {
    COMPRESSOR.with(|slot| {
        let mut compressor = match slot.borrow_mut().take() {
            Some((l, compressor)) if l == level => compressor,
            _ => zstd::bulk::Compressor::new(level)?,
        };
        let compressed = compressor.compress(body);
        *slot.borrow_mut() = Some((level, compressor));
        compressed
    })
}

/// `body` compressed at `level` where that makes it smaller; `None` where it does not (already compressed, random
/// bytes, tiny) or cannot be compressed.
pub fn smaller(body: &[u8], level: i32) -> Option<Vec<u8>> {
    compress(body, level).ok().filter(|c| c.len() < body.len())
}

/// The body a [`compress`]ed frame holds.
pub fn decompress(stored: &[u8]) -> io::Result<Vec<u8>> {
    match zstd::zstd_safe::get_frame_content_size(stored) {
        Ok(Some(size)) if size <= DECOMPRESS_AT_ONCE_UP_TO => DECOMPRESSOR.with(|slot| {
            let mut decompressor = match slot.borrow_mut().take() {
                Some(decompressor) => decompressor,
                None => zstd::bulk::Decompressor::new()?,
            };
            let body = decompressor.decompress(stored, usize::try_from(size).unwrap_or(usize::MAX));
            *slot.borrow_mut() = Some(decompressor);
            body
        }),
        Ok(_) => zstd::stream::decode_all(stored),
        Err(_) => Err(io::Error::new(io::ErrorKind::InvalidData, "not a zstd frame")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_body_shrinks_and_comes_back_whole() {
        let body = br#"{"action":"opened","repository":{"full_name":"octo/hello","private":false},"sender":{"login":"octo"}}"#
            .repeat(20);
        let stored = smaller(&body, FAST).expect("JSON shrinks");
        assert!(
            stored.len() * 4 < body.len(),
            "{} of {}",
            stored.len(),
            body.len()
        );
        assert_eq!(decompress(&stored).unwrap(), body);
        // Another level on the same thread gets a context of its own, and the same bytes back.
        assert_eq!(decompress(&compress(&body, DEFAULT).unwrap()).unwrap(), body);
    }

    #[test]
    fn bytes_that_do_not_shrink_are_left_as_they_are() {
        assert_eq!(smaller(b"", FAST), None);
        assert_eq!(smaller(b"{}", FAST), None);
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(smaller(&noise, FAST), None);
    }

    #[test]
    fn a_frame_that_does_not_say_its_size_is_read_by_streaming() {
        let body = b"{\"streamed\":true}".repeat(100);
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), DEFAULT).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, &body).unwrap();
        let stored = encoder.finish().unwrap();
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&stored).unwrap(), None);
        assert_eq!(decompress(&stored).unwrap(), body);
    }

    #[test]
    fn a_frame_that_is_not_zstd_is_an_error() {
        assert!(decompress(b"not zstd at all").is_err());
    }
}
