//! Time and randomness as ports (docs/DESIGN.md, "Owners, leases and clocks"): every `now` and every random draw in
//! the core's decisions comes from a [`Clock`] and a [`Random`] handed in, the system's by default ([`World`]), so
//! that a test or a simulation drives them. Secrets (the console's session ids and CSRF keys) keep the operating
//! system's generator and never come from here.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::{Rng, RngCore, SeedableRng};

/// The wall clock: UTC milliseconds since the epoch, how every timestamp is stored.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// A source of random draws for decisions (backoff jitter, lease tokens), never for secrets.
pub trait Random: Send + Sync + 'static {
    fn next_u64(&self) -> u64;
}

impl dyn Random {
    /// A draw in `0..=top`.
    pub fn up_to(&self, top: u64) -> u64 {
        match top.checked_add(1) {
            Some(span) => self.next_u64() % span,
            None => self.next_u64(),
        }
    }
}

/// The system's clock, as tokio sees time: the operating system's wall clock, moved by however far tokio's clock
/// has been advanced past the real one. In a running server the two agree (the offset is nothing), so stored times
/// follow the system clock, NTP steps included; under a paused tokio clock (`tokio::time::pause`, a simulation)
/// the wall clock stands still and advances with it, so timers, leases and due times move together.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let (virt, real) = (tokio::time::Instant::now().into_std(), std::time::Instant::now());
        let ahead = virt.saturating_duration_since(real).as_nanos() as i128
            - real.saturating_duration_since(virt).as_nanos() as i128;
        i64::try_from((wall + ahead).div_euclid(1_000_000)).unwrap_or(i64::MAX)
    }
}

/// The operating system's generator (thread-local, seeded from it).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemRandom;

impl Random for SystemRandom {
    fn next_u64(&self) -> u64 {
        rand::rng().next_u64()
    }
}

/// A clock a test sets and moves by hand.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn at(ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(ms)))
    }

    pub fn advance(&self, by: Duration) {
        // Saturating, as `time::ms` (which reads this file's clock, so this file does not import it).
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(by, Ordering::SeqCst);
    }

    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Draws replayed from a seed: the same seed, the same draws.
#[derive(Debug)]
pub struct SeededRandom(Mutex<rand::rngs::StdRng>);

impl SeededRandom {
    pub fn new(seed: u64) -> Arc<Self> {
        Arc::new(Self(Mutex::new(rand::rngs::StdRng::seed_from_u64(seed))))
    }
}

impl Random for SeededRandom {
    fn next_u64(&self) -> u64 {
        crate::sync::lock(&self.0).random()
    }
}

/// The clock and the randomness a runtime's parts share: the system's ([`World::system`]) unless a test or a
/// simulation hands in its own.
#[derive(Clone)]
pub struct World {
    pub clock: Arc<dyn Clock>,
    pub random: Arc<dyn Random>,
}

impl World {
    pub fn system() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            random: Arc::new(SystemRandom),
        }
    }

    /// A manual clock at `now` and draws from `seed`.
    pub fn manual(now: i64, seed: u64) -> (Self, Arc<ManualClock>) {
        let clock = ManualClock::at(now);
        let world = Self {
            clock: clock.clone(),
            random: SeededRandom::new(seed),
        };
        (world, clock)
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}

impl Default for World {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("World")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_is_the_wall_clock_while_tokio_runs_in_real_time() {
        let system = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
        let ours = SystemClock.now_ms();
        assert!((ours - system).abs() < 1_000, "{ours} vs {system}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_tokio_clock_moves_the_wall_clock_with_it() {
        let before = SystemClock.now_ms();
        tokio::time::advance(Duration::from_secs(3600)).await;
        let after = SystemClock.now_ms();
        let moved = after - before;
        // Real time passes meanwhile too, a little: the wall clock moved by the hour, and by no more than that.
        assert!((3_599_999..3_601_000).contains(&moved), "{moved}");
    }

    #[test]
    fn seeded_draws_replay() {
        let (a, b) = (SeededRandom::new(7), SeededRandom::new(7));
        let draws = |r: &SeededRandom| (0..5).map(|_| r.next_u64()).collect::<Vec<_>>();
        assert_eq!(draws(&a), draws(&b));
        let r: Arc<dyn Random> = SeededRandom::new(1);
        assert!((0..100).all(|_| r.up_to(10) <= 10));
        assert_eq!(r.up_to(0), 0);
    }
}
