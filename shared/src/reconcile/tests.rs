use std::time::Duration;

use http::{HeaderMap, HeaderValue};

use super::{rate_limit_wait, Progress, Summary, Window};

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            *k,
            HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
        );
    }
    h
}

#[test]
fn rate_limit_waits_follow_the_documented_headers() {
    let now = 1_700_000_000;
    assert_eq!(
        rate_limit_wait(&headers(&[("retry-after", "7")]), now),
        Some(Duration::from_secs(7))
    );
    // Retry-After first, as GitHub documents.
    assert_eq!(
        rate_limit_wait(
            &headers(&[
                ("retry-after", "3"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000100")
            ]),
            now
        ),
        Some(Duration::from_secs(3))
    );
    assert_eq!(
        rate_limit_wait(
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000010")
            ]),
            now
        ),
        Some(Duration::from_secs(11))
    );
    // A reset already past still waits a moment rather than hammering.
    assert_eq!(
        rate_limit_wait(
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1600000000")
            ]),
            now
        ),
        Some(Duration::from_secs(1))
    );
    // Remaining above 0 is not a rate limit; nor are headers that do not parse.
    assert_eq!(
        rate_limit_wait(
            &headers(&[
                ("x-ratelimit-remaining", "12"),
                ("x-ratelimit-reset", "1700000010")
            ]),
            now
        ),
        None
    );
    assert_eq!(rate_limit_wait(&headers(&[("retry-after", "soon")]), now), None);
    assert_eq!(rate_limit_wait(&HeaderMap::new(), now), None);
}

#[test]
fn progress_runs_from_the_window_end_to_its_start() {
    let summary = Summary {
        window: Some(Window {
            from_ms: 1_000,
            to_ms: 2_000,
        }),
        ..Summary::default()
    };
    let at = |reached_ms| Progress { summary, reached_ms }.fraction();
    assert_eq!(at(2_000), 0.0);
    assert_eq!(at(1_500), 0.5);
    assert_eq!(at(0), 1.0);
}
