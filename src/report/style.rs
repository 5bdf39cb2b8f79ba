//! Terminal styling: colour for verdicts and warnings when standard output is a terminal
//! and the user has not opted out (NO_COLOR, https://no-color.org; TERM=dumb), and
//! word-wrapping so the summaries read at 80 columns.

use std::sync::atomic::{AtomicBool, Ordering};

static COLOR: AtomicBool = AtomicBool::new(false);

/// Whether to colour, from the environment: NO_COLOR (any non-empty value) always wins;
/// CLICOLOR_FORCE (non-empty, not "0") colours even into a pipe; otherwise colour only a
/// terminal that is not `dumb`.
pub fn color_wanted(is_tty: bool, no_color: Option<&str>, force: Option<&str>, term: Option<&str>) -> bool {
    if no_color.is_some_and(|v| !v.is_empty()) {
        return false;
    }
    if force.is_some_and(|v| !v.is_empty() && v != "0") {
        return true;
    }
    is_tty && term != Some("dumb")
}

/// Decides once, at start-up, from this process's environment and standard output.
pub fn init_from_env() {
    // SAFETY: isatty only inspects the descriptor.
    let tty = unsafe { libc::isatty(libc::STDOUT_FILENO) } == 1;
    let var = |k: &str| std::env::var(k).ok();
    COLOR.store(
        color_wanted(
            tty,
            var("NO_COLOR").as_deref(),
            var("CLICOLOR_FORCE").as_deref(),
            var("TERM").as_deref(),
        ),
        Ordering::Relaxed,
    );
}

/// The colours the summaries use.
#[derive(Debug, Clone, Copy)]
pub enum Paint {
    Good,
    Bad,
    Warn,
    Bold,
}

/// `s` in `p` when colour is on; `s` unchanged otherwise.
pub fn paint(s: &str, p: Paint) -> String {
    if !COLOR.load(Ordering::Relaxed) {
        return s.to_string();
    }
    let code = match p {
        Paint::Good => "32",
        Paint::Bad => "31",
        Paint::Warn => "33",
        Paint::Bold => "1",
    };
    format!("\x1b[{code}m{s}\x1b[0m")
}

/// The columns `s` takes on a terminal: its characters, colour codes left out.
pub fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// Wraps `text` at `width` columns: the first line starts with `first`, the others with
/// `rest` (the hanging indent). Words longer than a line are left whole.
pub fn wrap(text: &str, first: &str, rest: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        let len = visible_len(&line);
        if !empty && len + 1 + visible_len(word) > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_wins_and_pipes_stay_plain() {
        assert!(color_wanted(true, None, None, Some("xterm")));
        assert!(!color_wanted(true, Some("1"), None, Some("xterm")));
        assert!(
            !color_wanted(true, Some("1"), Some("1"), None),
            "NO_COLOR beats force"
        );
        assert!(
            color_wanted(true, Some(""), None, None),
            "an empty NO_COLOR is unset"
        );
        assert!(!color_wanted(false, None, None, Some("xterm")), "a pipe");
        assert!(color_wanted(false, None, Some("1"), None));
        assert!(!color_wanted(false, None, Some("0"), None));
        assert!(!color_wanted(true, None, None, Some("dumb")));
    }

    #[test]
    fn colour_codes_take_no_columns() {
        assert_eq!(visible_len("\x1b[32mfaster\x1b[0m, p < 0.001"), 17);
    }

    #[test]
    fn wrapping_keeps_lines_within_width() {
        let text = "target=pgbouncer_unix_trust is 36.78 ± 2.15 times faster than target=unix (p < 0.001)";
        let w = wrap(text, "  answer: ", "          ", 40);
        assert!(w.lines().all(|l| l.chars().count() <= 40), "{w}");
        assert!(w.starts_with("  answer: target=pgbouncer_unix_trust"));
        assert_eq!(w.split_whitespace().count(), text.split_whitespace().count() + 1);
    }
}
