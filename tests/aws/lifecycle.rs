//! S3's side of body retention, for tests: the payload bucket's lifecycle rules as `infra/template.yaml` declares
//! them, and when S3 would expire an object under them. The emulator runs no lifecycle, so this follows AWS's
//! documentation (https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-expire-general-considerations.html):
//! an expiration in days counts from the object's creation time (a copy's is the copy's), rounded up to the next
//! midnight UTC; a rule applies to an object whose key starts with its prefix and that carries every tag of its
//! filter (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-filters.html).

use yaml_rust2::{Yaml, YamlLoader};

/// One enabled rule that expires current objects.
#[derive(Debug)]
pub struct Rule {
    pub id: String,
    prefix: String,
    tags: Vec<(String, String)>,
    days: i64,
}

const DAY_MS: i64 = 86_400_000;

/// The payload bucket's enabled rules with an `ExpirationInDays` (a parameter, `!Ref`, at its default).
pub fn of_the_template() -> Vec<Rule> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/template.yaml");
    let doc = YamlLoader::load_from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .remove(0);
    let rules = &doc["Resources"]["PayloadBucket"]["Properties"]["LifecycleConfiguration"]["Rules"];
    let Yaml::Array(rules) = rules else {
        panic!("the payload bucket has no lifecycle rules")
    };
    rules
        .iter()
        .filter(|r| r["Status"].as_str() == Some("Enabled"))
        .filter_map(|r| {
            let days = match &r["ExpirationInDays"] {
                Yaml::Integer(n) => *n,
                // `!Ref Name` loads as the parameter's name.
                Yaml::String(name) => doc["Parameters"][name.as_str()]["Default"].as_i64().unwrap(),
                Yaml::BadValue => return None,
                other => panic!("ExpirationInDays {other:?}"),
            };
            let tags = match &r["TagFilters"] {
                Yaml::Array(list) => list
                    .iter()
                    .map(|t| {
                        (
                            t["Key"].as_str().unwrap().to_owned(),
                            t["Value"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect(),
                _ => Vec::new(),
            };
            Some(Rule {
                id: r["Id"].as_str().unwrap_or("").to_owned(),
                prefix: r["Prefix"].as_str().unwrap_or("").to_owned(),
                tags,
                days,
            })
        })
        .collect()
}

/// When S3 expires the object `key` (created at `created_ms`, carrying `tags`) under `rules`: the earliest of the
/// rules that apply, or `None` when none does.
pub fn expiry(rules: &[Rule], key: &str, tags: &[(String, String)], created_ms: i64) -> Option<i64> {
    rules
        .iter()
        .filter(|r| key.starts_with(&r.prefix) && r.tags.iter().all(|t| tags.contains(t)))
        .map(|r| {
            let at = created_ms + r.days * DAY_MS;
            // Rounded up to the next midnight UTC (an exact midnight stays).
            at.div_euclid(DAY_MS) * DAY_MS + if at.rem_euclid(DAY_MS) == 0 { 0 } else { DAY_MS }
        })
        .min()
}

#[test]
fn an_expiry_is_counted_from_creation_and_rounded_up_to_midnight() {
    let rules = [Rule {
        id: "r".into(),
        prefix: "p/".into(),
        tags: vec![("k".into(), "v".into())],
        days: 2,
    }];
    let tagged = [("k".to_owned(), "v".to_owned())];
    // 1 January 2026, 10:00 UTC + 2 days → 4 January, 00:00 UTC.
    let created = 1_767_261_600_000;
    assert_eq!(expiry(&rules, "p/x", &tagged, created), Some(1_767_484_800_000));
    assert_eq!(expiry(&rules, "p/x", &[], created), None, "untagged");
    assert_eq!(expiry(&rules, "q/x", &tagged, created), None, "another prefix");
    assert_eq!(rules[0].id, "r");
}
