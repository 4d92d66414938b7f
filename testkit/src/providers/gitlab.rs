//! Fake GitLab: a hook's events ("hook logs") as GitLab documents and implements them (no OpenAPI covers this
//! endpoint). Repository `gitlabhq/gitlabhq` (the GitHub mirror of gitlab-org/gitlab): `doc/api/project_webhooks.md`
//! "Get a list of project webhook events" and `doc/api/group_webhooks.md` at commit
//! `0c97aa5810d9daea001280eae7e3346eb1dd62b0`; the route `lib/api/hooks/events.rb` at
//! `0a3208dc4813cc0c93d3b8970031e48e778d87ca`; the row `lib/api/entities/web_hook_log.rb` at
//! `41946e65501d176230532ae34b16e64f5cdac462`; the order and the e-mail redaction `app/models/hooks/web_hook_log.rb`
//! at `0286e4c628d68960d0ca9e961d82c3ea6ac90633`; the rate-limit headers
//! `doc/administration/settings/user_and_ip_rate_limits.md` at `986ab04856abe5031fbf020a9c3249c7c94d1963`.
//! - `GET /projects/:id/hooks/:hook_id/events` (and `/groups/…`) with `PRIVATE-TOKEN`; a wrong token is a 401
//!   `{"message":"401 Unauthorized"}`, another hook a 404 `{"message":"404 Not found"}` (Grape's forms).
//! - Query: `page` (default 1), `per_page` (default 20, `values: 1..20`: a 400 `{"error":"per_page does not have a
//!   valid value"}` outside). No time filter. Newest first (`order(created_at: :desc)`).
//! - Answer: a JSON array of rows `{"id","url","trigger","request_headers","request_data","response_headers",
//!   "response_body","execution_duration","response_status","created_at"}`, one per delivery attempt, with the
//!   pagination headers `X-Page`, `X-Per-Page`, `X-Next-Page` (empty on the last page), `X-Prev-Page`, `X-Total`,
//!   `X-Total-Pages`.
//! - Too many requests: 429 `Retry later` (plain text) with `Retry-After` and `RateLimit-Limit`, `-Observed`,
//!   `-Remaining`, `-Reset` (epoch seconds); a 500 is `{"message":"500 Internal Server Error"}`.
//!
//! Each event is delivered once, or (every other id) first answered 500 and retried 10 s later: two rows of one
//! `Idempotency-Key`. The webhook is the body with the headers GitLab sends (`Idempotency-Key`, `X-Gitlab-Event`,
//! the UUIDs, `X-Gitlab-Instance`; the harness adds `X-Gitlab-Token`). GitLab logs `request_data` with every
//! e-mail address as `"[REDACTED]"`, so [`Fake::stored`] is the webhook's body with `user_email` redacted: the API
//! cannot give the address back.

use super::*;

const TOKEN: &str = "glpat-inbox-test-read-api-token";
const WRONG_TOKEN: &str = "glpat-inbox-test-revoked-token";
const PROJECT: u64 = 7;
const HOOK: u64 = 11;
const PER_PAGE_MAX: usize = 20;

pub struct FakeGitlab {
    api: Api,
}

impl FakeGitlab {
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeGitlab { api: Api::default() })
    }

    /// The push hook's body, rendered from the event alone; `email` is the pusher's address, as sent or as logged.
    fn body(event: &Event, email: &str) -> serde_json::Value {
        let sha = format!("{:0>40}", event.id.replace('-', ""));
        json!({
            "object_kind": "push",
            "event_name": "push",
            "before": "95790bf891e76fee5e1747ab589903a6a1f80f22",
            "after": sha,
            "ref": "refs/heads/main",
            "ref_protected": true,
            "checkout_sha": sha,
            "user_id": 4,
            "user_name": "John Smith",
            "user_username": "jsmith",
            "user_email": email,
            "project_id": PROJECT,
            "project": {"id": PROJECT, "name": "Diaspora", "path_with_namespace": "mike/diaspora",
                        "web_url": "https://gitlab.example.com/mike/diaspora", "default_branch": "main"},
            "commits": [{"id": sha, "message": "fixed readme\n", "title": "fixed readme",
                         "timestamp": rfc3339_secs(event.created_ms), "added": [], "modified": ["README.md"], "removed": []}],
            "total_commits_count": 1,
        })
    }

    /// The headers GitLab sends with the event (beside `X-Gitlab-Token`), as GitLab names them.
    fn sent_headers(event: &Event) -> Vec<(String, String)> {
        let tail = &event.id[event.id.len() - 12..];
        vec![
            ("User-Agent".into(), "GitLab/17.6.0".into()),
            ("X-Gitlab-Instance".into(), "https://gitlab.example.com".into()),
            ("X-Gitlab-Event".into(), event.event_type.clone()),
            (
                "X-Gitlab-Webhook-UUID".into(),
                "0e1b4f3a-5a53-4b8f-9a64-9d0bd3d1c2a1".into(),
            ),
            (
                "X-Gitlab-Event-UUID".into(),
                format!("8b1f1a6c-8f0e-4d8c-9b1e-{tail}"),
            ),
            ("Idempotency-Key".into(), event.id.clone()),
        ]
    }

    /// The delivery attempts of an event, newest first: (log id, time, response status).
    fn attempts(event: &Event) -> Vec<(u64, i64, &'static str)> {
        let n: u64 = u64::from_str_radix(&event.id[..8], 16).unwrap();
        if n % 2 == 1 {
            vec![
                (n * 2 + 1, event.created_ms + 10_000, "200"),
                (n * 2, event.created_ms, "500"),
            ]
        } else {
            vec![(n * 2, event.created_ms, "200")]
        }
    }

    /// Every row, newest first.
    fn rows(&self) -> Vec<serde_json::Value> {
        let mut rows: Vec<(i64, u64, serde_json::Value)> = Vec::new();
        for event in self.api.events() {
            for (id, at, status) in FakeGitlab::attempts(&event) {
                let mut request_headers = serde_json::Map::new();
                request_headers.insert("Content-Type".into(), json!("application/json"));
                for (k, v) in FakeGitlab::sent_headers(&event) {
                    request_headers.insert(k, json!(v));
                }
                request_headers.insert("X-Gitlab-Token".into(), json!("[REDACTED]"));
                let row = json!({
                    "id": id,
                    "url": "https://hooks.example.com/webhooks/gitlab",
                    "trigger": "push_hooks",
                    "request_headers": request_headers,
                    "request_data": FakeGitlab::body(&event, "[REDACTED]"),
                    "response_headers": {"Content-Type": "application/json"},
                    "response_body": if status == "200" { "{\"ok\":true}" } else { "upstream unavailable" },
                    "execution_duration": 0.12,
                    "response_status": status,
                    "created_at": rfc3339(at),
                });
                rows.push((at, id, row));
            }
        }
        rows.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        rows.into_iter().map(|(_, _, row)| row).collect()
    }
}

fn message(status: StatusCode, text: &str) -> Response {
    (status, Json(json!({"message": text}))).into_response()
}

async fn events(
    State(fake): State<Arc<FakeGitlab>>,
    Path((kind, owner, hook)): Path<(String, String, String)>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match fake.api.gate() {
        Gate::Fail => return message(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error"),
        Gate::RateLimited => {
            let now = now_ms() / 1000;
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("content-type", "text/plain".to_owned()),
                    ("retry-after", "1".to_owned()),
                    ("ratelimit-name", "throttle_authenticated_api".to_owned()),
                    ("ratelimit-limit", "60".to_owned()),
                    ("ratelimit-observed", "61".to_owned()),
                    ("ratelimit-remaining", "0".to_owned()),
                    ("ratelimit-reset", (now + 1).to_string()),
                ],
                "Retry later\n",
            )
                .into_response();
        }
        Gate::Serve => {}
    }
    if headers.get("private-token").and_then(|v| v.to_str().ok()) != Some(TOKEN) {
        return message(StatusCode::UNAUTHORIZED, "401 Unauthorized");
    }
    if kind != "projects" || owner != PROJECT.to_string() || hook != HOOK.to_string() {
        return message(StatusCode::NOT_FOUND, "404 Not found");
    }
    let number = |k: &str, default: usize| q.get(k).map_or(Some(default), |v| v.parse::<usize>().ok());
    let Some(per_page) = number("per_page", 20).filter(|n| (1..=PER_PAGE_MAX).contains(n)) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "per_page does not have a valid value"})),
        )
            .into_response();
    };
    let Some(page) = number("page", 1).filter(|&n| n >= 1) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "page is invalid"}))).into_response();
    };
    let rows = fake.rows();
    let total_pages = rows.len().div_ceil(per_page).max(1);
    let body: Vec<_> = rows
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect();
    let next = if page < total_pages {
        (page + 1).to_string()
    } else {
        String::new()
    };
    let prev = if page > 1 {
        (page - 1).to_string()
    } else {
        String::new()
    };
    (
        [
            ("x-page", page.to_string()),
            ("x-per-page", per_page.to_string()),
            ("x-next-page", next),
            ("x-prev-page", prev),
            ("x-total", rows.len().to_string()),
            ("x-total-pages", total_pages.to_string()),
        ],
        Json(body),
    )
        .into_response()
}

impl Fake for FakeGitlab {
    fn provider(&self) -> &'static str {
        "gitlab"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(
            Router::new()
                .route("/{kind}/{owner}/hooks/{hook}/events", get(events))
                .with_state(self),
        )
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// A UUID, as GitLab writes `Idempotency-Key`.
    fn new_id(&self, n: usize) -> String {
        format!("{n:08x}-9a0f-4c42-8e0b-{n:012x}")
    }
    fn event_type(&self) -> &'static str {
        "Push Hook"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        Webhook {
            body: serde_json::to_vec(&FakeGitlab::body(event, "jsmith@example.com")).unwrap(),
            content_type: "application/json",
            headers: FakeGitlab::sent_headers(event)
                .into_iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect(),
        }
    }
    /// The body as GitLab logged it: the address redacted.
    fn stored(&self, event: &Event) -> serde_json::Value {
        FakeGitlab::body(event, "[REDACTED]")
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let var = format!("{prefix}_TOKEN");
        let token = if wrong { WRONG_TOKEN } else { TOKEN };
        (
            format!("token = \"env:{var}\"\nhook = \"projects/{PROJECT}/hooks/{HOOK}\""),
            vec![(var, token.to_owned())],
        )
    }
    fn receiving(&self, prefix: &str) -> Receiving {
        let var = format!("{prefix}_WEBHOOK_TOKEN");
        Receiving {
            config: format!("secrets = [\"env:{var}\"]"),
            env: vec![(var, "gitlab-test-token-0f5c2b".to_owned())],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        PER_PAGE_MAX
    }
}
