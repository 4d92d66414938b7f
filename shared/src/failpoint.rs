//! Named crash points for the crash tests, and injected I/O errors for the store's own disk calls.
//!
//! `failpoint!("name")` compiles to nothing unless the `failpoints` feature is on (it is off by default, so release
//! builds carry none of this). With the feature, the process aborts at the point when the environment variable
//! `INBOX_FAILPOINT` names it: `name` aborts on the first hit, `name@N` on the Nth. An abort is as abrupt as a
//! SIGKILL: no destructors run, nothing is flushed. A `:panic` suffix (`name@N:panic`) panics the hitting thread
//! instead, for what a process must survive or report when one of its threads dies.
//!
//! An `:eio` suffix (`name@N:eio`) arms an [`IoFaults`] point instead: a disk call of the store (a sync, a
//! checkpoint) that meets an I/O error on its Nth pass, as on a failing disk.

/// Aborts the process here when `INBOX_FAILPOINT` names this point (only with the `failpoints` feature).
#[macro_export]
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoint::hit($name);
    };
}

/// What an armed point does on its hit.
#[cfg(feature = "failpoints")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Abort,
    Panic,
    Eio,
}

/// `name[@N][:panic|:eio]`, as `INBOX_FAILPOINT` writes it; `None` when malformed.
#[cfg(feature = "failpoints")]
fn parse(spec: &str) -> Option<(String, u64, Action)> {
    let spec = spec.trim();
    let (spec, action) = if let Some(rest) = spec.strip_suffix(":panic") {
        (rest, Action::Panic)
    } else if let Some(rest) = spec.strip_suffix(":eio") {
        (rest, Action::Eio)
    } else {
        (spec, Action::Abort)
    };
    if spec.is_empty() {
        return None;
    }
    match spec.split_once('@') {
        Some((name, n)) => Some((name.to_owned(), n.parse().ok().filter(|n| *n > 0)?, action)),
        None => Some((spec.to_owned(), 1, action)),
    }
}

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use super::Action;

    /// `(name, N, action)` parsed once from `INBOX_FAILPOINT`; `None` when unset or malformed.
    pub(super) fn armed() -> Option<&'static (String, u64, Action)> {
        static ARMED: OnceLock<Option<(String, u64, Action)>> = OnceLock::new();
        ARMED
            .get_or_init(|| super::parse(&std::env::var("INBOX_FAILPOINT").ok()?))
            .as_ref()
    }

    /// Counts the hits of `name` and aborts (or panics) on the armed one.
    pub fn hit(name: &'static str) {
        let Some((armed, at, action)) = armed() else {
            return;
        };
        if armed != name || *action == Action::Eio {
            return;
        }
        static HITS: OnceLock<Mutex<HashMap<&'static str, u64>>> = OnceLock::new();
        let n = {
            let mut hits = crate::sync::lock(HITS.get_or_init(|| Mutex::new(HashMap::new())));
            let n = hits.entry(name).or_insert(0);
            *n += 1;
            *n
        };
        if n == *at && *action == Action::Panic {
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

/// How long a disk call that meets an injected error is held before it fails: long enough for the writer to
/// commit the batches it may run ahead of a sync, so that the failure meets committed work waiting behind it.
pub const HOLD: std::time::Duration = std::time::Duration::from_millis(200);

/// I/O errors injected into one store's own disk calls (tests only): [`IoFaults::io`] at a named point answers
/// `EIO` on its armed pass, after holding the call for [`HOLD`]. Armed from `INBOX_FAILPOINT` (`name@N:eio`) where
/// a process opens its store, or by a test for a store it opened itself ([`IoFaults::arm`]). Without the
/// `failpoints` feature it holds nothing and never fails.
#[derive(Clone, Debug, Default)]
pub struct IoFaults {
    #[cfg(feature = "failpoints")]
    armed: std::sync::Arc<std::sync::Mutex<Vec<(String, u64)>>>,
}

impl IoFaults {
    /// The `:eio` point `INBOX_FAILPOINT` arms, if any.
    pub fn from_env() -> Self {
        let faults = Self::default();
        #[cfg(feature = "failpoints")]
        if let Some((name, at, Action::Eio)) = imp::armed() {
            faults.arm(name, *at);
        }
        faults
    }

    /// Makes the `at`th pass (from now) of the point `name` fail.
    #[cfg(feature = "failpoints")]
    pub fn arm(&self, name: &str, at: u64) {
        crate::sync::lock(&self.armed).push((name.to_owned(), at.max(1)));
    }

    /// The injected error of this pass of `name`, if it is the armed one.
    pub fn io(&self, name: &str) -> Option<std::io::Error> {
        #[cfg(feature = "failpoints")]
        {
            let hit = {
                let mut armed = crate::sync::lock(&self.armed);
                let mut hit = false;
                armed.retain_mut(|(point, left)| {
                    if point != name {
                        return true;
                    }
                    *left -= 1;
                    hit |= *left == 0;
                    *left > 0
                });
                hit
            };
            if hit {
                std::thread::sleep(HOLD);
                tracing::warn!(point = name, "injected I/O error (failpoints)");
                return Some(std::io::Error::from_raw_os_error(EIO));
            }
        }
        let _ = name;
        None
    }
}

/// `EIO` on Linux (and every Unix this builds on).
#[cfg(feature = "failpoints")]
const EIO: i32 = 5;

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_their_action() {
        assert_eq!(parse("p"), Some(("p".into(), 1, Action::Abort)));
        assert_eq!(parse("p@3:panic"), Some(("p".into(), 3, Action::Panic)));
        assert_eq!(parse("p@2:eio"), Some(("p".into(), 2, Action::Eio)));
        assert_eq!(parse("p@0"), None);
        assert_eq!(parse(":eio"), None);
    }

    #[test]
    fn an_armed_io_fault_fails_its_pass_only() {
        let faults = IoFaults::default();
        faults.arm("sync", 2);
        assert!(faults.io("sync").is_none());
        assert!(faults.io("other").is_none());
        let e = faults.io("sync").expect("the second pass fails");
        assert_eq!(e.raw_os_error(), Some(EIO));
        assert!(faults.io("sync").is_none(), "only once");
    }
}
