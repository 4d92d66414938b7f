//! PLACEHOLDER: the fake Paypal API is being written (its file replaces this one).

use super::*;

pub struct FakePaypal {
    api: Api,
}

impl FakePaypal {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePaypal { api: Api::default() })
    }
}

impl Fake for FakePaypal {
    fn provider(&self) -> &'static str {
        "paypal"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("paypal")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("paypal-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("paypal")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("paypal")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("paypal")
    }
    fn page_size(&self) -> usize {
        100
    }
}
