use super::*;

const STRIPE: &[u8] = br#"{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","amount_paid":2500,"currency":"eur","lines":{"data":[{"amount":2000},{"amount":500}]}}}}"#;

fn facts(body: &[u8]) -> Facts<'_> {
    Facts {
        body,
        headers: &[],
        event_type: Some("invoice.paid"),
        source: "stripe",
        provider: "stripe",
        received_at: 1_765_000_000_000,
    }
}

fn judge(filter: &str, body: &[u8]) -> Verdict {
    Filter::compile(filter).unwrap().explain(&facts(body))
}

#[test]
fn filters_read_the_type_the_body_and_the_source() {
    assert_eq!(
        judge(r#"event_type.startsWith("invoice.")"#, STRIPE),
        Verdict::Matched
    );
    assert_eq!(
        judge(r#"body.data.object.amount_paid > 1000"#, STRIPE),
        Verdict::Matched
    );
    assert_eq!(
        judge(
            r#"body.data.object.lines.data.exists(l, l.amount == 500)"#,
            STRIPE
        ),
        Verdict::Matched
    );
    assert_eq!(
        judge(r#"source == "stripe" && provider == "stripe""#, STRIPE),
        Verdict::Matched
    );
    assert_eq!(judge("received_at > 0", STRIPE), Verdict::Matched);
    assert_eq!(
        judge(r#"has(body.data.object.refunds)"#, STRIPE),
        Verdict::Filtered {
            clause: Some(r#"has(body.data.object.refunds)"#.into())
        }
    );
}

#[test]
fn a_filtered_event_names_its_first_false_clause() {
    let v = judge(
        r#"event_type.startsWith("invoice.") && body.data.object.currency == "usd" && body.data.object.amount_paid > 1"#,
        STRIPE,
    );
    assert_eq!(
        v,
        Verdict::Filtered {
            clause: Some(r#"body.data.object.currency == "usd""#.into())
        }
    );
}

#[test]
fn a_filter_that_fails_on_an_event_is_an_error_verdict_not_a_miss() {
    match judge("body.data.object.missing == 1", STRIPE) {
        Verdict::Error(e) => assert!(e.contains("missing"), "{e}"),
        other => panic!("expected an error verdict, got {other:?}"),
    }
    match judge("body.data.object.id", STRIPE) {
        Verdict::Error(e) => assert!(e.contains("not true or false"), "{e}"),
        other => panic!("expected an error verdict, got {other:?}"),
    }
    // A body that is not JSON is null: reading a field of it is an error, `body == null` is a verdict.
    assert!(matches!(judge("body.type == \"x\"", b"a=1"), Verdict::Error(_)));
    assert_eq!(judge("body == null", b"a=1"), Verdict::Matched);
}

#[test]
fn headers_are_read_by_lower_case_name() {
    let headers = vec![("X-GitHub-Event".to_owned(), "push".to_owned())];
    let f = Filter::compile(r#"headers["x-github-event"] == "push""#).unwrap();
    let mut facts = facts(b"{}");
    facts.headers = &headers;
    assert_eq!(f.judge(&facts), Verdict::Matched);
}

#[test]
fn a_filter_that_does_not_compile_says_where() {
    let e = Filter::compile("event_type.startsWith(\"a\") &&\n  body.x ==").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    let e = Filter::compile("event_type == \"a\" && bdy.x == 1").unwrap_err();
    assert_eq!((e.line, e.column), (1, 22), "{e}");
    assert!(e.message.contains("unknown name \"bdy\""), "{e}");
    assert!(Filter::compile("").is_err());
    assert!(Filter::compile(&"a".repeat(MAX_SOURCE_BYTES + 1)).is_err());
    // A comprehension's own variable is a name it may read.
    assert!(Filter::compile("body.items.all(i, i.ok)").is_ok());
}

/// A hostile body: a list of 300,000 small numbers (1.2 MB), and a filter that walks it twice over.
fn hostile() -> Vec<u8> {
    let mut b = br#"{"type":"x","items":["#.to_vec();
    for i in 0..300_000 {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"1");
    }
    b.extend_from_slice(b"]}");
    b
}

#[test]
fn a_filter_spends_at_most_its_budget_on_a_hostile_body() {
    let body = hostile();
    // Keeping 300,000 values to walk them is refused before a value is walked.
    match judge("body.items.exists(i, i == 2)", &body) {
        Verdict::Error(e) => assert!(e.contains("more than 20000 values"), "{e}"),
        other => panic!("expected too much kept, got {other:?}"),
    }
    // Within what may be kept, a walk of the list passes, and a walk of it once per value spends the budget.
    let items = vec!["1"; 2_000].join(",");
    let list = format!(r#"{{"type":"x","items":[{items}]}}"#);
    assert_eq!(
        judge("body.items.exists(i, i == 2)", list.as_bytes()),
        Verdict::Filtered {
            clause: Some("body.items.exists(i, i == 2)".into())
        }
    );
    match judge(
        "body.items.exists(i, body.items.exists(j, i == j + 5))",
        list.as_bytes(),
    ) {
        Verdict::Error(e) => assert!(e.contains("budget"), "{e}"),
        other => panic!("expected the budget spent, got {other:?}"),
    }
    // The same body, read where the filter only names its type: the items are skipped, never built.
    assert_eq!(judge(r#"body.type == "x""#, &body), Verdict::Matched);
}

#[test]
fn nothing_but_true_admits() {
    assert_eq!(judge("true", b""), Verdict::Matched);
    assert_eq!(
        judge("false", b""),
        Verdict::Filtered {
            clause: Some("false".into())
        }
    );
    assert!(matches!(judge("1", b""), Verdict::Error(_)));
}

#[test]
fn a_failure_says_why_without_a_value_of_the_body() {
    let body = br#"{"card":"4242-4242-4242-4242","n":0,"m":{"k":"v"}}"#;
    for filter in [
        "body.card + 1 > 0",
        "body.card > 1",
        "int(body.card) > 0",
        "10 / body.n > 1",
        "body.m[body.card] == 1",
        "[1][body.n + 5] == 1",
    ] {
        match judge(filter, body) {
            Verdict::Error(e) => assert!(!e.contains("4242") && !e.contains("\"v\""), "{filter}: {e}"),
            other => panic!("{filter}: expected an error, got {other:?}"),
        }
    }
    match judge("body.missing == 1", body) {
        Verdict::Error(e) => assert_eq!(e, "no such key: missing"),
        other => panic!("expected an error, got {other:?}"),
    }
}
