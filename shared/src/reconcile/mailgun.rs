//! PLACEHOLDER: Mailgun is being written (its file replaces this one).
#![allow(unused)]

use async_trait::async_trait;

use super::{Fetched, Listed, Page, Provider, ProviderError, Window};

pub struct Mailgun;

impl Mailgun {
    pub fn new(
        api_base: reqwest::Url,
        domain: &str,
        event_types: &[String],
        api_key: String,
    ) -> Result<Mailgun, String> {
        Err("not yet".into())
    }
}

#[async_trait]
impl Provider for Mailgun {
    async fn list(&self, _window: Window, _cursor: Option<&str>) -> Result<Page, ProviderError> {
        Err(ProviderError::Failed("not yet".into()))
    }
    async fn fetch(&self, _item: &Listed) -> Result<Fetched, ProviderError> {
        Err(ProviderError::Failed("not yet".into()))
    }
}
