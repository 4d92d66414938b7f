//! PLACEHOLDER: the fake Persona API is being written (its file replaces this one).

use super::*;

pub struct FakePersona {
    api: Api,
}

impl FakePersona {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePersona { api: Api::default() })
    }
}

impl Fake for FakePersona {
    fn provider(&self) -> &'static str {
        "persona"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("persona")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("persona-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("persona")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("persona")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("persona")
    }
    fn page_size(&self) -> usize {
        100
    }
}
