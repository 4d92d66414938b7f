//! Locks that outlive a panic: every `Mutex` here guards a map or a list that each change leaves whole (one insert,
//! one remove, one push), so a thread that panicked while holding one left nothing half done, and the next holder
//! goes on rather than spreading the panic to every request.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, whether or not a holder panicked.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
