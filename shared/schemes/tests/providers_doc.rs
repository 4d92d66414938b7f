//! `docs/providers.md` against the schemes themselves, so that the page and the code cannot drift: every scheme
//! `Scheme::named` accepts has exactly one row, every row names a scheme that exists, and every row links a page
//! that the scheme's own source file cites in its header. Where a table says a provider's family or where its
//! vectors came from, that is checked too (`Scheme::family`, the vector's `made_by`), and so are the counts the page
//! gives. A provider added without a row, or a row whose link no longer matches the file, fails here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use inbox_schemes::Scheme;

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
