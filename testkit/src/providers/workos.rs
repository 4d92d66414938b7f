//! PLACEHOLDER: the fake Workos API is being written (its file replaces this one).

use super::*;

pub struct FakeWorkos {
    api: Api,
}

impl FakeWorkos {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeWorkos { api: Api::default() })
    }
}

impl Fake for FakeWorkos {
    fn provider(&self) -> &'static str {
        "workos"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("workos")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("workos-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("workos")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("workos")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("workos")
    }
    fn page_size(&self) -> usize {
        100
    }
}
