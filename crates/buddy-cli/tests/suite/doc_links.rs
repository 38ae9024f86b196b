//! Every relative link of the README and the book (`docs/**/*.md`) reaches a file, and
//! every `#anchor` a heading of its page, as GitHub draws them. External links
//! (`https://…`, `mailto:`) are not fetched: tests never reach the internet.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The anchor GitHub gives a heading: its text without Markdown links' targets and code
/// marks, lower-cased, with every character that is not a letter, a digit, `-`, `_` or
/// a space dropped and each space made a `-`.
fn anchor_of(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[label](target)` reads as its label.
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a page outside its fenced code blocks, with their numbers.
fn prose(page: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    page.lines().enumerate().filter_map(move |(n, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((n + 1, line))
    })
}

/// The anchors of a page's headings; a repeated heading gets `-1`, `-2`, … as on GitHub.
fn anchors(page: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    prose(page)
        .filter_map(|(_, line)| {
            let hashes = line.chars().take_while(|&c| c == '#').count();
            let text = line.get(hashes..)?.strip_prefix(' ')?;
            (1..=6).contains(&hashes).then(|| anchor_of(text))
        })
        .map(|anchor| {
            let n = seen.entry(anchor.clone()).or_default();
            *n += 1;
            if *n == 1 {
                anchor
            } else {
                format!("{anchor}-{}", *n - 1)
            }
        })
        .collect()
}

/// The targets of a line's Markdown links and images (`[label](target)`), inline code
/// left out.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 1 {
            continue; // inside `code`
        }
        let mut rest = part;
        while let Some(at) = rest.find("](") {
            let target = &rest[at + 2..];
            let end = target.find([')', ' ']).unwrap_or(target.len());
            out.push(&target[..end]);
            rest = &target[end..];
        }
    }
    out
}

/// `base` joined with a relative `path`, `.` and `..` resolved without touching the disk.
fn join(base: &Path, path: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for part in base.join(path).components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken link of `pages` (path from `root`, text), as `page:line: what`.
fn broken_links(root: &Path, pages: &[(String, String)]) -> Vec<String> {
    let mut broken = Vec::new();
    for (page, text) in pages {
        let here = join(root, page);
        let dir = here.parent().unwrap_or(root);
        for (n, line) in prose(text) {
            for target in link_targets(line) {
                if target.contains(':') {
                    continue; // https://…, mailto:…: not fetched
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                if path.is_empty() {
                    // An anchor of this page: its own text, as read.
                    if !anchors(text).iter().any(|a| a == anchor) {
                        broken.push(format!("{page}:{n}: `{target}`: no heading #{anchor}"));
                    }
                    continue;
                }
                let file = join(dir, path);
                if !file.exists() {
                    broken.push(format!("{page}:{n}: `{target}`: no such file"));
                    continue;
                }
                if anchor.is_empty() || file.extension().is_none_or(|e| e != "md") {
                    continue;
                }
                let target_text = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == anchor) {
                    broken.push(format!("{page}:{n}: `{target}`: no heading #{anchor}"));
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_of_the_readme_and_the_book_resolves() {
    let pages = super::readme::documentation();
    assert!(pages.len() >= 30, "only {} pages", pages.len());
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let links: usize = pages
        .iter()
        .map(|(_, text)| {
            prose(text)
                .map(|(_, l)| link_targets(l).len())
                .sum::<usize>()
        })
        .sum();
    assert!(
        links >= 200,
        "only {links} links found: is the link parser blind?"
    );
    let broken = broken_links(root, &pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_missing_file_a_missing_heading_and_a_link_out_of_the_tree_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs/guide")).unwrap();
    std::fs::write(
        dir.path().join("docs/guide/page.md"),
        "# A page\n\n## How a turn ends: `buddy run`\n\n## Notes\n\n## Notes\n",
    )
    .unwrap();
    let readme = "# buddy\n\
        [ok](docs/guide/page.md) [ok](docs/guide/page.md#how-a-turn-ends-buddy-run)\n\
        [ok](docs/guide/page.md#notes-1) [ok](#buddy) [ok](https://example.com/x#y)\n\
        `[not a link](nowhere.md)`\n\
        ```sh\n[not a link](nowhere.md)\n```\n\
        [gone](docs/guide/gone.md) [no heading](docs/guide/page.md#notes-2)\n\
        [no heading here](#nothing) [outside](../../elsewhere.md)\n";
    let pages = vec![
        ("README.md".to_owned(), readme.to_owned()),
        (
            "docs/guide/page.md".to_owned(),
            std::fs::read_to_string(dir.path().join("docs/guide/page.md")).unwrap(),
        ),
    ];
    let broken = broken_links(dir.path(), &pages);
    assert_eq!(
        broken,
        [
            "README.md:8: `docs/guide/gone.md`: no such file",
            "README.md:8: `docs/guide/page.md#notes-2`: no heading #notes-2",
            "README.md:9: `#nothing`: no heading #nothing",
            "README.md:9: `../../elsewhere.md`: no such file",
        ]
    );
}

#[test]
fn anchors_are_drawn_as_github_draws_them() {
    assert_eq!(anchor_of("`buddy.toml`"), "buddytoml");
    assert_eq!(
        anchor_of("JSON output (`buddy run --json`)"),
        "json-output-buddy-run---json"
    );
    assert_eq!(
        anchor_of("Approvals: tool calls that wait for a yes"),
        "approvals-tool-calls-that-wait-for-a-yes"
    );
    assert_eq!(
        anchor_of("A model server's own loop guard"),
        "a-model-servers-own-loop-guard"
    );
    assert_eq!(anchor_of("[`[[mcp]]`](mcp.md) entries"), "mcp-entries");
    assert_eq!(anchor_of("Über_alles"), "über_alles");
    assert_eq!(
        anchors("# A\n## A\n```\n# not a heading\n```\n#nospace\n## A"),
        ["a", "a-1", "a-2"]
    );
}
