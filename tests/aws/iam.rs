//! What `infra/template.yaml` grants each function, and the IAM actions behind the SDK calls a function made (as
//! `testkit::calls::CallCounter` records them), for the test that holds the two equal.
//!
//! IAM names an SDK operation's action after it (`dynamodb:PutItem`), and authorises a `TransactWriteItems` by
//! the actions of its parts (`Put` as `dynamodb:PutItem`, `Update` as `dynamodb:UpdateItem`, `ConditionCheck` as
//! `dynamodb:ConditionCheckItem`): https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html;
//! and an S3 `CopyObject` by reading the source, writing the destination and, when it sets tags, tagging it (a
//! `PutObject` with tags likewise needs the right to tag).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use yaml_rust2::{Yaml, YamlLoader};

/// The functions and their roles in the template.
pub const FUNCTIONS: [(&str, &str); 5] = [
    ("receiver", "ReceiverRole"),
    ("processor", "ProcessorRole"),
    ("alarm", "AlarmRole"),
    ("sweeper", "SweeperRole"),
    ("reconciler", "ReconcilerRole"),
];

/// Granted, but never called by the functions' code: Lambda writes their logs, KMS is used by SNS, SSM and
/// Secrets Manager on their behalf (`kms:ViaService`), and the event source mappings receive, delete and read
/// the queues' attributes for the processor and the alarm function.
pub const NOT_CALLED_BY_CODE: [&str; 7] = [
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "kms:Decrypt",
    "kms:GenerateDataKey",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
];

/// Each role's allowed actions, every conditional statement included (as deployed with every option set).
pub fn granted() -> BTreeMap<&'static str, BTreeSet<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/template.yaml");
    let doc = YamlLoader::load_from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .remove(0);
    FUNCTIONS
        .iter()
        .map(|(function, role)| {
            let mut actions = BTreeSet::new();
            for policy in doc["Resources"][*role]["Properties"]["Policies"]
                .as_vec()
                .unwrap()
            {
                for statement in policy["PolicyDocument"]["Statement"].as_vec().unwrap() {
                    // `!If [condition, statement, !Ref AWS::NoValue]` loads as that list.
                    let statements: Vec<&Yaml> = match statement {
                        Yaml::Array(branches) => branches.iter().filter(|b| b.as_hash().is_some()).collect(),
                        one => vec![one],
                    };
                    for s in statements {
                        assert_eq!(s["Effect"].as_str(), Some("Allow"), "{role}");
                        match &s["Action"] {
                            Yaml::String(a) => {
                                actions.insert(a.clone());
                            }
                            Yaml::Array(list) => {
                                actions.extend(list.iter().map(|a| a.as_str().unwrap().to_owned()));
                            }
                            other => panic!("{role}: Action {other:?}"),
                        }
                    }
                }
            }
            (*function, actions)
        })
        .collect()
}

/// The IAM actions behind `calls` (`"dynamodb.PutItem" → 2`).
pub fn actions_of(calls: &HashMap<String, usize>) -> BTreeSet<String> {
    calls
        .keys()
        .flat_map(|call| {
            let (service, op) = call.split_once('.').unwrap();
            match (service, op.strip_prefix("TransactWriteItems")) {
                ("dynamodb", Some("")) => vec![], // authorised by its parts
                ("dynamodb", Some(part)) => vec![format!(
                    "dynamodb:{}",
                    match part.trim_start_matches('.') {
                        "ConditionCheck" => "ConditionCheckItem".to_owned(),
                        p => format!("{p}Item"),
                    }
                )],
                // A copy reads its source and writes its destination, and one that sets tags (the tagging
                // directive REPLACE) needs the right to tag it:
                // https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html
                ("s3", _) if op == "CopyObject" => vec![
                    "s3:GetObject".to_owned(),
                    "s3:PutObject".to_owned(),
                    "s3:PutObjectTagging".to_owned(),
                ],
                // Every body is put with its tag in the same request, which needs the right to tag too:
                // https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html
                ("s3", _) if op == "PutObject" => {
                    vec!["s3:PutObject".to_owned(), "s3:PutObjectTagging".to_owned()]
                }
                _ => vec![format!("{service}:{op}")],
            }
        })
        .collect()
}
