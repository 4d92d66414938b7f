//! PLACEHOLDER: the fake Gitlab API is being written (its file replaces this one).

use super::*;

pub struct FakeGitlab {
    api: Api,
}

impl FakeGitlab {
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeGitlab { api: Api::default() })
    }
}

impl Fake for FakeGitlab {
    fn provider(&self) -> &'static str {
        "gitlab"
    }
    fn start(self: Arc<Self>) -> String {
        unimplemented!("gitlab")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("gitlab-{n}")
    }
    fn event_type(&self) -> &'static str {
        "placeholder"
    }
    fn webhook(&self, _event: &Event) -> Webhook {
        unimplemented!("gitlab")
    }
    fn block(&self, _prefix: &str, _wrong: bool) -> (String, Vec<(String, String)>) {
        unimplemented!("gitlab")
    }
    fn receiving(&self, _prefix: &str) -> Receiving {
        unimplemented!("gitlab")
    }
    fn page_size(&self) -> usize {
        100
    }
}
