//! PLACEHOLDER: the fake Paddle API is being written (its file replaces this one).

use super::*;

pub struct FakePaddle {
    api: Api,
}

impl FakePaddle {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePaddle { api: Api::default() })
    }
}

impl Fake for FakePaddle {
    fn provider(&self) -> &'static str {
        "paddle"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("paddle")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("paddle-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("paddle")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("paddle")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("paddle")
    }
    fn page_size(&self) -> usize {
        100
    }
}
