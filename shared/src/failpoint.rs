//! Named crash points for the crash tests. `failpoint!("name")` compiles to nothing unless the
//! `failpoints` feature is on (it is off by default, so release builds carry none of this). With the feature, the
//! process aborts at the point when the environment variable `INBOX_FAILPOINT` names it: `name` aborts on the
//! first hit, `name@N` on the Nth. An abort is as abrupt as a SIGKILL: no destructors run, nothing is flushed.
//! A `:panic` suffix (`name@N:panic`) panics the hitting thread instead, for what a process must survive or
//! report when one of its threads dies.

/// Aborts the process here when `INBOX_FAILPOINT` names this point (only with the `failpoints` feature).
#[macro_export]
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoint::hit($name);
    };
}

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    /// `(name, N, panic)` parsed once from `INBOX_FAILPOINT`; `None` when unset or malformed.
    fn armed() -> Option<&'static (String, u64, bool)> {
        static ARMED: OnceLock<Option<(String, u64, bool)>> = OnceLock::new();
        ARMED
            .get_or_init(|| {
                let spec = std::env::var("INBOX_FAILPOINT").ok()?;
                let spec = spec.trim();
                let (spec, panic) = match spec.strip_suffix(":panic") {
                    Some(rest) => (rest, true),
                    None => (spec, false),
                };
                if spec.is_empty() {
                    return None;
                }
                match spec.split_once('@') {
                    Some((name, n)) => Some((name.to_owned(), n.parse().ok().filter(|n| *n > 0)?, panic)),
                    None => Some((spec.to_owned(), 1, panic)),
                }
            })
            .as_ref()
    }

    /// Counts the hits of `name` and aborts on the armed one.
    pub fn hit(name: &'static str) {
        let Some((armed, at, panic)) = armed() else { return };
        if armed != name {
            return;
        }
        static HITS: OnceLock<Mutex<HashMap<&'static str, u64>>> = OnceLock::new();
        let n = {
            let mut hits = crate::sync::lock(HITS.get_or_init(|| Mutex::new(HashMap::new())));
            let n = hits.entry(name).or_insert(0);
            *n += 1;
            *n
        };
        if n == *at && *panic {
            panic!("failpoint {name}@{n} hit");
        }
        if n == *at {
            eprintln!("inbox: failpoint {name}@{n} hit: aborting");
            std::process::abort();
        }
    }
}

#[cfg(feature = "failpoints")]
pub use imp::hit;
