//! PLACEHOLDER: the fake Okta API is being written (its file replaces this one).

use super::*;

pub struct FakeOkta {
    api: Api,
}

impl FakeOkta {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeOkta { api: Api::default() })
    }
}

impl Fake for FakeOkta {
    fn provider(&self) -> &'static str {
        "okta"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("okta")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("okta-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("okta")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("okta")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("okta")
    }
    fn page_size(&self) -> usize {
        100
    }
}
