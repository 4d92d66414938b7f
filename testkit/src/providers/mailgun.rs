//! PLACEHOLDER: the fake Mailgun API is being written (its file replaces this one).

use super::*;

pub struct FakeMailgun {
    api: Api,
}

impl FakeMailgun {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeMailgun { api: Api::default() })
    }
}

impl Fake for FakeMailgun {
    fn provider(&self) -> &'static str {
        "mailgun"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("mailgun")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("mailgun-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("mailgun")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("mailgun")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("mailgun")
    }
    fn page_size(&self) -> usize {
        100
    }
}
