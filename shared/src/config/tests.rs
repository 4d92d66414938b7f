//! The configuration's tests: the full example, the defaults, and each refusal naming its field.

use super::*;

const FULL: &str = r#"
retention_days = 7
[server]
listen = "127.0.0.1:3999"
data_dir = "/tmp/x"
[alarm]
notify_url = "http://127.0.0.1:9000/alerts"
[retry]
base = "200ms"
cap = "1m"
max_attempts = 5
max_age = "1h"
[sweeper]
interval = "10s"
[sources.stripe]
scheme = "stripe"
secrets = ["env:STRIPE_WEBHOOK_SECRET", "file:/run/secrets/old"]
tolerance = "5m"
max_body_bytes = 1048576
handler = { kind = "forward", url = "http://127.0.0.1:8080/stripe", timeout = "10s" }
[sources.stripe.retry]
max_attempts = 3
[sources.acme]
scheme = "hmac"
signature_header = "X-Acme-Signature"
algorithm = "sha256"
encoding = "hex"
prefix = "sha256="
id = "header:X-Acme-Delivery"
secrets = ["file:/run/secrets/acme"]
handler = { kind = "log" }
"#;

#[test]
fn full_example_loads_with_overrides() {
    let c = Config::from_toml(FULL).unwrap();
    assert_eq!(c.server.listen.port(), 3999);
    assert_eq!(c.retention, Duration::from_secs(7 * 86_400));
    assert_eq!(c.retry.base, Duration::from_millis(200));
    let stripe = &c.sources[&SourceName::parse("stripe").unwrap()];
    assert_eq!(stripe.retry.max_attempts, 3);
    assert_eq!(
        stripe.retry.base,
        Duration::from_millis(200),
        "per-source retry inherits the global one"
    );
    assert_eq!(stripe.secrets[1], SecretRef::File("/run/secrets/old".into()));
    let acme = &c.sources[&SourceName::parse("acme").unwrap()];
    assert!(
        matches!(acme.scheme.preset().map(|p| &p.family), Some(inbox_schemes::Family::Hmac(h))
            if h.signature.prefix == "sha256=" && h.algorithm == crate::schemes::Algorithm::Sha256)
    );
    let (route, _, handler) = c.single_route(&SourceName::parse("acme").unwrap()).unwrap();
    assert_eq!((route.as_str(), handler), ("acme", &HandlerConfig::Log));
    let (_, route, _) = c.single_route(&SourceName::parse("stripe").unwrap()).unwrap();
    assert_eq!(
        route.retry.max_attempts, 3,
        "the short form's route keeps the source's retry"
    );
    assert_eq!(acme.tolerance, DEFAULT_TOLERANCE);
}

#[test]
fn defaults_are_loopback_and_design_values() {
    let c = Config::from_toml("[sources.g]\nscheme=\"github\"\nsecrets=[\"env:G\"]\nhandler={kind=\"log\"}")
        .unwrap();
    assert!(c.server.listen.ip().is_loopback());
    assert_eq!(c.retry, RetryPolicy::default());
    assert_eq!(c.retention, Duration::from_secs(30 * 86_400));
}

fn err(text: &str) -> ConfigError {
    Config::from_toml(text).unwrap_err()
}

#[test]
fn errors_name_the_source_and_field() {
    let base = "[sources.s]\nscheme=\"stripe\"\nhandler={kind=\"log\"}\n";
    assert_eq!(
        err(&format!("{base}secrets=[\"whsec_abc\"]")).field,
        "sources.s.secrets[0]"
    );
    assert_eq!(err(&format!("{base}secrets=[]")).field, "sources.s.secrets");
    assert_eq!(
        err(&format!("{base}secrets=[\"env:X\"]\ntolerance=\"5 fortnights\"")).field,
        "sources.s.tolerance"
    );
    assert_eq!(
        err(&format!("{base}secrets=[\"env:X\"]\nprefix=\"x\"")).field,
        "sources.s.prefix"
    );
    let e = err(&format!("{base}secrets=[\"env:X\"]\ntolerence=\"5m\""));
    assert_eq!(e.field, "sources.s");
    assert!(e.message.contains("tolerence"), "{e}");
    assert_eq!(
        err("[sources.s]\nscheme=\"pgp\"\nsecrets=[\"env:X\"]\nhandler={kind=\"log\"}").field,
        "sources.s.scheme"
    );
    assert_eq!(
        err("[sources.s]\nscheme=\"hmac\"\nsecrets=[\"env:X\"]\nsignature_header=\"X-Sig\"\nhandler={kind=\"log\"}")
            .field,
        "sources.s.id"
    );
    assert_eq!(
        err(
            "[sources.s]\nscheme=\"github\"\nsecrets=[\"env:X\"]\nhandler={kind=\"forward\",url=\"ftp://x\"}"
        )
        .field,
        "sources.s.handler.url"
    );
    assert_eq!(err("[sources.S]\nscheme=\"github\"").field, "sources.S");
    assert_eq!(err("").field, "sources");
    assert_eq!(
        err("[server]\nlisten=\"nowhere\"\n[sources.g]").field,
        "server.listen"
    );
    assert_eq!(err("[retry]\nbase=\"1m\"\ncap=\"1s\"").field, "retry.cap");
}

#[test]
fn error_text_never_holds_a_literal_secret() {
    let e = err("[sources.s]\nscheme=\"stripe\"\nhandler={kind=\"log\"}\nsecrets=[\"whsec_topsecret\"]");
    assert!(!e.to_string().contains("topsecret"), "{e}");
}

fn reconcile(scheme: &str, block: &str) -> Result<Config, ConfigError> {
    Config::from_toml(&format!(
        "[sources.s]\nscheme=\"{scheme}\"\nsecrets=[\"env:X\"]\nhandler={{kind=\"log\"}}\n[sources.s.reconcile]\n{block}"
    ))
}

fn reconcile_err(scheme: &str, block: &str) -> ConfigError {
    reconcile(scheme, block).unwrap_err()
}

#[test]
fn reconcile_blocks_load_with_design_defaults() {
    let c = reconcile("stripe", "provider=\"stripe\"\napi_key=\"env:STRIPE_KEY\"").unwrap();
    let r = c.sources[&SourceName::parse("s").unwrap()]
        .reconcile
        .clone()
        .unwrap();
    assert_eq!(r.interval, Duration::from_secs(15 * 60));
    assert_eq!(r.lookback, Duration::from_secs(72 * 3600));
    assert_eq!(r.settle, Duration::from_secs(5 * 60));
    assert_eq!(r.api_base.as_str(), "https://api.stripe.com/");
    assert_eq!(
        r.provider,
        ProviderConfig::Stripe {
            api_key: SecretRef::Env("STRIPE_KEY".into()),
            account: None
        }
    );

    let c = reconcile(
        "stripe",
        "provider=\"stripe\"\napi_key=\"file:/k\"\naccount=\"acct_1\"\nlookback=\"30d\"\nsettle=\"0\"\napi_base=\"http://127.0.0.1:9/\"",
    )
    .unwrap();
    let r = c.sources[&SourceName::parse("s").unwrap()]
        .reconcile
        .clone()
        .unwrap();
    assert_eq!(r.lookback, Duration::from_secs(30 * 86_400));
    assert_eq!(r.settle, Duration::ZERO);
    assert!(matches!(r.provider, ProviderConfig::Stripe { account: Some(ref a), .. } if a == "acct_1"));

    let c = reconcile(
        "github",
        "provider=\"github\"\ntoken=\"env:GH\"\nhook=\"repos/octo-org/hello.world/hooks/12345\"",
    )
    .unwrap();
    let r = c.sources[&SourceName::parse("s").unwrap()]
        .reconcile
        .clone()
        .unwrap();
    assert_eq!(r.api_base.as_str(), "https://api.github.com/");
    let ProviderConfig::Github { hook, auth } = r.provider else {
        panic!("github expected")
    };
    assert_eq!(
        hook.deliveries_path(),
        "repos/octo-org/hello.world/hooks/12345/deliveries"
    );
    assert_eq!(auth, GithubAuth::Token(SecretRef::Env("GH".into())));

    let c = reconcile(
        "github",
        "provider=\"github\"\napp_id=42\nprivate_key=\"file:/app.pem\"\nhook=\"app\"",
    )
    .unwrap();
    let r = c.sources[&SourceName::parse("s").unwrap()]
        .reconcile
        .clone()
        .unwrap();
    assert!(matches!(
        r.provider,
        ProviderConfig::Github {
            hook: GithubHook::App,
            auth: GithubAuth::App { app_id: 42, .. }
        }
    ));
    let org: GithubHook = "orgs/octo/hooks/7".parse().unwrap();
    assert_eq!(org.deliveries_path(), "orgs/octo/hooks/7/deliveries");
}

#[test]
fn reconcile_refusals_name_the_field() {
    let gh = |rest: &str| format!("provider=\"github\"\ntoken=\"env:GH\"\n{rest}");
    let cases: Vec<(&str, String, &str)> = vec![
        // The provider must list the events the source receives.
        (
            "github",
            "provider=\"stripe\"\napi_key=\"env:K\"".into(),
            "provider",
        ),
        ("stripe", gh("hook=\"repos/o/r/hooks/1\""), "provider"),
        ("stripe", "provider=\"shopify\"".into(), "provider"),
        ("slack", gh("hook=\"repos/o/r/hooks/1\""), "provider"),
        // Credentials are references, and the right ones for the provider.
        ("stripe", "provider=\"stripe\"".into(), "api_key"),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"rk_live_abc\"".into(),
            "api_key",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\ntoken=\"env:T\"".into(),
            "token",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\nhook=\"app\"".into(),
            "hook",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\naccount=\"acct/../x\"".into(),
            "account",
        ),
        (
            "github",
            gh("hook=\"repos/o/r/hooks/1\"\napi_key=\"env:K\""),
            "api_key",
        ),
        (
            "github",
            gh("hook=\"repos/o/r/hooks/1\"\naccount=\"acct_1\""),
            "account",
        ),
        (
            "github",
            "provider=\"github\"\nhook=\"repos/o/r/hooks/1\"".into(),
            "token",
        ),
        (
            "github",
            "provider=\"github\"\ntoken=\"ghp_abc\"\nhook=\"repos/o/r/hooks/1\"".into(),
            "token",
        ),
        // The hook.
        ("github", "provider=\"github\"\ntoken=\"env:GH\"".into(), "hook"),
        ("github", gh("hook=\"repos/o/r/hooks/x\""), "hook"),
        ("github", gh("hook=\"repos/o/hooks/1\""), "hook"),
        ("github", gh("hook=\"repos/../r/hooks/1\""), "hook"),
        ("github", gh("hook=\"orgs/o/hooks/0\""), "hook"),
        ("github", gh("hook=\"users/o/hooks/1\""), "hook"),
        ("github", gh("hook=\"repos/o/r/hooks/1/\""), "hook"),
        // An App's hook takes the App's JWT, and only it does.
        ("github", gh("hook=\"app\""), "token"),
        ("github", "provider=\"github\"\nhook=\"app\"".into(), "app_id"),
        (
            "github",
            "provider=\"github\"\nhook=\"app\"\napp_id=1".into(),
            "private_key",
        ),
        (
            "github",
            "provider=\"github\"\nhook=\"app\"\napp_id=1\nprivate_key=\"-----BEGIN\"".into(),
            "private_key",
        ),
        ("github", gh("hook=\"repos/o/r/hooks/1\"\napp_id=1"), "app_id"),
        (
            "github",
            gh("hook=\"orgs/o/hooks/1\"\nprivate_key=\"file:/k\""),
            "private_key",
        ),
        // Times: past the provider's retention, zero, malformed.
        (
            "github",
            gh("hook=\"repos/o/r/hooks/1\"\nlookback=\"4d\""),
            "lookback",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\nlookback=\"31d\"".into(),
            "lookback",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\nlookback=\"0\"".into(),
            "lookback",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\ninterval=\"0\"".into(),
            "interval",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\ninterval=\"15 fortnights\"".into(),
            "interval",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\nlookback=\"1h\"\nsettle=\"2h\"".into(),
            "settle",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\napi_base=\"ftp://x\"".into(),
            "api_base",
        ),
        (
            "stripe",
            "provider=\"stripe\"\napi_key=\"env:K\"\napi_base=\"https://u:p@api.stripe.com\"".into(),
            "api_base",
        ),
    ];
    for (scheme, block, field) in cases {
        let e = reconcile_err(scheme, &block);
        assert_eq!(e.field, format!("sources.s.reconcile.{field}"), "{block:?}: {e}");
    }
    // An unknown field is refused where it stands.
    let e = reconcile_err("stripe", "provider=\"stripe\"\napi_key=\"env:K\"\nlookbak=\"1h\"");
    assert_eq!(e.field, "sources.s");
    assert!(e.message.contains("lookbak"), "{e}");
}

#[test]
fn reconcile_errors_never_hold_a_literal_credential() {
    for block in [
        "provider=\"stripe\"\napi_key=\"sk_live_topsecret\"",
        "provider=\"github\"\nhook=\"repos/o/r/hooks/1\"\ntoken=\"ghp_topsecret\"",
    ] {
        let scheme = if block.contains("stripe") {
            "stripe"
        } else {
            "github"
        };
        let e = reconcile_err(scheme, block);
        assert!(!e.to_string().contains("topsecret"), "{e}");
    }
}

#[test]
fn every_reconciled_provider_takes_its_own_fields_and_no_other() {
    // The least block each provider takes, its defaults (a lookback within what the provider keeps).
    let minimal = [
        (
            "chargebee",
            "api_key=\"env:K\"\nsite=\"acme-test\"",
            72,
            "https://acme-test.chargebee.com/api/v2",
        ),
        (
            "gitlab",
            "token=\"env:T\"\nhook=\"projects/42/hooks/7\"",
            72,
            "https://gitlab.com/api/v4",
        ),
        ("gocardless", "token=\"env:T\"", 72, "https://api.gocardless.com/"),
        (
            "mailgun",
            "api_key=\"env:K\"\ndomain=\"mg.example.com\"\nevent_types=[\"delivered\", \"failed\"]",
            72,
            "https://api.mailgun.net/",
        ),
        (
            "okta",
            "api_key=\"env:K\"\ndomain=\"acme.okta.com\"\nevent_types=[\"user.session.start\"]",
            72,
            "https://acme.okta.com/",
        ),
        ("paddle", "api_key=\"env:K\"", 72, "https://api.paddle.com/"),
        ("persona", "api_key=\"env:K\"", 72, "https://api.withpersona.com/"),
        (
            "polar",
            "token=\"env:T\"\nhook=\"6f0c2c5e-8a3b-4c1d-9e2f-1a2b3c4d5e6f\"",
            72,
            "https://api.polar.sh/",
        ),
        ("square", "token=\"env:T\"", 72, "https://connect.squareup.com/"),
        ("workos", "api_key=\"env:K\"", 72, "https://api.workos.com/"),
    ];
    // Square signs the endpoint's URL: its source names it.
    let source = |scheme: &str| match scheme {
        "square" => format!("{scheme}\"\nurl=\"https://hooks.example.com/webhooks/s"),
        other => other.to_owned(),
    };
    let reconcile = |scheme: &str, block: &str| reconcile(&source(scheme), block);
    let reconcile_err = |scheme: &str, block: &str| reconcile(scheme, block).unwrap_err();
    for (provider, fields, hours, base) in minimal {
        let c = reconcile(provider, &format!("provider=\"{provider}\"\n{fields}"))
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        let r = c.sources.values().next().unwrap().reconcile.clone().unwrap();
        assert_eq!(r.provider.name(), provider);
        assert_eq!(r.lookback, Duration::from_secs(hours * 3600), "{provider}");
        assert_eq!(r.api_base.as_str(), base, "{provider}");
        // A field of another provider is refused, named.
        let other = if fields.contains("api_key") {
            "token=\"env:X\""
        } else {
            "api_key=\"env:X\""
        };
        let e = reconcile_err(provider, &format!("provider=\"{provider}\"\n{fields}\n{other}"));
        let field = other.split('=').next().unwrap();
        assert_eq!(e.field, format!("sources.s.reconcile.{field}"), "{provider}: {e}");
        assert!(e.message.contains(provider), "{e}");
        // A literal credential is refused without being echoed.
        let literal = fields
            .replace("env:K", "sk_live_topsecret")
            .replace("env:T", "tok_topsecret");
        let e = reconcile_err(provider, &format!("provider=\"{provider}\"\n{literal}"));
        assert!(!e.to_string().contains("topsecret"), "{e}");
        // Past the provider's retention.
        let e = reconcile_err(
            provider,
            &format!("provider=\"{provider}\"\n{fields}\nlookback=\"400d\""),
        );
        assert_eq!(e.field, "sources.s.reconcile.lookback", "{provider}: {e}");
        // Another provider's scheme does not receive these events.
        let e = reconcile_err("stripe", &format!("provider=\"{provider}\"\n{fields}"));
        assert_eq!(e.field, "sources.s.reconcile.provider", "{provider}: {e}");
    }
    let cases = [
        ("chargebee", "provider=\"chargebee\"\napi_key=\"env:K\"", "site"),
        ("chargebee", "provider=\"chargebee\"\napi_key=\"env:K\"\nsite=\"acme.evil.example\"", "site"),
        ("gitlab", "provider=\"gitlab\"\ntoken=\"env:T\"", "hook"),
        ("gitlab", "provider=\"gitlab\"\ntoken=\"env:T\"\nhook=\"projects/group%2Fname/hooks/1\"", "hook"),
        ("gitlab", "provider=\"gitlab\"\ntoken=\"env:T\"\nhook=\"repos/o/r/hooks/1\"", "hook"),
        ("mailgun", "provider=\"mailgun\"\napi_key=\"env:K\"\ndomain=\"mg.example.com\"", "event_types"),
        (
            "mailgun",
            "provider=\"mailgun\"\napi_key=\"env:K\"\ndomain=\"mg.example.com\"\nevent_types=[]",
            "event_types",
        ),
        (
            "mailgun",
            "provider=\"mailgun\"\napi_key=\"env:K\"\ndomain=\"mg.example.com/../x\"\nevent_types=[\"delivered\"]",
            "domain",
        ),
        (
            "okta",
            "provider=\"okta\"\napi_key=\"env:K\"\ndomain=\"acme.okta.com\"\nevent_types=[\"a\\\" or 1\"]",
            "event_types",
        ),
        ("paypal", "provider=\"paypal\"\nclient_id=\"env:I\"", "client_secret"),
        ("polar", "provider=\"polar\"\ntoken=\"env:T\"\nhook=\"../x\"", "hook"),
    ];
    for (scheme, block, field) in cases {
        let e = reconcile_err(scheme, block);
        assert_eq!(e.field, format!("sources.s.reconcile.{field}"), "{block:?}: {e}");
    }
    let hook: GitlabHook = "groups/9/hooks/3".parse().unwrap();
    assert_eq!(hook.events_path(), "groups/9/hooks/3/events");
}

/// A source of a family configured field by field: `fields` beside its scheme, a secret and a handler.
fn family(scheme: &str, fields: &str) -> Result<Config, ConfigError> {
    Config::from_toml(&format!(
        "[sources.s]\nscheme = \"{scheme}\"\nsecrets = [\"env:S\"]\nhandler = {{ kind = \"log\" }}\n{fields}"
    ))
}

#[test]
fn an_id_hashed_from_the_body_needs_a_signature_over_the_body() {
    // The signature does not cover the raw body: a hash of it would give a resend with a byte changed a new id.
    for (scheme, fields, field) in [
        (
            "hmac",
            "signature_header = \"x-sig\"\nsigned = \"{header:x-ts}\"\nid = \"sha256\"",
            "id",
        ),
        (
            "hmac",
            "signature_header = \"x-sig\"\nsigned = \"{url}{params}\"\nurl = \"https://h.example/s\"\nid = \"sha256\"",
            "id",
        ),
        (
            "ecdsa",
            "signature_header = \"x-sig\"\nsigned = \"{header:x-ts}\"\nid = \"sha256\"",
            "id",
        ),
        ("jwt", "id = \"sha256\"", "id"),
        ("jwt", "id = \"json:/id\"\nbatch = \"/events\"", "batch"),
    ] {
        let fields = if scheme == "ecdsa" {
            format!("{fields}\npublic_key = \"-----BEGIN PUBLIC KEY-----\"")
        } else {
            fields.to_owned()
        };
        let e = family(scheme, &fields).unwrap_err();
        assert_eq!(e.field, format!("sources.s.{field}"), "{scheme} {fields:?}: {e}");
        assert!(e.message.contains("does not cover"), "{e}");
    }
    // Where it does, or where nothing is signed at all (a token: whoever saw a delivery holds it), it stands.
    for (scheme, fields) in [
        ("hmac", "signature_header = \"x-sig\"\nid = \"sha256\""),
        (
            "hmac",
            "signature_header = \"x-sig\"\nsigned = \"{url}{params}{body}\"\nurl = \"https://h.example/s\"\nid = \"sha256\"",
        ),
        ("jwt", "body_hash_claim = \"sha256\"\nid = \"sha256\""),
        (
            "jwt",
            "body_hash_claim = \"sha256\"\nid = \"json:/id\"\nbatch = \"/events\"",
        ),
        ("token", "token = \"header:x-token\"\nid = \"sha256\""),
    ] {
        family(scheme, fields).unwrap_or_else(|e| panic!("{scheme} {fields:?}: {e}"));
    }
}

#[test]
fn an_unsigned_query_id_is_resendable_like_an_unsigned_header() {
    let resendable = |fields: &str| {
        let c = family("hmac", &format!("signature_header = \"x-sig\"\n{fields}")).unwrap();
        c.sources.values().next().unwrap().scheme.signs_body_but_not_id()
    };
    assert!(resendable("id = \"query:delivery\""), "the query is not signed");
    assert!(
        resendable("id = \"header:x-delivery\""),
        "the header is not signed"
    );
    assert!(!resendable(
        "id = \"query:delivery\"\nsigned = \"{query:delivery}.{body}\""
    ));
    assert!(!resendable("id = \"query:delivery\"\nsigned = \"{path}{body}\""));
    assert!(!resendable("id = \"json:/id\""));
    // A signed timestamp leaves the id unsigned: within the tolerance the delivery can be sent again under a
    // fresh one.
    assert!(resendable(
        "id = \"query:delivery\"\ntimestamp = \"header:x-ts\"\nsigned = \"{timestamp}.{body}\""
    ));
    assert!(!resendable(
        "id = \"header:x-delivery\"\ntimestamp = \"header:x-ts\"\nsigned = \"{timestamp}.{header:x-delivery}.{body}\""
    ));
}

#[test]
fn the_store_is_sqlite_unless_postgres_is_named_with_a_url_reference() {
    let source = "[sources.g]\nscheme=\"github\"\nsecrets=[\"env:G\"]\nhandler={kind=\"log\"}\n";
    assert_eq!(Config::from_toml(source).unwrap().store, StoreConfig::Sqlite);
    let pg = Config::from_toml(&format!(
        "[store]\nkind=\"postgres\"\nurl=\"env:DATABASE_URL\"\nstatement_timeout=\"5s\"\n{source}"
    ))
    .unwrap();
    assert_eq!(
        pg.store,
        StoreConfig::Postgres {
            url: SecretRef::Env("DATABASE_URL".into()),
            pool_size: 16,
            statement_timeout: Duration::from_secs(5),
            ca_file: None,
            liveness: Duration::from_secs(30),
        }
    );
    for (store, field) in [
        ("kind=\"postgres\"", "store.url"),
        // A URL written out holds its password: refused, and not echoed.
        (
            "kind=\"postgres\"\nurl=\"postgres://u:hunter2@db/inbox\"",
            "store.url",
        ),
        ("kind=\"postgres\"\nurl=\"env:D\"\npool_size=1", "store.pool_size"),
        ("url=\"env:D\"", "store.url"),
        ("ca_file=\"/etc/ssl/db.pem\"", "store.ca_file"),
        ("liveness=\"10s\"", "store.liveness"),
        (
            "kind=\"postgres\"\nurl=\"env:D\"\nliveness=\"1s\"",
            "store.liveness",
        ),
        ("kind=\"mysql\"", "store.kind"),
    ] {
        let e = err(&format!("[store]\n{store}\n{source}"));
        assert_eq!(e.field, field, "{store}: {e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}

/// The sample configs the README, the compose file and the container image name load as they are.
#[test]
fn the_sample_configs_load() {
    for (name, text) in [
        (
            "examples/inbox.toml",
            include_str!("../../../examples/inbox.toml"),
        ),
        (
            "examples/postgres.toml",
            include_str!("../../../examples/postgres.toml"),
        ),
        (
            "infra/docker/inbox.toml",
            include_str!("../../../infra/docker/inbox.toml"),
        ),
    ] {
        let config = Config::from_toml(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            matches!(config.store, StoreConfig::Postgres { .. }),
            name != "examples/inbox.toml",
            "{name}"
        );
    }
}

/// The issue's example: two sources, four destinations, filters on the type and on a body field, `*` to a sink.
const ROUTED: &str = r#"
[sources.stripe]
scheme = "stripe"
secrets = ["env:STRIPE_WEBHOOK_SECRET"]
[sources.github]
scheme = "github"
secrets = ["env:GITHUB_WEBHOOK_SECRET"]

[destinations.billing]
kind = "forward"
url = "http://127.0.0.1:8081/billing"
timeout = "5s"
headers = { "X-Team" = "billing" }
[destinations.finance]
kind = "forward"
url = "http://127.0.0.1:8082/finance"
[destinations.analytics]
kind = "log"
[destinations.ci]
kind = "forward"
url = "http://127.0.0.1:8083/ci"

[routes.billing]
from = "stripe"
to = "billing"
[routes.invoices]
from = "stripe"
to = "finance"
filter = 'event_type.startsWith("invoice.") && body.data.object.amount_paid > 0'
[routes.invoices.retry]
max_attempts = 4
[routes.everything]
from = "*"
to = "analytics"
[routes.pushes]
from = ["github"]
to = "ci"
filter = 'event_type == "push"'
"#;

fn name<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().unwrap()
}

#[test]
fn routes_take_sources_to_destinations_through_filters() {
    let c = Config::from_toml(ROUTED).unwrap();
    assert_eq!(c.destinations.len(), 4);
    let stripe: SourceName = name("stripe");
    let github: SourceName = name("github");
    let from = |s: &SourceName| {
        c.routes_from(s)
            .iter()
            .map(|(n, _)| n.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(from(&stripe), ["billing", "everything", "invoices"]);
    assert_eq!(from(&github), ["everything", "pushes"]);
    let invoices = &c.routes[&name::<RouteName>("invoices")];
    assert_eq!(invoices.retry.max_attempts, 4);
    assert_eq!(
        invoices.retry.base,
        RetryPolicy::default().base,
        "a route's retry is over the global one"
    );
    assert!(invoices.filter.is_some());
    assert_eq!(
        c.destinations[&name("billing")].handler,
        HandlerConfig::Forward {
            url: "http://127.0.0.1:8081/billing".parse().unwrap(),
            timeout: Duration::from_secs(5),
            headers: vec![("x-team".into(), "billing".into())],
        }
    );
    // This release runs one unfiltered route per source, and says which route it cannot run yet.
    let e = c.single_route(&github).unwrap_err();
    assert_eq!(e.field, "routes.pushes", "{e}");
}

#[test]
fn a_handler_is_the_short_form_of_a_route_and_a_destination() {
    let c = Config::from_toml(FULL).unwrap();
    assert_eq!(c.routes.len(), 2);
    let stripe = &c.routes[&name::<RouteName>("stripe")];
    assert_eq!(stripe.from, From::Sources(vec![name("stripe")]));
    assert_eq!(stripe.to.as_str(), "stripe");
    assert!(stripe.short_form && stripe.filter.is_none());
    for source in c.sources.keys() {
        c.single_route(source).unwrap();
    }
}

#[test]
fn bad_routing_stops_the_start_naming_the_route() {
    let with = |extra: &str| err(&format!("{ROUTED}{extra}"));
    let e = with("[routes.lost]\nfrom = \"stripe\"\nto = \"nowhere\"\n");
    assert_eq!(e.field, "routes.lost.to", "{e}");
    let e = with("[routes.typo]\nfrom = \"stripe\"\nto = \"billing\"\nfilter = 'event_type.startsWith(\"a\") && bdy.x == 1'\n");
    assert_eq!(e.field, "routes.typo.filter", "{e}");
    assert!(e.message.contains("line 1, column 31"), "{e}");
    let e = with("[routes.broken]\nfrom = \"stripe\"\nto = \"billing\"\nfilter = 'event_type =='\n");
    assert_eq!(e.field, "routes.broken.filter", "{e}");
    assert!(e.message.starts_with("line 1, column "), "{e}");
    let e = with("[routes.x]\nfrom = \"shopify\"\nto = \"billing\"\n");
    assert_eq!(e.field, "routes.x.from", "{e}");
    let e = with("[routes.x]\nfrom = []\nto = \"billing\"\n");
    assert_eq!(e.field, "routes.x.from", "{e}");
    let e = with("[routes.x]\nfrom = \"stripe\"\nto = \"billing\"\nfliter = \"true\"\n");
    assert_eq!(e.field, "routes.x", "{e}");
    // A name used twice: a source's handler is the short form of a route and a destination named after it.
    let e = err(&format!("{FULL}[destinations.stripe]\nkind = \"log\"\n"));
    assert_eq!(e.field, "destinations.stripe", "{e}");
    assert!(e.message.contains("used twice"), "{e}");
    let e = err(&format!(
        "{FULL}[routes.acme]\nfrom = \"acme\"\nto = \"stripe\"\n"
    ));
    assert_eq!(e.field, "routes.acme", "{e}");
    // A source no route takes would store events nobody runs.
    let e = err("[sources.s]\nscheme=\"github\"\nsecrets=[\"env:G\"]\n");
    assert_eq!(e.field, "sources.s", "{e}");
    // A destination's headers: not its own, not a credential in clear.
    for (header, why) in [
        ("Idempotency-Key", "set by forward"),
        ("Authorization", "credential"),
        ("X-Api-Key", "credential"),
    ] {
        let e = err(&format!(
            "{FULL}[destinations.d]\nkind = \"forward\"\nurl = \"http://127.0.0.1:1/\"\nheaders = {{ \"{header}\" = \"v\" }}\n"
        ));
        assert_eq!(e.field, format!("destinations.d.headers.{header}"), "{e}");
        assert!(e.message.contains(why), "{e}");
        assert!(!e.message.contains("\"v\""), "{e}");
    }
}
