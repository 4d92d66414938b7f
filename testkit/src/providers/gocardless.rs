//! PLACEHOLDER: the fake Gocardless API is being written (its file replaces this one).

use super::*;

pub struct FakeGocardless {
    api: Api,
}

impl FakeGocardless {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeGocardless { api: Api::default() })
    }
}

impl Fake for FakeGocardless {
    fn provider(&self) -> &'static str {
        "gocardless"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("gocardless")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("gocardless-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("gocardless")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("gocardless")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("gocardless")
    }
    fn page_size(&self) -> usize {
        100
    }
}
