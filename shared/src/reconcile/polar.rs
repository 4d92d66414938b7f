//! PLACEHOLDER: Polar is being written (its file replaces this one).
#![allow(unused)]

use async_trait::async_trait;

use super::{Fetched, Listed, Page, Provider, ProviderError, Window};

pub struct Polar;

impl Polar {
    pub fn new(api_base: reqwest::Url, endpoint: &str, token: String) -> Result<Polar, String> {
        Err("not yet".into())
    }
}

#[async_trait]
impl Provider for Polar {
    async fn list(&self, _window: Window, _cursor: Option<&str>) -> Result<Page, ProviderError> {
        Err(ProviderError::Failed("not yet".into()))
    }
    async fn fetch(&self, _item: &Listed) -> Result<Fetched, ProviderError> {
        Err(ProviderError::Failed("not yet".into()))
    }
}
