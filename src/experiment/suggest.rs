//! "Did you mean": the known word nearest a mistyped one (a suite key, a suite's name, a
//! cell, a target name), by the edit distance of the usual typos, for error messages.

/// `; did you mean "KEY"?` for the candidate nearest `word`, when it is near enough to be
/// a typo of it (an edit distance of at most a third of the word, and at least 2 allowed);
/// empty otherwise.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| format!("; did you mean {c:?}?"))
        .unwrap_or_default()
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps
/// of two neighbours (the usual typos), each costing 1; case is ignored.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    // d[i][j]: the distance between a's first i and b's first j characters.
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edit_distance_counts_the_usual_typos_once() {
        assert_eq!(edit_distance("clients", "clients"), 0);
        assert_eq!(edit_distance("client", "clients"), 1, "a letter left out");
        assert_eq!(edit_distance("duraiton", "duration"), 1, "two letters swapped");
        assert_eq!(edit_distance("Workload", "workload"), 0, "case ignored");
        assert_eq!(edit_distance("think", "thank"), 1, "a letter replaced");
        assert_eq!(edit_distance("", "rate"), 4);
        assert_eq!(
            did_you_mean(
                "pool_lifetime",
                crate::experiment::suite::SETTINGS.iter().copied()
            ),
            "; did you mean \"pool_max_lifetime\"?"
        );
        assert_eq!(
            did_you_mean("xyz", crate::experiment::suite::SETTINGS.iter().copied()),
            ""
        );
    }
}
