//! The house's rules, read from the source as text (docs/architecture.md): data flows one
//! way, so a module imports only modules at its own stage or below, in the stage order
//! written once, in docs/architecture.md's `stages` block ([`stages`] reads it; lib.rs
//! declares its modules in that order); no two files of one folder use each other (a child may use its folder's `mod.rs`; a
//! `folder.rs` beside `folder/` may hand its children on, but not use one that uses it);
//! no file over
//! [`MAX_FILE_LINES`] lines besides its unit tests, no function over [`MAX_FN_LINES`], no
//! command handler over [`MAX_HANDLER_LINES`].
//!
//! Why a test and not a lint: the rules are ours, and a test fails on the commit that
//! breaks one, naming the file, the line and the import, in CI as on a laptop.
//!
//! What it reads: every `crate::`, `super::` and `self::` path, and every path through a
//! module a file declares (`child::x`), outside comments, string literals and
//! `#[cfg(test)]` items (unit tests may reach anywhere), grouped `use` trees expanded. A
//! test item is read as an item: its attribute, its body to the closing brace or its `;`
//! (a hand-written matcher on the code with comments and literals blanked, so a brace in
//! a string does not count; `syn` would parse items exactly, but without proc-macro2's
//! `span-locations`, which nothing here builds, it gives no line numbers), and a
//! `#[cfg(test)] mod x;` makes x's file a file of tests. An item of the crate's root
//! (`crate::VERSION`, `crate::Exit`) is `lib`'s, at the top stage. Nothing is compiled;
//! a path spelled another way (a macro building one) is not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The stage order, low to high, as docs/architecture.md writes it: a module may import
/// its own stage or lower ones. Read once per test run; a list the parser refuses fails
/// every check that reads it, naming the line.
fn stages() -> &'static [Vec<String>] {
    static STAGES: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
    STAGES.get_or_init(|| {
        let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
        let text = std::fs::read_to_string(&doc).unwrap();
        parse_stages(&text).unwrap_or_else(|e| panic!("{}: {e}", doc.display()))
    })
}

/// The stages of a document's one ```` ```stages ```` block: each line that starts with
/// a number is a stage, numbered from 0 in order, its modules (comma-separated) up to two
/// spaces, then what they hold; any other line goes on describing the stage above. A
/// module named twice, a number out of order, a name that is not a module's or a
/// missing or second block is refused.
fn parse_stages(doc: &str) -> Result<Vec<Vec<String>>, String> {
    let mut blocks = doc.split("\n```stages\n").skip(1);
    let block = blocks.next().ok_or("no ```stages block")?;
    if blocks.next().is_some() {
        return Err("two ```stages blocks".into());
    }
    let block = &block[..block.find("\n```").ok_or("the ```stages block does not end")?];
    let mut stages: Vec<Vec<String>> = Vec::new();
    let mut seen = BTreeSet::new();
    for line in block.lines() {
        let t = line.trim_start();
        let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            continue;
        }
        let n: usize = t[..digits].parse().map_err(|e| format!("{line:?}: {e}"))?;
        if n != stages.len() {
            return Err(format!("{line:?}: stage {n} where stage {} comes", stages.len()));
        }
        let rest = t[digits..].trim_start();
        let names = rest.find("  ").map_or(rest, |end| &rest[..end]);
        let mut stage = Vec::new();
        for name in names.split(',').map(str::trim) {
            let module = !name.is_empty()
                && name.starts_with(|c: char| c.is_ascii_lowercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !module {
                return Err(format!("{line:?}: {name:?} is not a module's name"));
            }
            if !seen.insert(name.to_string()) {
                return Err(format!("{line:?}: {name} has a stage already"));
            }
            stage.push(name.to_string());
        }
        stages.push(stage);
    }
    if stages.is_empty() {
        return Err("the ```stages block lists no stage".into());
    }
    Ok(stages)
}

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 120;
/// A command's handler (each function `run` in lib.rs dispatches to) reads validated
/// options and hands on.
const MAX_HANDLER_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The trace format's crate (crates/trace), held to the same sizes and folder rule; its
/// imports need no stage check, as Cargo refuses it any of ours.
const TRACE_CRATE: &str = "crates/trace";

/// Each source root with the prefix its findings are named under: src/, then the trace
/// crate's (a finding's "src/x.rs" there is "crates/trace/src/x.rs").
fn roots() -> Vec<(PathBuf, String)> {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join(TRACE_CRATE);
    vec![
        (src(), String::new()),
        (trace.join("src"), format!("{TRACE_CRATE}/")),
    ]
}

/// Every .rs file under `dir`, sorted, as paths relative to src/.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// `code` with the given byte ranges blanked, newlines kept.
fn blank_ranges(code: &str, ranges: &[std::ops::Range<usize>]) -> String {
    let mut b = code.as_bytes().to_vec();
    for r in ranges {
        for c in &mut b[r.clone()] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8(b).unwrap()
}

/// A file's text with comments and the contents of string and char literals blanked
/// (newlines kept, so line numbers hold; other bytes as Latin-1, so every byte is one
/// char and the result is ASCII where it matters).
fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut String, c: u8| out.push(if c == b'\n' { '\n' } else { ' ' });
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                i += 2;
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#')) && !ident_before(b, i) => {
                // A raw string: r"...", r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                out.push_str("\"\"");
                j += 1;
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                while j < b.len() && !b[j..].starts_with(&close) {
                    blank(&mut out, b[j]);
                    j += 1;
                }
                i = j + close.len();
            }
            b'"' => {
                out.push_str("\"\"");
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        blank(&mut out, b[i]);
                        i += 1;
                    }
                    if i < b.len() {
                        blank(&mut out, b[i]);
                    }
                    i += 1;
                }
                i += 1;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}', '"'), else a lifetime.
                if b.get(i + 1) == Some(&b'\\') {
                    let end = b[i + 2..].iter().position(|&c| c == b'\'').map(|p| i + 2 + p);
                    out.push_str("' '");
                    i = end.map(|e| e + 1).unwrap_or(b.len());
                } else if b.get(i + 2) == Some(&b'\'') {
                    out.push_str("' '");
                    i += 3;
                } else {
                    out.push('\'');
                    i += 1;
                }
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The `#[cfg(test)]` items of blanked code, read by item rather than by cutting the file
/// at its first test attribute (a `#[cfg(test)] mod testing;` near the top would hide
/// everything after it): each attribute's item runs to its body's closing brace, or to
/// its `;` (a `mod x;`, a `use`, a `const`), or to the `,` or closing bracket that ends
/// a field or an argument. Returns their byte ranges, attribute included, and the
/// modules declared without a body (`#[cfg(test)] mod testing;`: files of tests). An
/// inner `#![cfg(test)]` makes the whole file a test.
fn test_items(code: &str) -> (Vec<std::ops::Range<usize>>, Vec<String>) {
    let b = code.as_bytes();
    let (mut ranges, mut mods) = (Vec::new(), Vec::new());
    let mut i = 0;
    while let Some(p) = b[i..].iter().position(|&c| c == b'#').map(|p| p + i) {
        let Some((inner, end)) = attribute(b, p) else {
            i = p + 1;
            continue;
        };
        if !is_cfg_test(&code[p..end]) {
            i = end;
            continue;
        }
        if inner {
            return (std::iter::once(0..b.len()).collect(), mods);
        }
        let (item_end, declared) = item_end(b, end);
        if let Some(m) = declared {
            mods.push(m);
        }
        ranges.push(p..item_end);
        i = item_end.max(p + 1);
    }
    (ranges, mods)
}

/// An attribute starting at `p` (`#[...]` or `#![...]`): whether it is inner, and the
/// byte after its closing bracket.
fn attribute(b: &[u8], p: usize) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let inner = b.get(j) == Some(&b'!');
    if inner {
        j += 1;
    }
    while b.get(j).is_some_and(u8::is_ascii_whitespace) {
        j += 1;
    }
    if b.get(j) != Some(&b'[') {
        return None;
    }
    let mut depth = 0i32;
    while j < b.len() {
        match b[j] {
            b'[' | b'(' | b'{' => depth += 1,
            b']' | b')' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((inner, j + 1));
                }
            }
            _ => {}
        }
        j += 1;
    }
    None
}

/// `#[cfg(test)]`, spaced any way, or a `cfg(all(test, ...))`.
fn is_cfg_test(attr: &str) -> bool {
    let a: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    let a = a.replacen("#!", "#", 1);
    a == "#[cfg(test)]" || a.starts_with("#[cfg(all(test,")
}

/// Where the item that starts at `k` (after an attribute) ends, and the module it
/// declares when it is a `mod x;` without a body.
fn item_end(b: &[u8], mut k: usize) -> (usize, Option<String>) {
    // Further attributes belong to the same item.
    loop {
        while b.get(k).is_some_and(u8::is_ascii_whitespace) {
            k += 1;
        }
        match (b.get(k), attribute(b, k)) {
            (Some(b'#'), Some((false, e))) => k = e,
            _ => break,
        }
    }
    let words: Vec<&str> = std::str::from_utf8(&b[k..(k + 200).min(b.len())])
        .unwrap_or_default()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .take(6)
        .collect();
    let kw = words
        .iter()
        .find(|w| {
            !matches!(
                **w,
                "pub" | "crate" | "super" | "in" | "self" | "unsafe" | "async" | "extern"
            )
        })
        .copied()
        .unwrap_or_default();
    // Items whose braces are inside them (a use tree, a struct literal) end at their `;`.
    let to_semicolon = matches!(kw, "use" | "const" | "static" | "let" | "type");
    let mut depth = 0i32;
    let mut j = k;
    while j < b.len() {
        match b[j] {
            b'(' | b'[' => depth += 1,
            b'{' => {
                depth += 1;
            }
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth < 0 {
                    // The enclosing item's bracket: a field or an argument ended.
                    return (j, None);
                }
                if depth == 0 && b[j] == b'}' && !to_semicolon {
                    return (j + 1, None);
                }
            }
            b';' if depth == 0 => {
                let declared = (kw == "mod")
                    .then(|| {
                        words
                            .iter()
                            .skip_while(|w| **w != "mod")
                            .nth(1)
                            .map(|w| w.to_string())
                    })
                    .flatten();
                return (j + 1, declared);
            }
            b',' if depth == 0 => return (j, None),
            _ => {}
        }
        j += 1;
    }
    (b.len(), None)
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The paths a `use` tree or an expression path starting at `s` names, expanded:
/// `a::{b::C, d}` gives `a::b::C` and `a::d`.
fn expand(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &[u8], i: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        loop {
            while *i < s.len() && s[*i].is_ascii_whitespace() {
                *i += 1;
            }
            if s.get(*i) == Some(&b'{') {
                *i += 1;
                loop {
                    let depth = prefix.len();
                    tree(s, i, prefix, out);
                    prefix.truncate(depth);
                    while *i < s.len() && s[*i].is_ascii_whitespace() {
                        *i += 1;
                    }
                    match s.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    while *i < s.len() && s[*i].is_ascii_whitespace() {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&b'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            let start = *i;
            while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
                *i += 1;
            }
            if start == *i {
                out.push(prefix.clone());
                return;
            }
            prefix.push(String::from_utf8_lossy(&s[start..*i]).into_owned());
            if s[*i..].starts_with(b"::") {
                *i += 2;
                continue;
            }
            out.push(prefix.clone());
            return;
        }
    }
    let mut out = Vec::new();
    tree(s.as_bytes(), &mut 0, &mut Vec::new(), &mut out);
    out
}

/// The module path of a file: src/a/b.rs and src/a/b/mod.rs are `a::b`; lib.rs and
/// main.rs are the crate's root (`lib`, `main` for the stages).
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The file that defines the longest prefix of `path` (a module path), if any.
fn file_of(path: &[String], files: &BTreeSet<PathBuf>) -> Option<PathBuf> {
    for n in (1..=path.len()).rev() {
        let m = path[..n].join("/");
        for f in [format!("{m}.rs"), format!("{m}/mod.rs")] {
            if files.contains(Path::new(&f)) {
                return Some(PathBuf::from(f));
            }
        }
    }
    None
}

/// An import: the line it is on, the module path it names (from the crate's root), and
/// whether it is a `pub use` (a folder file's face: what it hands on, not what it uses).
struct Import {
    line: usize,
    path: Vec<String>,
    reexport: bool,
}

/// Whether the statement holding byte `at` of `code` is a `pub use`.
fn in_reexport(code: &str, at: usize) -> bool {
    let start = code[..at].rfind([';', '{', '}']).map_or(0, |i| i + 1);
    let mut stmt = code[start..at].trim_start();
    // Attributes before it (`#[doc(hidden)]`).
    while stmt.starts_with('#') {
        match stmt.find(']') {
            Some(e) => stmt = stmt[e + 1..].trim_start(),
            None => break,
        }
    }
    stmt.starts_with("pub") && stmt.split_whitespace().take(2).any(|w| w == "use")
}

/// The modules a file declares with `mod x;` (files of its folder).
fn declared_mods(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && ident_before(code.as_bytes(), at) {
            continue;
        }
        let rest = code[at + 4..].trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end > 0 && rest[end..].trim_start().starts_with(';') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// Every path a file's code names: `crate::`, `super::` and `self::` paths, and paths
/// through the modules it declares (`child::x`, as a folder's file names its files).
fn imports(file: &Path, code: &str) -> Vec<Import> {
    let here = module_of(file);
    let children = declared_mods(code);
    let mut kws: Vec<(String, Vec<String>)> =
        vec![("crate::".into(), Vec::new()), ("self::".into(), here.clone())];
    let mut parent = here.clone();
    parent.pop();
    kws.push(("super::".into(), parent));
    for c in &children {
        let mut m = here.clone();
        m.push(c.clone());
        kws.push((format!("{c}::"), m));
    }
    let mut out = Vec::new();
    for (n, line_start) in std::iter::once(0)
        .chain(code.match_indices('\n').map(|(i, _)| i + 1))
        .enumerate()
    {
        let line = &code[line_start..];
        let line = &line[..line.find('\n').unwrap_or(line.len())];
        for (kw, base) in &kws {
            for (at, _) in line.match_indices(kw.as_str()) {
                let b = line.as_bytes();
                if at > 0 && (b[at - 1].is_ascii_alphanumeric() || matches!(b[at - 1], b'_' | b':' | b'$')) {
                    continue;
                }
                // The rest of the statement may span lines (a grouped use).
                let rest = &code[line_start + at + kw.len()..];
                let end = rest.find(';').unwrap_or(rest.len()).min(rest.len());
                let mut base = base.clone();
                let mut tail = &rest[..end];
                // `super::super::x` climbs twice.
                if kw == "super::" {
                    while let Some(t) = tail.strip_prefix("super::") {
                        base.pop();
                        tail = t;
                    }
                }
                let reexport = in_reexport(code, line_start + at);
                for p in expand(tail) {
                    let mut full = base.clone();
                    full.extend(p);
                    if !full.is_empty() {
                        out.push(Import {
                            line: n + 1,
                            path: full,
                            reexport,
                        });
                    }
                }
            }
        }
    }
    out
}

fn stage_of(stages: &[Vec<String>], top: &str) -> Option<usize> {
    stages.iter().position(|s| s.iter().any(|m| m == top))
}

/// The top module of a module path: `load` for `load::threads::run`; an item of the
/// crate's root (`crate::Exit`, `crate::VERSION`, `crate::run`) is `lib`'s.
fn top(path: &[String], files: &BTreeSet<PathBuf>) -> String {
    match path.first() {
        Some(m)
            if files.contains(&PathBuf::from(format!("{m}.rs")))
                || files.contains(&PathBuf::from(format!("{m}/mod.rs"))) =>
        {
            m.clone()
        }
        _ => "lib".to_string(),
    }
}

/// The folder a file's declared modules live in: src/a/mod.rs's and src/a.rs's are src/a/.
fn children_dir(file: &Path) -> PathBuf {
    let name = file.file_name().unwrap().to_string_lossy();
    if matches!(name.as_ref(), "mod.rs" | "lib.rs" | "main.rs") {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    }
}

struct House {
    files: BTreeSet<PathBuf>,
    /// Each file's code without its test items; files of tests (declared by a
    /// `#[cfg(test)] mod x;`) are not here.
    code: BTreeMap<PathBuf, String>,
    text: BTreeMap<PathBuf, String>,
    /// Lines outside the test items, per file (files of tests left out).
    lines: BTreeMap<PathBuf, usize>,
    /// The crate root's files are one folder, lib.rs its index (a library such as the
    /// trace crate); in src/ each top-level file or folder is a stage's room of its own.
    flat: bool,
}

impl House {
    fn read(root: &Path) -> House {
        let files: BTreeSet<PathBuf> = sources(root).into_iter().collect();
        let mut text = BTreeMap::new();
        let mut blanked = BTreeMap::new();
        let mut tests: Vec<PathBuf> = Vec::new();
        let mut items = BTreeMap::new();
        for f in &files {
            let t = std::fs::read_to_string(root.join(f)).unwrap();
            let b = blank(&t);
            let (ranges, mods) = test_items(&b);
            for m in mods {
                tests.push(children_dir(f).join(m));
            }
            items.insert(f.clone(), ranges);
            blanked.insert(f.clone(), b);
            text.insert(f.clone(), t);
        }
        let is_test = |f: &Path| {
            tests
                .iter()
                .any(|t| f == t.with_extension("rs") || f.starts_with(t))
        };
        let mut code = BTreeMap::new();
        let mut lines = BTreeMap::new();
        for f in &files {
            if is_test(f) {
                continue;
            }
            let (b, ranges) = (&blanked[f], &items[f]);
            // The lines an item is on: its newlines and one.
            let in_tests: usize = ranges
                .iter()
                .map(|r| b[r.clone()].matches('\n').count() + 1)
                .sum();
            lines.insert(f.clone(), b.lines().count().saturating_sub(in_tests));
            code.insert(f.clone(), blank_ranges(b, ranges));
        }
        House {
            files,
            code,
            text,
            lines,
            flat: false,
        }
    }

    /// A library crate's house: its root's files are one folder ([`House::flat`]).
    fn read_library(root: &Path) -> House {
        House {
            flat: true,
            ..House::read(root)
        }
    }

    fn top_of_file(f: &Path) -> String {
        match module_of(f).first() {
            None => f.file_stem().unwrap().to_string_lossy().into_owned(),
            Some(m) => m.clone(),
        }
    }

    /// Imports that run up the stage order `stages`, as "file:line: a -> b (crate::b::...)".
    fn up_imports(&self, stages: &[Vec<String>]) -> Vec<String> {
        let mut out = Vec::new();
        for (f, code) in &self.code {
            let from = House::top_of_file(f);
            let Some(sf) = stage_of(stages, &from) else {
                out.push(format!(
                    "src/{}: module {from} has no stage in docs/architecture.md",
                    f.display()
                ));
                continue;
            };
            for i in imports(f, code) {
                let to = top(&i.path, &self.files);
                if to == from {
                    continue;
                }
                match stage_of(stages, &to) {
                    Some(st) if st > sf => out.push(format!(
                        "src/{}:{}: {from} (stage {sf}) imports {to} (stage {st}): crate::{}",
                        f.display(),
                        i.line,
                        i.path.join("::")
                    )),
                    Some(_) => {}
                    None => out.push(format!(
                        "src/{}:{}: {from} imports {to}, which has no stage in docs/architecture.md: crate::{}",
                        f.display(),
                        i.line,
                        i.path.join("::")
                    )),
                }
            }
        }
        out
    }

    /// Circles between files of one top folder, each as the files in it. A folder's
    /// `mod.rs` is left out: its children may use it and it names them (the folder's
    /// index, by Rust's convention). A `folder.rs` beside `folder/` is in them: it is a
    /// file of its own folder as much as its children's root, so when it uses a child
    /// (a path through a module it declares) that uses it, the two are a circle; handing
    /// a child on (`pub use child::X`) is not a use.
    fn circles(&self) -> Vec<Vec<PathBuf>> {
        let node = |f: &Path| {
            !module_of(f).is_empty()
                && f.file_name()
                    .is_some_and(|n| n != "mod.rs" && !(self.flat && n == "lib.rs"))
        };
        let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (f, code) in &self.code {
            if !node(f) {
                continue;
            }
            for i in imports(f, code) {
                if i.reexport {
                    continue;
                }
                let Some(to) = file_of(&i.path, &self.files) else {
                    continue;
                };
                let same_folder = if self.flat {
                    to.parent() == f.parent()
                } else {
                    module_of(&to).first() == module_of(f).first()
                };
                if to != *f && same_folder && node(&to) && self.code.contains_key(&to) {
                    edges.entry(f.clone()).or_default().insert(to);
                }
            }
        }
        // Tarjan's strongly connected components.
        struct T<'a> {
            edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
            index: BTreeMap<PathBuf, usize>,
            low: BTreeMap<PathBuf, usize>,
            stack: Vec<PathBuf>,
            on: BTreeSet<PathBuf>,
            out: Vec<Vec<PathBuf>>,
        }
        fn visit(t: &mut T, v: &PathBuf) {
            let n = t.index.len();
            t.index.insert(v.clone(), n);
            t.low.insert(v.clone(), n);
            t.stack.push(v.clone());
            t.on.insert(v.clone());
            for w in t.edges.get(v).cloned().unwrap_or_default() {
                if !t.index.contains_key(&w) {
                    visit(t, &w);
                    let l = t.low[&w].min(t.low[v]);
                    t.low.insert(v.clone(), l);
                } else if t.on.contains(&w) {
                    let l = t.index[&w].min(t.low[v]);
                    t.low.insert(v.clone(), l);
                }
            }
            if t.low[v] == t.index[v] {
                let mut c = Vec::new();
                while let Some(w) = t.stack.pop() {
                    t.on.remove(&w);
                    let done = w == *v;
                    c.push(w);
                    if done {
                        break;
                    }
                }
                if c.len() > 1 {
                    c.sort();
                    t.out.push(c);
                }
            }
        }
        let mut t = T {
            edges: &edges,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in edges.keys() {
            if !t.index.contains_key(v) {
                visit(&mut t, v);
            }
        }
        t.out.sort();
        t.out
    }

    /// Files over the limit, counting the lines outside their test items.
    fn long_files(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter(|(_, n)| **n > MAX_FILE_LINES)
            .map(|(f, n)| format!("src/{}: {n} lines besides its tests", f.display()))
            .collect()
    }

    /// The command handlers `run` in lib.rs dispatches to, as (file, function): each
    /// `module::function(` in it whose module is a file of src/commands/, the function
    /// found in that file or, re-exported, in its folder.
    fn handlers(&self) -> Vec<(PathBuf, String)> {
        let Some(lib) = self.code.get(Path::new("lib.rs")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (at, _) in lib.match_indices('(') {
            let before = &lib[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(0, |i| i + 1);
            let call = &before[start..];
            let parts: Vec<&str> = call.trim_start_matches("commands::").split("::").collect();
            let [module @ .., function] = parts.as_slice() else {
                continue;
            };
            if module.is_empty() || function.is_empty() {
                continue;
            }
            let dir = PathBuf::from("commands").join(module.join("/"));
            let candidates: Vec<&PathBuf> = self
                .text
                .keys()
                .filter(|f| **f == dir.with_extension("rs") || f.starts_with(&dir))
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let defined = candidates
                .into_iter()
                .find(|f| self.text[*f].lines().any(|l| fn_name(l) == Some(function)));
            if let Some(f) = defined {
                out.push((f.clone(), function.to_string()));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Functions over their limit (tests included), as "file:line fn name: N lines"; a
    /// command's handler (every function `run` dispatches to) against the handlers'.
    fn long_functions(&self) -> Vec<String> {
        let handlers = self.handlers();
        let mut out = Vec::new();
        for (f, text) in &self.text {
            let code = blank(text);
            let lines: Vec<&str> = code.lines().collect();
            let mut i = 0;
            while i < lines.len() {
                let Some(name) = fn_name(lines[i]) else {
                    i += 1;
                    continue;
                };
                let (mut depth, mut started, mut j) = (0i64, false, i);
                'body: while j < lines.len() {
                    for c in lines[j].chars() {
                        match c {
                            '{' => {
                                depth += 1;
                                started = true;
                            }
                            '}' => depth -= 1,
                            ';' if !started => break 'body,
                            _ => {}
                        }
                    }
                    if started && depth <= 0 {
                        break;
                    }
                    j += 1;
                }
                let n = j - i + 1;
                let handler = handlers.iter().any(|(hf, hn)| hf == f && hn == name);
                let limit = if handler { MAX_HANDLER_LINES } else { MAX_FN_LINES };
                if started && n > limit {
                    out.push(format!(
                        "src/{}:{} fn {name}: {n} lines (limit {limit}{})",
                        f.display(),
                        i + 1,
                        if handler { ", a command's handler" } else { "" }
                    ));
                }
                // Nested functions are counted with their outer one.
                i = if started { j + 1 } else { i + 1 };
            }
        }
        out
    }
}

fn fn_name(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.next() {
        match w {
            "pub" | "async" | "const" | "unsafe" | "extern" | "default" => {}
            w if w.starts_with("pub(") => {}
            "fn" => {
                let name = words.next()?;
                let end = name
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(name.len());
                return Some(&name[..end]);
            }
            _ => return None,
        }
    }
    None
}

#[test]
fn no_import_runs_back_up_the_stage_order() {
    let house = House::read(&src());
    let up = house.up_imports(stages());
    assert!(
        up.is_empty(),
        "imports that run up the stage order (docs/architecture.md's stages):\n{}",
        up.join("\n")
    );
}

/// lib.rs declares the modules of the stage list, each once, in its order (lib and main
/// apart), so the module list a reader meets first is the stage order, and a module
/// renamed, added or removed without its stage fails here.
#[test]
fn lib_declares_its_modules_in_stage_order() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared = declared_mods(&blank(&lib));
    let listed: Vec<String> = stages()
        .iter()
        .flatten()
        .filter(|m| !matches!(m.as_str(), "lib" | "main"))
        .cloned()
        .collect();
    assert_eq!(
        declared, listed,
        "lib.rs's modules (left) against docs/architecture.md's stages, in their order (right)"
    );
}

/// The stage list is read as docs/architecture.md writes it, and it bites: a list with
/// `net` moved above `proto` finds proto's imports of net in the real tree; a list out
/// of order, a module twice or no list at all is refused.
#[test]
fn the_stage_list_is_read_from_the_doc_and_bites() {
    let real = stages();
    assert_eq!(
        real.first().unwrap(),
        &["units", "scratch", "host", "rng", "exit"]
    );
    assert_eq!(real.last().unwrap(), &["lib", "main"]);
    let mut moved = real.to_vec();
    let net = stage_of(&moved, "net").unwrap();
    let proto = stage_of(&moved, "proto").unwrap();
    moved[net].retain(|m| m != "net");
    moved[proto + 1].push("net".into());
    let up = House::read(&src()).up_imports(&moved);
    let needle = format!("proto (stage {proto}) imports net (stage {})", proto + 1);
    assert!(up.iter().any(|l| l.contains(&needle)), "{needle} not in {up:?}");
    for (doc, error) in [
        ("```stages\n 0 a\n 2 b\n```\n", "stage 2 where stage 1 comes"),
        ("```stages\n 0 a, b\n 1 b  again\n```\n", "b has a stage already"),
        ("```stages\n 0 a, B\n```\n", "\"B\" is not a module's name"),
        ("```\n 0 a\n```\n", "no ```stages block"),
    ] {
        let got = parse_stages(&format!("x\n{doc}")).unwrap_err();
        assert!(got.contains(error), "{doc:?}: {got}");
    }
}

#[test]
fn no_two_files_of_a_folder_use_each_other() {
    let mut circles: Vec<String> = Vec::new();
    for (root, prefix) in roots() {
        let house = if prefix.is_empty() {
            House::read(&root)
        } else {
            House::read_library(&root)
        };
        assert!(
            house.files.len() > 5,
            "{}: read {} files",
            root.display(),
            house.files.len()
        );
        circles.extend(house.circles().iter().map(|c| {
            c.iter()
                .map(|f| format!("{prefix}src/{}", f.display()))
                .collect::<Vec<_>>()
                .join(" <-> ")
        }));
    }
    assert!(circles.is_empty(), "files in a circle:\n{}", circles.join("\n"));
}

#[test]
fn files_and_functions_stay_within_their_size() {
    let house = House::read(&src());
    // Every command `run` dispatches to is held to the handlers' limit: the dispatch is
    // read, not assumed (18 handlers when this was written).
    let handlers = house.handlers();
    assert!(
        handlers.len() >= 15 && handlers.iter().any(|(_, f)| f == "compare_runs"),
        "lib.rs's dispatch read as {handlers:?}"
    );
    let mut over = house.long_files();
    over.extend(house.long_functions());
    let trace = House::read_library(&roots()[1].0);
    assert!(trace.files.len() > 5, "the trace crate read as {:?}", trace.files);
    let named = |l: String| format!("{TRACE_CRATE}/{l}");
    over.extend(trace.long_files().into_iter().map(named));
    over.extend(trace.long_functions().into_iter().map(named));
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

/// The trace crate depends on nothing of ours: no path dependency in its manifest (a
/// dependency on connbench itself Cargo would refuse as a cycle, but a new crate of ours
/// under it would not be).
#[test]
fn the_trace_crate_depends_on_nothing_of_ours() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(TRACE_CRATE);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let deps: Vec<&str> = manifest
        .lines()
        .filter(|l| l.contains("path") && l.contains('='))
        .collect();
    assert!(deps.is_empty(), "{TRACE_CRATE}/Cargo.toml: {deps:?}");
    assert!(manifest.contains("name = \"connbench-trace\""), "{manifest}");
}

/// The check itself bites: a module that imports up (a module path, or an item of the
/// crate's root such as `crate::VERSION`), a circle between two files and one between a
/// folder's file and its child, a long function and a long command handler (whatever
/// its name), and a long file whose tests are declared at its top, in a tree made for the
/// test, are each found; grouped and multi-line `use` trees are read; a path in a
/// comment or a string, in a `#[cfg(test)]` item or in a file of tests, is not.
#[test]
fn the_check_finds_what_it_names() {
    let dir = std::env::temp_dir().join(format!("cb-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let w = |p: &str, t: &str| {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    w(
        "lib.rs",
        "pub mod net; pub mod load; pub mod commands; pub mod units; pub mod scratch;\npub const VERSION: &str = \"x\";\npub fn run() { commands::go::print_all(); }\n",
    );
    w(
        "net/relay.rs",
        "// crate::report::x in a comment\nconst S: &str = \"crate::report::y\";\nuse crate::{\n    targets::Target,\n    load::workload::Rng,\n};\n#[cfg(test)]\nmod tests {\n    use crate::load::Z;\n}\n",
    );
    w(
        "net/mod.rs",
        "pub mod relay;\n#[cfg(test)]\nmod testing;\npub fn version() -> &'static str { crate::VERSION }\n",
    );
    w("net/testing.rs", "use crate::load::Anything;\n");
    w("targets/mod.rs", "");
    w("load/a.rs", "use super::b::X;\n");
    w("load/b.rs", "use crate::load::a::Y;\nuse super::mod_item;\n");
    w("load/c.rs", "use super::Shared;\npub fn helper() {}\n");
    w(
        "load/mod.rs",
        "pub mod a; pub mod b; pub mod c; pub mod d;\npub use a::Y;\npub fn uses() { c::helper(); }\npub struct Shared;\n",
    );
    w(
        "load/d.rs",
        "mod e;\npub use e::Handed;\npub fn f() { e::g(); }\npub struct Shared2;\n",
    );
    w(
        "load/d/e.rs",
        "use super::Shared2;\npub fn g() {}\npub struct Handed;\n",
    );
    w("commands/mod.rs", "pub mod go;\n");
    let handler: String = (0..90).map(|i| format!("    let _x{i} = {i};\n")).collect();
    w("commands/go.rs", &format!("pub fn print_all() {{\n{handler}}}\n"));
    let body: String = (0..130).map(|i| format!("    let _x{i} = {i};\n")).collect();
    w("units.rs", &format!("pub fn long() {{\n{body}}}\n"));
    let consts: String = (0..820).map(|i| format!("pub const C{i}: u8 = 0;\n")).collect();
    w("scratch.rs", &format!("#[cfg(test)]\nmod testing;\n{consts}"));
    let house = House::read(&dir);
    let stages = parse_stages(
        "The stages:\n\n```stages\n 0 units, scratch  leaves\n 1 targets\n 2 net      transport,\n            relay\n 3 load\n 4 commands\n 5 lib, main\n```\n",
    )
    .unwrap();
    let up = house.up_imports(&stages);
    assert_eq!(up.len(), 2, "{up:?}");
    assert!(
        up[0].starts_with("src/net/mod.rs:4: net (stage 2) imports lib (stage 5): crate::VERSION"),
        "{up:?}"
    );
    assert!(
        up[1].starts_with("src/net/relay.rs:3: net (stage 2) imports load (stage 3)"),
        "{up:?}"
    );
    let circles = house.circles();
    assert_eq!(
        circles,
        vec![
            vec![PathBuf::from("load/a.rs"), PathBuf::from("load/b.rs")],
            vec![PathBuf::from("load/d/e.rs"), PathBuf::from("load/d.rs")],
        ]
    );
    let long = house.long_functions();
    assert_eq!(
        long,
        vec![
            "src/commands/go.rs:1 fn print_all: 92 lines (limit 80, a command's handler)".to_string(),
            "src/units.rs:1 fn long: 132 lines (limit 120)".to_string(),
        ]
    );
    assert_eq!(
        house.long_files(),
        vec!["src/scratch.rs: 820 lines besides its tests".to_string()]
    );
    // A library crate's root files are one folder: two that use each other are a circle
    // there (and lib.rs, their index, in none), where src/'s stages would not see one.
    let lib = dir.join("library");
    std::fs::create_dir_all(&lib).unwrap();
    for (f, t) in [
        ("lib.rs", "pub mod a;\npub mod b;\npub use a::A;\n"),
        ("a.rs", "use crate::b::B;\npub struct A(pub Option<B>);\n"),
        ("b.rs", "use super::a::A;\npub struct B(pub Option<Box<A>>);\n"),
    ] {
        std::fs::write(lib.join(f), t).unwrap();
    }
    assert_eq!(
        House::read_library(&lib).circles(),
        vec![vec![PathBuf::from("a.rs"), PathBuf::from("b.rs")]]
    );
    assert!(House::read(&lib).circles().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
