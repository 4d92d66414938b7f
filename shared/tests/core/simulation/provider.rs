//! The provider's API as the simulation's reconciliation sees it: every event of the seed, created in the first
//! seconds, listed newest first in one page; under faults a listing fails (a 5xx) or is rate limited, drawn from
//! the seed. Its items carry their payloads, as Stripe's listing does, so no detail is fetched.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::reconcile::{Fetched, Listed, Page, Provider, ProviderError, Window};
use rand::rngs::StdRng;
use rand::Rng;

pub struct SimProvider {
    /// `(id, created at)`, oldest first.
    pub events: Vec<(String, i64)>,
    pub rng: Arc<Mutex<StdRng>>,
    pub on: Arc<AtomicBool>,
}

#[async_trait]
impl Provider for SimProvider {
    async fn list(&self, window: Window, _cursor: Option<&str>) -> Result<Page, ProviderError> {
        if self.on.load(Ordering::SeqCst) {
            match self.rng.lock().unwrap().random_range(0..100) {
                0..=9 => return Err(ProviderError::Failed("the provider answered 503".into())),
                10..=14 => {
                    return Err(ProviderError::RateLimited {
                        wait: Some(Duration::from_secs(2)),
                    })
                }
                _ => {}
            }
        }
        let items = self
            .events
            .iter()
            .rev()
            .filter(|(_, at)| window.contains(*at))
            .map(|(id, at)| Listed {
                id: id.clone(),
                event_type: Some("sim.event".into()),
                created_ms: *at,
                payload: Some(bytes::Bytes::from(format!(
                    "{{\"id\":\"{id}\",\"object\":\"event\"}}"
                ))),
                headers: vec![],
                handle: id.clone(),
            })
            .collect();
        Ok(Page { items, next: None })
    }

    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        Err(ProviderError::Failed(format!("{}: no detail to fetch", item.id)))
    }
}
