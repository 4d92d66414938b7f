//! What a deployed function reads and refuses at start: its resources from the environment, its config from the
//! SSM parameter and its secrets from Secrets Manager and SSM, and a retry budget the redrive policy would cut short.

use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::{config_from, receiver_from_env, AwsSecrets, Clients, Resources, Runtime};
use inbox_core::config::{Config, SecretRef};
use inbox_core::handlers::{http_client, Registry};
use inbox_core::secrets::{LocalSecrets, SecretResolver};

use crate::stack::{deliver_signed, emulator, prefix, stripe_body, SECRET};

/// Resources from the environment name what is missing.
#[test]
fn resources_need_the_table_and_queue() {
    let r = Resources {
        table: "t".into(),
        queue_url: "q".into(),
        dlq_url: None,
        bucket: Some("b".into()),
        topic_arn: None,
        max_receive_count: None,
        retention_days: None,
    };
    assert_eq!(
        r.env_lines(),
        [
            "export INBOX_TABLE=t",
            "export INBOX_QUEUE_URL=q",
            "export INBOX_BUCKET=b"
        ]
    );
}

/// A deployed function reads its config from the SSM parameter the template names, and the receiver its secrets
/// from Secrets Manager and SSM (the template's way, never exercised by the inline configs above): each read, the
/// errors for what is missing, a worker and the receiver started from the environment as on Lambda (the worker
/// with handlers and no secret, the receiver with both secrets and no handler), and deliveries signed with either
/// stored secret accepted, any other refused.
#[tokio::test]
async fn the_config_parameter_and_the_secrets_are_read_from_ssm_and_secrets_manager() {
    let Some(sdk) = emulator().await else { return };
    let p = prefix();
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let old_secret = "whsec_rotated_out_but_still_accepted";
    ssm.put_parameter()
        .name(format!("/{p}/stripe-old"))
        .value(old_secret)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name(format!("{p}/stripe"))
        .secret_string(SECRET)
        .send()
        .await
        .unwrap();
    let toml = format!(
        "[sources.stripe]\nscheme = \"stripe\"\n\
         secrets = [\"secretsmanager:{p}/stripe\", \"ssm:/{p}/stripe-old\"]\nhandler = {{ kind = \"log\" }}\n"
    );
    ssm.put_parameter()
        .name(format!("/{p}/config"))
        .value(toml)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();

    let store = AwsSecrets::new(&sdk);
    let err = config_from(None, None, &store).await.unwrap_err();
    assert_eq!(err.field, "INBOX_CONFIG_PARAMETER");
    let err = config_from(None, Some(format!("/{p}/absent")), &store)
        .await
        .unwrap_err();
    assert_eq!(err.field, "INBOX_CONFIG_PARAMETER");
    assert!(
        err.to_string().contains(&format!("/{p}/absent: cannot read it")),
        "{err}"
    );
    let err = store
        .resolve(&SecretRef::SecretsManager(format!("{p}/absent")))
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("cannot read it"), "{err}");
    assert_eq!(
        store
            .resolve(&SecretRef::Ssm(format!("/{p}/stripe-old")))
            .await
            .unwrap(),
        old_secret
    );

    let config = config_from(None, Some(format!("/{p}/config")), &store)
        .await
        .unwrap();
    assert_eq!(
        config.sources.keys().map(|s| s.to_string()).collect::<Vec<_>>(),
        ["stripe"]
    );
    // Each function starts as it does on Lambda: from the environment the template sets (the only test here that
    // sets these variables, and every name is this test's own).
    let resources = create_stack(&sdk, &p, QueueSettings::default()).await.unwrap();
    std::env::remove_var("INBOX_CONFIG");
    std::env::set_var("INBOX_CONFIG_PARAMETER", format!("/{p}/config"));
    std::env::set_var("INBOX_TABLE", &resources.table);
    std::env::set_var("INBOX_QUEUE_URL", &resources.queue_url);
    let worker = Runtime::from_env(Registry::new(http_client())).await.unwrap();
    let stripe = worker.sources.get("stripe").unwrap();
    assert!(stripe.credentials.secrets.is_empty(), "a worker reads no secret");
    assert!(stripe.handler.is_some());
    let receiver = receiver_from_env().await.unwrap();
    let stripe = receiver.sources.get("stripe").unwrap();
    assert_eq!(
        stripe.credentials.secrets.len(),
        2,
        "the receiver reads both secrets"
    );
    assert!(stripe.handler.is_none(), "the receiver builds no handler");
    // Signed with the Secrets Manager secret, then the SSM one, then the first event again.
    let sm = stripe_body(&format!("evt_{p}_sm"));
    let ssm = stripe_body(&format!("evt_{p}_ssm"));
    for (secret, body, expected) in [
        (SECRET, &sm, "accepted"),
        (old_secret, &ssm, "accepted"),
        (SECRET, &sm, "duplicate"),
    ] {
        let (status, answer) = deliver_signed(receiver.clone(), secret, body).await;
        assert_eq!(
            (status, answer["status"].as_str()),
            (200, Some(expected)),
            "{answer}"
        );
    }
    let (status, _) = deliver_signed(
        receiver,
        "whsec_nobody_stored",
        &stripe_body(&format!("evt_{p}_no")),
    )
    .await;
    assert_eq!(status, 401);
}

/// With more receives needed than the work queue's maxReceiveCount, SQS could dead-letter an
/// event before its retry budget. The functions refuse such a config at start, naming both settings.
#[tokio::test]
async fn a_retry_budget_the_redrive_policy_would_cut_short_is_refused() {
    let Some(sdk) = emulator().await else { return };
    let settings = QueueSettings {
        max_receive_count: 10,
        visibility_timeout: 30,
    };
    let resources = create_stack(&sdk, &prefix(), settings).await.unwrap();
    assert_eq!(resources.max_receive_count, Some(10));
    std::env::set_var("AWS_TEST_SOURCE_SECRET", SECRET);
    let source = "[sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\n\
                  handler = { kind = \"log\" }\n";
    let start = |retry: &str| {
        let config = Config::from_toml(&format!("[retry]\n{retry}\n{source}")).unwrap();
        let (clients, resources) = (Clients::new(&sdk), resources.clone());
        async move {
            Runtime::new(
                clients,
                Some(&LocalSecrets),
                resources,
                config,
                Registry::new(http_client()),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
        }
    };
    // 12 attempts need 12 receives
    let err = start("max_attempts = 12").await.unwrap_err();
    assert!(
        err.contains("retry.max_attempts") && err.contains("MaxReceiveCount = 10"),
        "{err}"
    );
    // 9 attempts fit, with one receive to spare
    start("max_attempts = 9").await.unwrap();
    // a day's cap comes back early from SQS's 12-hour limit: 2 more receives per long wait
    let err = start("max_attempts = 5\nbase = \"1d\"\ncap = \"1d\"")
        .await
        .unwrap_err();
    assert!(err.contains("needs up to 13 receives"), "{err}");
}
