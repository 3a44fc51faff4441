//! `docs/cli.md`'s reference is the `-h` output of every command of this
//! binary, with the options every API client shares left out (the page
//! says which), each followed by the page's own notes on it, if any. A
//! command added, removed or changed without the page fails here;
//! `VRHOST_BLESS=1 cargo test -p vrhost --test cli_doc` rewrites the
//! reference from the binary (keeping the notes).

use std::path::Path;
use std::process::Command;

/// The `-h` output of `vrhost WORDS`.
fn help(words: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(words)
        .arg("-h")
        .env_remove("VRHOST_API")
        .env_remove("VRHOST_TOKEN")
        .output()
        .expect("run vrhost -h");
    assert!(out.status.success(), "vrhost {words:?} -h failed");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

/// The subcommands a help text lists (without `help`).
fn subcommands(h: &str) -> Vec<String> {
    let Some(list) = h.split("\nCommands:\n").nth(1) else {
        return vec![];
    };
    list.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// Every leaf command under `words`, in the order the help lists them.
fn leaves(words: Vec<String>, out: &mut Vec<Vec<String>>) {
    let subs = subcommands(&help(&words));
    if subs.is_empty() {
        out.push(words);
        return;
    }
    for s in subs {
        let mut w = words.clone();
        w.push(s);
        leaves(w, out);
    }
}

/// Options every API client shares, and `-h` itself.
const SHARED: [&str; 4] = [
    "--api <ADDR>",
    "--token <TOKEN>",
    "-o, --output ",
    "-h, --help",
];

/// The help's usage part without the shared options (and their
/// continuation lines), and without an `Options:` heading left empty.
fn usage(h: &str) -> String {
    let body = &h[h.find("Usage:").expect("a usage line")..];
    let mut kept: Vec<&str> = Vec::new();
    let mut skipping = false;
    for l in body.lines() {
        let option = l.starts_with("  -") || l.starts_with("      --");
        if option {
            skipping = SHARED.iter().any(|s| l.trim_start().starts_with(s));
        } else if !l.starts_with("          ") {
            skipping = false;
        }
        if !skipping {
            kept.push(l);
        }
    }
    while kept.last().is_some_and(|l| l.trim().is_empty()) {
        kept.pop();
    }
    if kept.last() == Some(&"Options:") {
        kept.pop();
        while kept.last().is_some_and(|l| l.trim().is_empty()) {
            kept.pop();
        }
    }
    kept.join("\n")
}

fn heading(words: &[String]) -> String {
    format!("### `vrhost {}`", words.join(" "))
}

/// A command's section: heading, about line, usage, then `notes`.
fn section(words: &[String], notes: &str) -> String {
    let h = help(words);
    let about = h.split("\n\n").next().unwrap_or("").trim();
    let notes = match notes.trim() {
        "" => String::new(),
        n => format!("\n{n}\n"),
    };
    format!(
        "{}\n\n{about}\n\n```\n{}\n```\n{notes}",
        heading(words),
        usage(&h)
    )
}

/// The notes the page has after a command's usage block: the text from
/// the block's end to the next heading.
fn notes<'a>(reference: &'a str, words: &[String]) -> &'a str {
    let Some(at) = reference.find(&format!("{}\n", heading(words))) else {
        return "";
    };
    let rest = &reference[at..];
    let end = rest.find("\n### ").map_or(rest.len(), |e| e + 1);
    let rest = &rest[..end];
    match rest
        .find("```\n")
        .and_then(|a| rest[a + 4..].find("```\n").map(|b| a + 4 + b + 4))
    {
        Some(after) => &rest[after..],
        None => "",
    }
}

#[test]
fn the_reference_is_the_binarys_help() {
    let mut cmds = Vec::new();
    leaves(vec![], &mut cmds);
    assert!(cmds.len() > 20, "commands found: {cmds:?}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let page = std::fs::read_to_string(&path).expect("docs/cli.md");
    const HEAD: &str = "## Reference\n\n";
    let at = page.find(HEAD).expect("a Reference section") + HEAD.len();
    let reference: Vec<String> = (cmds.iter())
        .map(|w| section(w, notes(&page[at..], w)))
        .collect();
    let made = format!("{}{}", &page[..at], reference.join("\n"));
    if std::env::var_os("VRHOST_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write docs/cli.md");
    }
    let page = std::fs::read_to_string(&path).expect("docs/cli.md");
    if page != made {
        let old: Vec<&str> = page[at..].split("\n### ").collect();
        let new: Vec<&str> = made[at..].split("\n### ").collect();
        let differ: Vec<String> = new
            .iter()
            .filter(|s| !old.contains(s))
            .map(|s| s.lines().next().unwrap_or("").to_string())
            .collect();
        panic!(
            "docs/cli.md is out of date in {differ:?}: run VRHOST_BLESS=1 cargo test -p vrhost --test cli_doc"
        );
    }
}
