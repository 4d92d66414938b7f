//! PLACEHOLDER: the fake Polar API is being written (its file replaces this one).

use super::*;

pub struct FakePolar {
    api: Api,
}

impl FakePolar {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePolar { api: Api::default() })
    }
}

impl Fake for FakePolar {
    fn provider(&self) -> &'static str {
        "polar"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("polar")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("polar-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("polar")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("polar")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("polar")
    }
    fn page_size(&self) -> usize {
        100
    }
}
