//! PLACEHOLDER: the fake Chargebee API is being written (its file replaces this one).

use super::*;

pub struct FakeChargebee {
    api: Api,
}

impl FakeChargebee {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeChargebee { api: Api::default() })
    }
}

impl Fake for FakeChargebee {
    fn provider(&self) -> &'static str {
        "chargebee"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("chargebee")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("chargebee-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("chargebee")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("chargebee")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("chargebee")
    }
    fn page_size(&self) -> usize {
        100
    }
}
