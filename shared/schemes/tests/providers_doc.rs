//! `docs/providers.md` against the schemes themselves, so that the page and the code cannot drift: every scheme
//! `Scheme::named` accepts has exactly one row, every row names a scheme that exists, and every row links a page
//! that the scheme's own source file cites in its header. Where a table says a provider's family or where its
//! vectors came from, that is checked too (`Scheme::family`, the vector's `made_by`), and so are the counts the page
//! gives. A provider added without a row, or a row whose link no longer matches the file, fails here. The type half
//! of each "id / type" cell, which routes filter on as `event_type`, is checked against what the scheme finds in its
//! vectors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use inbox_schemes::{Identified, Request, Scheme};

/// The crate's own directory; the page is two levels up, in the repository's `docs/`.
fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn page() -> String {
    let path = crate_dir().join("../../docs/providers.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The file that implements a scheme: the built-in ones directly in `src/`, a named provider in
/// `src/providers/<name with underscores>.rs`.
fn source_file(name: &str) -> PathBuf {
    let src = crate_dir().join("src");
    match name {
        "github" => src.join("github.rs"),
        "stripe" => src.join("stripe.rs"),
        "shopify" => src.join("shopify.rs"),
        "slack" => src.join("slack.rs"),
        "standard-webhooks" | "svix" => src.join("standard.rs"),
        _ => src
            .join("providers")
            .join(format!("{}.rs", name.replace('-', "_"))),
    }
}

/// The URLs a source file cites in its header doc comment (`//! <https://…>`), where each file says whose
/// documentation it follows.
fn cited_urls(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut urls = Vec::new();
    for line in text.lines().take_while(|l| l.starts_with("//!")) {
        let mut rest = line;
        while let Some(start) = rest.find("<http") {
            let tail = &rest[start + 1..];
            let Some(end) = tail.find('>') else { break };
            urls.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    urls
}

/// One table row of the page: its line number, and its cells by the header's column names.
struct Row {
    line: usize,
    cells: BTreeMap<String, String>,
    first: String,
}

/// The cells of a Markdown table line; `\|` is a literal bar inside a cell.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => out.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_owned());
    out
}

/// The rows of every table whose first column is `scheme` or `provider`.
fn scheme_rows(page: &str) -> Vec<Row> {
    let lines: Vec<&str> = page.lines().collect();
    let mut rows = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let is_table = lines[i].starts_with('|') && lines[i + 1].starts_with("| ---");
        if !is_table {
            i += 1;
            continue;
        }
        let header = cells(lines[i]);
        let wanted = matches!(header[0].as_str(), "scheme" | "provider");
        i += 2;
        while i < lines.len() && lines[i].starts_with('|') {
            if wanted {
                let values = cells(lines[i]);
                assert_eq!(
                    values.len(),
                    header.len(),
                    "docs/providers.md:{}: {} cells under a header of {}",
                    i + 1,
                    values.len(),
                    header.len()
                );
                rows.push(Row {
                    line: i + 1,
                    first: values[0].clone(),
                    cells: header.iter().cloned().zip(values).collect(),
                });
            }
            i += 1;
        }
    }
    rows
}

/// The `[`name`](url)` links a row's first cell is made of. Anything else in the cell (a name without its link)
/// fails: every scheme named there must link its documentation.
fn links(row: &Row) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = row.first.as_str();
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.is_empty() {
            return out;
        }
        let parsed = rest.strip_prefix("[`").and_then(|r| {
            let (name, r) = r.split_once("`](")?;
            let (url, r) = r.split_once(')')?;
            Some((name, url, r))
        });
        let Some((name, url, r)) = parsed else {
            panic!(
                "docs/providers.md:{}: the first cell must be [`scheme`](documentation URL) links, found {:?}",
                row.line, row.first
            );
        };
        out.push((name.to_owned(), url.to_owned()));
        rest = r;
    }
}

/// The number written just before `marker` in the page (whitespace folded), e.g. "81" in "81 named providers".
fn number_before(text: &str, marker: &str) -> usize {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("docs/providers.md no longer says {marker:?}"));
    let digits: String = text[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number before {marker:?}"))
}

/// Where a provider's vectors came from: `sdk` or `docs`, as its vector file says.
fn made_by(name: &str) -> String {
    let path = crate_dir().join("tests/vectors").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vector: serde_json::Value = serde_json::from_str(&text).unwrap();
    vector["made_by"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no made_by", path.display()))
        .to_owned()
}

#[test]
fn every_scheme_has_one_row_that_links_its_own_documentation() {
    let page = page();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for row in scheme_rows(&page) {
        for (name, url) in links(&row) {
            if let Some(first) = seen.insert(name.clone(), row.line) {
                failures.push(format!(
                    "line {}: `{name}` already has a row, at line {first}",
                    row.line
                ));
            }
            let Some(scheme) = Scheme::named(&name) else {
                failures.push(format!(
                    "line {}: `{name}` is not a scheme `Scheme::named` accepts",
                    row.line
                ));
                continue;
            };
            let file = source_file(&name);
            if !file.exists() {
                failures.push(format!(
                    "line {}: `{name}` has no source file at {}",
                    row.line,
                    file.display()
                ));
                continue;
            }
            let cited = cited_urls(&file);
            if !cited.contains(&url) {
                failures.push(format!(
                    "line {}: `{name}` links {url}, which {} does not cite (it cites {cited:?})",
                    row.line,
                    file.display()
                ));
            }
            if let Some(family) = row.cells.get("family") {
                let written = family.split([' ', '(']).next().unwrap_or_default();
                if written != scheme.family() {
                    failures.push(format!(
                        "line {}: `{name}`'s family is {:?}, the table says {written:?}",
                        row.line,
                        scheme.family()
                    ));
                }
            }
            if let Some(vector) = row.cells.get("vector") {
                let from_sdk = vector.starts_with("SDK");
                let made = made_by(&name);
                if from_sdk != (made == "sdk") || (!from_sdk && vector != "docs") {
                    failures.push(format!(
                        "line {}: `{name}`'s vector is made by {made:?}, the table says {vector:?}",
                        row.line
                    ));
                }
            }
        }
    }
    for name in Scheme::names() {
        if !seen.contains_key(name) {
            failures.push(format!("`{name}` is a scheme with no row"));
        }
    }
    assert!(failures.is_empty(), "docs/providers.md:\n{}", failures.join("\n"));
}

#[test]
fn the_counts_on_the_page_are_the_schemes_counts() {
    let page = page().split_whitespace().collect::<Vec<_>>().join(" ");
    let named = inbox_schemes::providers::NAMES;
    assert_eq!(number_before(&page, "named providers beside"), named.len());
    let sdk = named.iter().filter(|name| made_by(name) == "sdk").count();
    assert_eq!(number_before(&page, "made by the provider's own SDK**"), sdk);
    assert_eq!(
        number_before(&page, "from the provider's documentation**"),
        named.len() - sdk
    );
}

/// The providers whose type no header or field names: each is found by a rule of its own, which the row says in words.
/// Only that they yield a type is checked here; `tests/vectors.rs` checks each vector's type itself.
const DESCRIBED: &[&str] = &[
    "braintree", // the `<kind>` of the base64 XML in the form field `bt_payload`
    "discord",   // by what the body is: an interaction's numeric `type`, a webhook event's `event.type`
    "intuit",    // by the body's shape: a CloudEvent's `type`, a legacy entity's `{name}.{operation}`
    "meta",      // `messaging` for a Messenger entry, which has no `changes[0].field`
    "telegram",  // the Update's one key beside `update_id`
    "twitch",    // `revocation` by the message type header, whatever the subscription
    "x",         // the body's top-level key that holds the events
];

/// One value the type half of an "id / type" cell is made of.
#[derive(Debug)]
enum Piece {
    /// Text written between the values of a composition (`{a}.{b}`).
    Text(String),
    /// A header's value (`` header `Name` ``, or `{header Name}` in a composition).
    Header(String),
    /// A JSON pointer into the event, from a path `a.b[0].c`: a string, or a number as text.
    Field(String),
}

/// What the type half of an "id / type" cell says the type is.
enum TypeHalf {
    None,
    Described,
    /// The first of these that is there; each is its pieces joined, there only when every piece is.
    First(Vec<Vec<Piece>>),
}

/// `a.b[0].c` as the JSON pointer `/a/b/0/c`; anything else is not a path.
fn pointer(path: &str) -> Result<String, String> {
    let mut out = String::new();
    for segment in path.split('.') {
        let (name, indexes) = segment.split_once('[').map_or((segment, ""), |(n, i)| (n, i));
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !plain(name) {
            return Err(format!("{path:?} is not a field path (`a.b[0].c`)"));
        }
        out.push('/');
        out.push_str(name);
        for index in indexes.split('[') {
            match index.strip_suffix(']') {
                Some(i) if !i.is_empty() && i.chars().all(|c| c.is_ascii_digit()) => {
                    out.push('/');
                    out.push_str(i);
                }
                _ if indexes.is_empty() => {}
                _ => return Err(format!("{path:?} is not a field path (`a.b[0].c`)")),
            }
        }
    }
    Ok(out)
}

/// One alternative of a type half: header `Name`, (body) `a.b`, or `{a}.{header Name}`.
fn alternative(text: &str) -> Result<Vec<Piece>, String> {
    if let Some(name) = text.strip_prefix("header `").and_then(|t| t.strip_suffix('`')) {
        return Ok(vec![Piece::Header(name.to_ascii_lowercase())]);
    }
    let code = text
        .strip_prefix("body ")
        .unwrap_or(text)
        .strip_prefix('`')
        .and_then(|t| t.strip_suffix('`'))
        .filter(|c| !c.contains('`'))
        .ok_or_else(|| format!("{text:?} is none of header `Name`, `a.b`, `{{a}}.{{b}}`"))?;
    if !code.contains('{') {
        return Ok(vec![Piece::Field(pointer(code)?)]);
    }
    let mut pieces = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find('{') {
        if start > 0 {
            pieces.push(Piece::Text(rest[..start].to_owned()));
        }
        let (inner, after) = rest[start + 1..]
            .split_once('}')
            .ok_or_else(|| format!("{code:?}: a `{{` without its `}}`"))?;
        pieces.push(match inner.strip_prefix("header ") {
            Some(name) => Piece::Header(name.to_ascii_lowercase()),
            None => Piece::Field(pointer(inner)?),
        });
        rest = after;
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_owned()));
    }
    Ok(pieces)
}

/// The type half of an "id / type" cell, without a closing remark in parentheses.
fn type_half(cell: &str, described: bool) -> Result<TypeHalf, String> {
    let halves: Vec<&str> = cell.split(" / ").collect();
    let [_, half] = halves[..] else {
        return Err(format!("{cell:?} is not one `id / type`"));
    };
    let mut half = half.trim();
    if half.ends_with(')') {
        let mut depth = 0;
        for (at, c) in half.char_indices().rev() {
            depth += match c {
                ')' => 1,
                '(' => -1,
                _ => 0,
            };
            if depth == 0 {
                half = half[..at].trim_end();
                break;
            }
        }
    }
    if half == "none" {
        return Ok(TypeHalf::None);
    }
    if described {
        return Ok(TypeHalf::Described);
    }
    half.split(", else ")
        .map(alternative)
        .collect::<Result<_, _>>()
        .map(TypeHalf::First)
}

/// The type a rule finds in an event: the first alternative whose every piece is there.
fn first(
    alternatives: &[Vec<Piece>],
    headers: &HeaderMap,
    event: Option<&serde_json::Value>,
) -> Option<String> {
    let value = |piece: &Piece| match piece {
        Piece::Text(text) => Some(text.clone()),
        Piece::Header(name) => headers
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
        Piece::Field(pointer) => match event?.pointer(pointer)? {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        },
    };
    alternatives
        .iter()
        .find_map(|pieces| pieces.iter().map(value).collect::<Option<String>>())
}

/// The JSON of a delivery of one event: the body, or the one field of a form or multipart body that holds a JSON
/// object (Dropbox Sign's multipart `json`).
fn event_json(headers: &HeaderMap, body: &[u8]) -> Option<serde_json::Value> {
    if let Ok(value) = serde_json::from_slice(body) {
        return Some(value);
    }
    let text = String::from_utf8_lossy(body);
    let content_type = headers.get("content-type")?.to_str().ok()?;
    let fields: Vec<String> = match content_type.split_once("boundary=") {
        Some((_, boundary)) => text
            .split(&format!("--{}", boundary.trim_matches('"')))
            .filter_map(|part| part.split_once("\r\n\r\n").or_else(|| part.split_once("\n\n")))
            .map(|(_, content)| content.trim().to_owned())
            .collect(),
        None => {
            let uri = Uri::from_static("/");
            let fields = Request::post(&uri, headers, body).form_fields()?;
            fields.into_iter().map(|(_, value)| value).collect()
        }
    };
    let mut objects = fields
        .iter()
        .filter_map(|f| serde_json::from_str::<serde_json::Value>(f).ok())
        .filter(serde_json::Value::is_object);
    let one = objects.next();
    objects.next().is_none().then_some(one).flatten()
}

/// A delivery of a scheme's vectors that carries events (not a handshake).
struct Delivery {
    case: String,
    uri: Uri,
    headers: HeaderMap,
    body: Vec<u8>,
    now: i64,
}

/// The deliveries a scheme's vectors carry events in: a named provider's `tests/vectors/<name>.json` (its `event`
/// and `batch` cases), a built-in scheme's `tests/data/signatures.json` (its `accept` cases).
fn deliveries(name: &str) -> Vec<Delivery> {
    let read = |path: PathBuf| -> serde_json::Value {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let header_map = |pairs: Vec<(&str, &str)>| {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    };
    let named = crate_dir().join("tests/vectors").join(format!("{name}.json"));
    if !named.exists() {
        let file = read(crate_dir().join("tests/data/signatures.json"));
        return file["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["provider"] == name && c["expect"] == "accept")
            .map(|c| Delivery {
                case: c["name"].as_str().unwrap().to_owned(),
                uri: Uri::from_static("/"),
                headers: header_map(
                    c["headers"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(n, v)| (n.as_str(), v.as_str().unwrap()))
                        .collect(),
                ),
                body: c["body"].as_str().unwrap().as_bytes().to_vec(),
                now: c["now"].as_i64().unwrap(),
            })
            .collect();
    }
    let file = read(named);
    file["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["expect"]["kind"] == "event" || c["expect"]["kind"] == "batch")
        .map(|c| {
            use base64::Engine as _;
            let body = match (c["body"].as_str(), c["body_base64"].as_str()) {
                (_, Some(b64)) => base64::engine::general_purpose::STANDARD.decode(b64).unwrap(),
                (Some(text), None) => text.as_bytes().to_vec(),
                (None, None) => Vec::new(),
            };
            let url: Uri = c["url"].as_str().unwrap().parse().unwrap();
            Delivery {
                case: c["name"].as_str().unwrap().to_owned(),
                uri: url.path_and_query().map_or("/", |p| p.as_str()).parse().unwrap(),
                headers: header_map(
                    c["headers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|pair| (pair[0].as_str().unwrap(), pair[1].as_str().unwrap()))
                        .collect(),
                ),
                body,
                now: c["now"].as_i64().unwrap(),
            }
        })
        .collect()
}

/// The type half of every row is where the receiver finds the type, which a route's filter sees as `event_type`:
/// every event of the scheme's vectors, identified as the receiver identifies it, has the type the row names (the
/// header's value, the event's field, their composition; the first alternative there), or none where the row says
/// none. A row that names a type must yield one on some vector, and a row in words (`DESCRIBED`) on every event.
#[test]
fn every_type_half_is_where_the_receiver_finds_the_type() {
    let page = page();
    let mut failures = Vec::new();
    let (mut rows, mut checked) = (0, 0);
    for row in scheme_rows(&page) {
        let Some(cell) = row.cells.get("id / type").or(row.cells.get("event id / type")) else {
            continue;
        };
        for (name, _) in links(&row) {
            // A name that is no scheme fails `every_scheme_has_one_row_that_links_its_own_documentation`.
            let Some(scheme) = Scheme::named(&name) else {
                continue;
            };
            rows += 1;
            let at = format!("line {}: `{name}`", row.line);
            let rule = match type_half(cell, DESCRIBED.contains(&name.as_str())) {
                Ok(rule) => rule,
                Err(e) => {
                    failures.push(format!("{at}: the type half is not understood: {e}"));
                    continue;
                }
            };
            let (mut events, mut typed) = (0, 0);
            for d in deliveries(&name) {
                let req = Request {
                    received_ms: d.now * 1000,
                    ..Request::post(&d.uri, &d.headers, &d.body)
                };
                let found: Vec<(Option<String>, Option<serde_json::Value>)> =
                    match scheme.identify_request(&req) {
                        Ok(Identified::One(identity)) => {
                            vec![(identity.event_type, event_json(&d.headers, &d.body))]
                        }
                        Ok(Identified::Batch(items)) => items
                            .into_iter()
                            .map(|item| {
                                (
                                    item.identity.event_type,
                                    serde_json::from_slice(&item.payload).ok(),
                                )
                            })
                            .collect(),
                        Err(e) => {
                            failures.push(format!("{at}, vector {:?}: not identified: {e}", d.case));
                            continue;
                        }
                    };
                for (i, (found, event)) in found.into_iter().enumerate() {
                    events += 1;
                    checked += 1;
                    typed += usize::from(found.is_some());
                    let want = match &rule {
                        TypeHalf::None => None,
                        TypeHalf::Described if found.is_none() => Some("a type".to_owned()),
                        TypeHalf::Described => found.clone(),
                        TypeHalf::First(alternatives) => first(alternatives, &d.headers, event.as_ref()),
                    };
                    if want != found {
                        failures.push(format!(
                            "{at}, vector {:?} event {i}: the row's type half {:?} is {want:?} here, the receiver finds {found:?}",
                            d.case,
                            cell.split(" / ").nth(1).unwrap_or_default()
                        ));
                    }
                }
            }
            if events == 0 {
                failures.push(format!(
                    "{at}: no vector carries an event to check the type half on"
                ));
            } else if typed == 0 && !matches!(rule, TypeHalf::None) {
                failures.push(format!("{at}: the row names a type, but no vector yields one"));
            }
        }
    }
    println!("type halves checked: {rows} schemes, {checked} events");
    assert_eq!(rows, Scheme::names().len(), "a row for every scheme");
    assert!(failures.is_empty(), "docs/providers.md:\n{}", failures.join("\n"));
}
