//! The house's rules, read from the source as text (docs/architecture.md): data flows one
//! way, so a module imports only modules at its own stage of [`STAGES`] or below; no two
//! files of one folder use each other (a child may use its folder's `mod.rs`); no file
//! over [`MAX_FILE_LINES`] lines before its unit tests, no function over
//! [`MAX_FN_LINES`], no command handler over [`MAX_HANDLER_LINES`].
//!
//! Why a test and not a lint: the rules are ours, and a test fails on the commit that
//! breaks one, naming the file, the line and the import, in CI as on a laptop.
//!
//! What it reads: every `crate::` and `super::` path outside comments, string literals and
//! the `#[cfg(test)]` tail of a file (unit tests may reach anywhere), grouped `use` trees
//! expanded. Nothing is compiled; a path spelled another way (a macro building one) is not
//! seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The stage order, low to high: a module may import its own stage or lower ones.
const STAGES: &[&[&str]] = &[
    &["units", "scratch", "host", "rng"],
    &["target"],
    &["script"],
    &["net"],
    &["proto"],
    &["trace"],
    &["route", "recorder"],
    &["sandbox"],
    &["connect"],
    &["workload"],
    &["dataset"],
    &["load"],
    &["stats"],
    &["replay"],
    &["options"],
    &["experiment"],
    &["live"],
    &["report"],
    &["cli"],
    &["commands"],
    &["lib", "main"],
];

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 120;
/// A command's handler (`run_*` in src/commands/) reads validated options and hands on.
const MAX_HANDLER_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
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

/// The code of a file before its `#[cfg(test)]` tail, with comments and the contents of
/// string and char literals blanked (newlines kept, so line numbers hold).
fn code(text: &str) -> String {
    let text = match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i + 1],
        None => text,
    };
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

/// An import: the line it is on and the module path it names (from the crate's root).
struct Import {
    line: usize,
    path: Vec<String>,
}

fn imports(file: &Path, code: &str) -> Vec<Import> {
    let here = module_of(file);
    let mut out = Vec::new();
    for (n, line_start) in std::iter::once(0)
        .chain(code.match_indices('\n').map(|(i, _)| i + 1))
        .enumerate()
    {
        let line = &code[line_start..];
        let line = &line[..line.find('\n').unwrap_or(line.len())];
        for (kw, up) in [("crate::", None), ("super::", Some(1usize))] {
            for (at, _) in line.match_indices(kw) {
                let b = line.as_bytes();
                if at > 0 && (b[at - 1].is_ascii_alphanumeric() || matches!(b[at - 1], b'_' | b':' | b'$')) {
                    continue;
                }
                // The rest of the statement may span lines (a grouped use).
                let rest = &code[line_start + at + kw.len()..];
                let end = rest.find(';').unwrap_or(rest.len()).min(rest.len());
                let mut base = match up {
                    None => Vec::new(),
                    Some(_) => {
                        let mut m = here.clone();
                        // `super::super::x` climbs twice.
                        m.pop();
                        let mut r = rest;
                        while let Some(t) = r.strip_prefix("super::") {
                            m.pop();
                            r = t;
                        }
                        m
                    }
                };
                let tail = {
                    let mut r = &rest[..end];
                    while let Some(t) = r.strip_prefix("super::") {
                        r = t;
                    }
                    r
                };
                for p in expand(tail) {
                    let mut full = base.clone();
                    full.extend(p);
                    if !full.is_empty() {
                        out.push(Import {
                            line: n + 1,
                            path: full,
                        });
                    }
                }
                base.clear();
            }
        }
    }
    out
}

fn stage_of(top: &str) -> Option<usize> {
    STAGES.iter().position(|s| s.contains(&top))
}

/// The top module of a file or a module path: `load` for src/load/engine.rs.
fn top(path: &[String]) -> String {
    path.first().cloned().unwrap_or_else(|| "lib".to_string())
}

struct House {
    files: BTreeSet<PathBuf>,
    code: BTreeMap<PathBuf, String>,
    text: BTreeMap<PathBuf, String>,
}

impl House {
    fn read(root: &Path) -> House {
        let files: BTreeSet<PathBuf> = sources(root).into_iter().collect();
        let mut code = BTreeMap::new();
        let mut text = BTreeMap::new();
        for f in &files {
            let t = std::fs::read_to_string(root.join(f)).unwrap();
            code.insert(f.clone(), self::code(&t));
            text.insert(f.clone(), t);
        }
        House { files, code, text }
    }

    fn top_of_file(f: &Path) -> String {
        match module_of(f).as_slice() {
            [] => f.file_stem().unwrap().to_string_lossy().into_owned(),
            m => top(m),
        }
    }

    /// Imports that run up the stage order, as "file:line: a -> b (crate::b::...)".
    fn up_imports(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (f, code) in &self.code {
            let from = House::top_of_file(f);
            let Some(sf) = stage_of(&from) else {
                out.push(format!("{}: module {from} has no stage in STAGES", f.display()));
                continue;
            };
            for i in imports(f, code) {
                let to = top(&i.path);
                if to == from || to == "VERSION" || to.chars().next().is_some_and(char::is_uppercase) {
                    continue;
                }
                match stage_of(&to) {
                    Some(st) if st > sf => out.push(format!(
                        "src/{}:{}: {from} (stage {sf}) imports {to} (stage {st}): crate::{}",
                        f.display(),
                        i.line,
                        i.path.join("::")
                    )),
                    Some(_) => {}
                    None => {}
                }
            }
        }
        out
    }

    /// Circles between files of one folder, leaving out the folder's own mod.rs (or
    /// folder.rs): each as the files in it.
    fn circles(&self) -> Vec<Vec<PathBuf>> {
        let is_root = |f: &Path| {
            let m = module_of(f);
            m.len() <= 1 || f.file_name().is_some_and(|n| n == "mod.rs")
        };
        let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (f, code) in &self.code {
            if is_root(f) {
                continue;
            }
            for i in imports(f, code) {
                if let Some(to) = file_of(&i.path, &self.files) {
                    let same_folder = top(&module_of(&to)) == House::top_of_file(f);
                    if to != *f && same_folder && !is_root(&to) {
                        edges.entry(f.clone()).or_default().insert(to);
                    }
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
        t.out
    }

    /// Files over the limit, counting the lines before `#[cfg(test)]`.
    fn long_files(&self) -> Vec<String> {
        self.text
            .iter()
            .filter_map(|(f, t)| {
                let n = t.split("\n#[cfg(test)]").next().unwrap().lines().count();
                (n > MAX_FILE_LINES).then(|| format!("src/{}: {n} lines before its tests", f.display()))
            })
            .collect()
    }

    /// Functions over their limit (tests included), as "file:line fn name: N lines".
    fn long_functions(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (f, text) in &self.text {
            let code = self::code_keeping_tests(text);
            let lines: Vec<&str> = code.lines().collect();
            let handler_file = f.starts_with("commands");
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
                let limit = if handler_file && name.starts_with("run_") {
                    MAX_HANDLER_LINES
                } else {
                    MAX_FN_LINES
                };
                if started && n > limit {
                    out.push(format!(
                        "src/{}:{} fn {name}: {n} lines (limit {limit})",
                        f.display(),
                        i + 1
                    ));
                }
                // Nested functions are counted with their outer one.
                i = if started { j + 1 } else { i + 1 };
            }
        }
        out
    }
}

/// [`code`] over the whole file, its tests too.
fn code_keeping_tests(text: &str) -> String {
    // `code` cuts at the tests; blank them as code instead by hiding the marker.
    code(&text.replace("\n#[cfg(test)]", "\n#[cfg(tests)]"))
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
    let up = house.up_imports();
    assert!(
        up.is_empty(),
        "imports that run up the stage order (tests/it/architecture.rs STAGES, docs/architecture.md):\n{}",
        up.join("\n")
    );
}

#[test]
fn no_two_files_of_a_folder_use_each_other() {
    let house = House::read(&src());
    let circles: Vec<String> = house
        .circles()
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| format!("src/{}", f.display()))
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(circles.is_empty(), "files in a circle:\n{}", circles.join("\n"));
}

#[test]
fn files_and_functions_stay_within_their_size() {
    let house = House::read(&src());
    let mut over = house.long_files();
    over.extend(house.long_functions());
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

/// The check itself bites: a module that imports up, a circle and a long function, in a
/// tree made for the test, are each found; grouped and multi-line `use` trees are read,
/// and a path in a comment or a string is not.
#[test]
fn the_check_finds_what_it_names() {
    let dir = std::env::temp_dir().join(format!("cb-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let w = |p: &str, t: &str| {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    w("lib.rs", "pub mod net; pub mod load;\n");
    w(
        "net/relay.rs",
        "// crate::report::x in a comment\nconst S: &str = \"crate::report::y\";\nuse crate::{\n    target::Target,\n    load::workload::Rng,\n};\n",
    );
    w("net/mod.rs", "pub mod relay;\n");
    w("load/a.rs", "use super::b::X;\n");
    w("load/b.rs", "use crate::load::a::Y;\nuse super::mod_item;\n");
    w("load/mod.rs", "pub mod a; pub mod b;\n");
    let body: String = (0..130).map(|i| format!("    let _x{i} = {i};\n")).collect();
    w("units.rs", &format!("pub fn long() {{\n{body}}}\n"));
    let house = House::read(&dir);
    let up = house.up_imports();
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(
        up[0].starts_with("src/net/relay.rs:3: net (stage 3) imports load (stage 11)"),
        "{up:?}"
    );
    let circles = house.circles();
    assert_eq!(
        circles,
        vec![vec![PathBuf::from("load/a.rs"), PathBuf::from("load/b.rs")]]
    );
    let long = house.long_functions();
    assert_eq!(
        long,
        vec!["src/units.rs:1 fn long: 132 lines (limit 120)".to_string()]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
