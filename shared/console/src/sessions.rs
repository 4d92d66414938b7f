//! The console's logins, held in this process and nowhere else: a cookie only names a session, and a request gets
//! in only while this process holds it, neither idle too long nor too old. Logging out ends it here, so the cookie
//! a browser (or anyone who copied it) still holds is refused from then on.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// A login ends after this long without a request, unless the console is told otherwise.
const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);
/// A login ends this long after it began, however busy, unless the console is told otherwise.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Logins held at once, at most; past it the least recently used one ends. Only a token holder can log in, so
/// this only bounds what a script logging in over and over could make the console hold.
pub(super) const MAX_SESSIONS: usize = 1024;

/// How long a login lasts, and how its cookie is marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionPolicy {
    /// Ended after this long without a request.
    pub idle: Duration,
    /// Ended this long after the login, however busy.
    pub lifetime: Duration,
    /// The cookie is `Secure`: the browser sends it over HTTPS (and to loopback, which browsers count as secure),
    /// never over plain HTTP elsewhere. Off only for plain HTTP on a private network (`--insecure-cookie`).
    pub secure_cookie: bool,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        Self {
            idle: DEFAULT_IDLE,
            lifetime: DEFAULT_LIFETIME,
            secure_cookie: true,
        }
    }
}

struct Live {
    started: Instant,
    seen: Instant,
}

impl Live {
    fn alive(&self, policy: &SessionPolicy, now: Instant) -> bool {
        now.saturating_duration_since(self.seen) < policy.idle
            && now.saturating_duration_since(self.started) < policy.lifetime
    }
}

/// The live sessions, by the SHA-256 of their cookie value: a lookup compares digests, never the secret itself,
/// so its timing says nothing about the cookie.
#[derive(Default)]
pub(super) struct Sessions {
    live: Mutex<HashMap<[u8; 32], Live>>,
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], Live>> {
        // A panic elsewhere while holding it leaves the map whole (every change is one insert or remove).
        inbox_core::sync::lock(&self.live)
    }

    /// A new session, and its cookie value (256 random bits). Ended ones are dropped first, and at the limit the
    /// least recently used live one, so the map never holds more than [`MAX_SESSIONS`].
    pub(super) fn open(&self, policy: &SessionPolicy, now: Instant) -> String {
        let id = hex::encode(rand::random::<[u8; 32]>());
        let mut live = self.lock();
        live.retain(|_, s| s.alive(policy, now));
        if live.len() >= MAX_SESSIONS {
            if let Some(oldest) = live.iter().min_by_key(|(_, s)| s.seen).map(|(k, _)| *k) {
                live.remove(&oldest);
            }
        }
        live.insert(
            digest(&id),
            Live {
                started: now,
                seen: now,
            },
        );
        id
    }

    /// Whether `id` names a live session; if so, it counts as used now. An idle or too old one is dropped.
    pub(super) fn touch(&self, id: &str, policy: &SessionPolicy, now: Instant) -> bool {
        let key = digest(id);
        let mut live = self.lock();
        match live.get_mut(&key) {
            Some(s) if s.alive(policy, now) => {
                s.seen = now;
                true
            }
            Some(_) => {
                live.remove(&key);
                false
            }
            None => false,
        }
    }

    /// Ends a session: its cookie lets nothing in from now on.
    pub(super) fn end(&self, id: &str) {
        self.lock().remove(&digest(id));
    }

    /// Sessions held, ended ones not yet dropped included.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: SessionPolicy = SessionPolicy {
        idle: Duration::from_secs(60),
        lifetime: Duration::from_secs(600),
        secure_cookie: true,
    };

    #[test]
    fn a_session_ends_when_idle_or_too_old_and_ended_ones_are_dropped() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let a = sessions.open(&POLICY, t0);
        assert!(sessions.touch(&a, &POLICY, t0 + Duration::from_secs(59)));
        assert!(
            sessions.touch(&a, &POLICY, t0 + Duration::from_secs(118)),
            "used: idle counts from then"
        );
        assert!(
            !sessions.touch(&a, &POLICY, t0 + Duration::from_secs(178)),
            "idle"
        );
        assert_eq!(sessions.held(), 0, "an idle one is dropped when seen");
        let b = sessions.open(&POLICY, t0);
        for secs in (30..600).step_by(30).chain([599]) {
            assert!(
                sessions.touch(&b, &POLICY, t0 + Duration::from_secs(secs)),
                "{secs}"
            );
        }
        assert!(
            !sessions.touch(&b, &POLICY, t0 + Duration::from_secs(600)),
            "too old"
        );
        assert!(!sessions.touch("not-a-session", &POLICY, t0));
        // Ended ones nobody asks about again go at the next login.
        let _c = sessions.open(&POLICY, t0);
        let _d = sessions.open(&POLICY, t0 + Duration::from_secs(120));
        assert_eq!(sessions.held(), 1);
    }

    #[test]
    fn the_sessions_held_are_bounded() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let first = sessions.open(&POLICY, t0);
        let second = sessions.open(&POLICY, t0 + Duration::from_millis(1));
        assert!(sessions.touch(&first, &POLICY, t0 + Duration::from_millis(2)));
        // The limit reached, then one more login.
        for i in 0..MAX_SESSIONS - 1 {
            sessions.open(&POLICY, t0 + Duration::from_millis(3 + i as u64));
        }
        assert_eq!(sessions.held(), MAX_SESSIONS);
        assert!(
            !sessions.touch(&second, &POLICY, t0 + Duration::from_secs(1)),
            "the least recently used one ended"
        );
        assert!(sessions.touch(&first, &POLICY, t0 + Duration::from_secs(1)));
    }
}
