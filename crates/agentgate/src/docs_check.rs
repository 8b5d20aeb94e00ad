//! The docs, checked like code (tests only): README.md, every page under
//! docs/ and the crates' READMEs.
//!
//! - Every ```` ```toml ```` block is a config file that this binary accepts:
//!   the same load as `--config` ([`FileConfig::load`]: our tables, each
//!   backend's table, `[limits]`), then `[auth]` and `[server]`'s connection
//!   bounds as `serve` checks them. A typo in an example fails the test.
//! - Every code fence names its language, one rustdoc does not compile
//!   (rustdoc compiles an unnamed fence as Rust; the pages are crate docs).
//! - Every relative link points at a file that exists, and a `#anchor` at a
//!   heading of the page it names (GitHub's anchor rules).
//!
//! Rust blocks are not handled here: the pages are included in crate docs
//! (`agentgate_core::docs`, `agentgate_backend::guide`,
//! `agentgate_testkit::guide`), so `cargo test --doc` compiles them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::config::FileConfig;

/// Languages a fence may name: Rust (compiled by rustdoc) and the ones
/// rustdoc leaves alone.
const LANGUAGES: &[&str] = &["rust", "text", "sh", "toml", "json", "mermaid", "nginx"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// The pages checked: README.md, docs/**/*.md and crates/*/README.md.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read docs/") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    for entry in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let readme = entry.expect("a crates/ entry").path().join("README.md");
        if readme.is_file() {
            pages.push(readme);
        }
    }
    pages.sort();
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A fenced code block.
#[derive(Debug)]
struct Fence {
    /// The info string after the backticks, e.g. `rust,no_run`.
    info: String,
    /// Its lines, without the fence's own indentation.
    body: String,
    /// 1-based line of the opening fence.
    line: usize,
}

/// The page's fenced blocks, and its other lines (prose, numbered) outside
/// them.
fn split(text: &str) -> (Vec<Fence>, Vec<(usize, &str)>) {
    let mut fences = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<(usize, String, usize, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None if trimmed.starts_with("```") => {
                let info = trimmed.trim_start_matches('`').trim().to_owned();
                open = Some((i + 1, info, indent, Vec::new()));
            }
            None => prose.push((i + 1, line)),
            Some((start, info, _, body)) if trimmed.starts_with("```") => {
                let body = body.join("\n");
                fences.push(Fence {
                    info,
                    body,
                    line: start,
                });
            }
            Some((start, info, fence_indent, mut body)) => {
                let cut = line
                    .char_indices()
                    .take_while(|&(at, c)| at < fence_indent && c == ' ')
                    .count();
                body.push(&line[cut..]);
                open = Some((start, info, fence_indent, body));
            }
        }
    }
    assert!(open.is_none(), "a code fence is never closed");
    (fences, prose)
}

/// Loads `toml` exactly as `agentgate --config FILE serve` does before
/// anything starts.
fn check_config(toml: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("agentgate.toml");
    std::fs::write(&path, toml)?;
    let config = FileConfig::load(&path)?;
    agentgate_core::auth::Authenticator::from_config(
        &config.auth,
        "http://127.0.0.1:8722/mcp",
        // `token_env` variables: any set value will do.
        |_| Some("a-token-from-the-environment".to_owned()),
    )?;
    crate::serve::connection_limits(&config.server)?;
    Ok(())
}

/// `toml` with its first `key = value` line's key misspelt, if it has one.
fn with_typo(toml: &str) -> Option<String> {
    let lines: Vec<&str> = toml.lines().collect();
    let at = lines.iter().position(|line| {
        let line = line.trim_start();
        !line.starts_with('#') && !line.starts_with('[') && line.contains('=')
    })?;
    let mut changed: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let (key, rest) = changed[at].split_once('=')?;
    changed[at] = format!("{}_typo ={rest}", key.trim_end());
    Some(changed.join("\n"))
}

#[test]
fn every_toml_example_is_a_config_agentgate_accepts_and_a_typo_in_it_is_refused() {
    let root = repo_root();
    let mut checked = Vec::new();
    let mut problems = Vec::new();
    for page in pages(&root) {
        let (fences, _) = split(&read(&page));
        for fence in fences.iter().filter(|f| f.info == "toml") {
            let place = format!("{}:{}", shown(&root, &page), fence.line);
            if let Err(e) = check_config(&fence.body) {
                problems.push(format!("{place}: not a config agentgate accepts: {e:#}"));
            }
            match with_typo(&fence.body) {
                Some(typo) if check_config(&typo).is_ok() => problems.push(format!(
                    "{place}: still accepted with its first key misspelt, so this test could \
                     not catch a typo in it:\n{typo}"
                )),
                Some(_) => {}
                None => problems.push(format!("{place}: a toml block without a key")),
            }
            checked.push(place);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    // The pages that hold config examples are among those read.
    for page in [
        "docs/operations.md",
        "docs/backends/copilot.md",
        "docs/backends/a2a.md",
    ] {
        assert!(
            checked.iter().any(|place| place.starts_with(page)),
            "no toml block checked in {page}; checked: {checked:?}"
        );
    }
}

#[test]
fn every_code_fence_names_a_language_rustdoc_handles() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut fences_seen = 0;
    for page in pages(&root) {
        let (fences, _) = split(&read(&page));
        for fence in fences {
            fences_seen += 1;
            // `rust,no_run` and the like: the language is the first word.
            let language = fence.info.split([',', ' ']).next().unwrap_or_default();
            if !LANGUAGES.contains(&language) {
                problems.push(format!(
                    "{}:{}: a fence marked `{}`; name one of {LANGUAGES:?} (rustdoc compiles an \
                     unnamed fence as Rust)",
                    shown(&root, &page),
                    fence.line,
                    fence.info
                ));
            }
        }
    }
    assert!(fences_seen > 20, "only {fences_seen} fences found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The anchors GitHub gives a page's headings: the heading's text without
/// markup, lower-cased, only letters, digits, `-`, `_` and spaces kept,
/// spaces made `-`; a repeated anchor gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let (_, prose) = split(text);
    let mut seen = BTreeSet::new();
    for (_, line) in prose {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let text = link_texts(heading.trim());
        let base: String = text
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// `[text](target)` replaced by `text`.
fn link_texts(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").and_then(|mid| {
            let close = after[mid..].find(')')? + mid;
            Some((mid, close))
        }) {
            Some((mid, close)) => {
                out.push_str(&after[..mid]);
                rest = &after[close + 1..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the inline links `[text](target)` on a line, outside
/// inline code.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut outside = String::new();
    for (i, part) in line.split('`').enumerate() {
        // Even parts are outside backticks.
        if i % 2 == 0 {
            outside.push_str(part);
        }
        outside.push(' ');
    }
    let mut rest = outside.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find([')', ' ']).unwrap_or(after.len());
        targets.push(after[..end].to_owned());
        rest = &after[end..];
    }
    targets
}

#[test]
fn every_relative_link_points_at_a_file_and_heading_that_exist() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut relative = 0;
    for page in pages(&root) {
        let text = read(&page);
        let (_, prose) = split(&text);
        for (line_no, line) in prose {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                relative += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let place = format!("{}:{line_no}", shown(&root, &page));
                let resolved = if file.is_empty() {
                    page.clone()
                } else {
                    page.parent().expect("a page's folder").join(file)
                };
                if !resolved.exists() {
                    problems.push(format!("{place}: `{target}`: {file} does not exist"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    if resolved.extension().is_none_or(|e| e != "md") {
                        problems.push(format!("{place}: `{target}`: an anchor into a non-page"));
                    } else if !anchors(&read(&resolved)).contains(anchor) {
                        problems.push(format!(
                            "{place}: `{target}`: no heading with anchor `#{anchor}` there"
                        ));
                    }
                }
            }
        }
    }
    assert!(relative > 50, "only {relative} relative links found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    let page = "# Amazon Q Business: `QBusinessQueryTool`\n\
                ## Task status push (`subscriptions/listen`)\n\
                ```sh\n# not a heading\n```\n\
                ## What `assign_copilot_to_issue` does\n\
                ## How \"finished\" is detected\n\
                ## [Linked](x.md) title\n\
                ## Notes\n## Notes\n";
    let got: Vec<String> = anchors(page).into_iter().collect();
    assert_eq!(
        got,
        [
            "amazon-q-business-qbusinessquerytool",
            "how-finished-is-detected",
            "linked-title",
            "notes",
            "notes-1",
            "task-status-push-subscriptionslisten",
            "what-assign_copilot_to_issue-does",
        ]
    );
    assert_eq!(
        link_targets("see [a](a.md#x), `[not](a link)` and [b](../b.md)"),
        ["a.md#x", "../b.md"]
    );
    let typo = with_typo("# comment\n[server]\nlisten = \"x\"\n").expect("a key");
    assert!(typo.contains("listen_typo = \"x\""), "{typo}");
}
