//! PLACEHOLDER: the fake Square API is being written (its file replaces this one).

use super::*;

pub struct FakeSquare {
    api: Api,
}

impl FakeSquare {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeSquare { api: Api::default() })
    }
}

impl Fake for FakeSquare {
    fn provider(&self) -> &'static str {
        "square"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("square")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("square-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("square")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("square")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("square")
    }
    fn page_size(&self) -> usize {
        100
    }
}
