//! Why a suite run failed: a cell none of whose counted repetitions succeeded, so the
//! run has no answer for it. The runner stores the run as failed with this sentence and
//! the command exits 1; the failed cell is the one whose own error it is, not a cell that
//! merely waited for it.

/// The error of a cell that was not measured because another cell of its round could
/// not start (cells that take turns start together): its own failure is the other's.
pub const NOT_MEASURED: &str = "not measured: ";

/// A cell every counted repetition of which failed, and its first error, which says what
/// to fix when the fix is known (`connbench init`, say).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub cell: String,
    pub repetitions: usize,
    pub error: String,
    /// The other cells that failed every repetition too.
    pub others: Vec<String>,
}

impl Failure {
    /// The cell that failed every counted repetition, if one did, from each cell's name,
    /// counted repetitions and errors: the first whose own error it is, else the first
    /// (whose error names the cell that could not start).
    pub fn of_cells<'a>(cells: impl Iterator<Item = (&'a str, usize, &'a [String])>) -> Option<Failure> {
        let failed: Vec<(&str, usize, &[String])> = cells
            .filter(|(_, rounds, errors)| *rounds > 0 && errors.len() == *rounds)
            .collect();
        let (cell, repetitions, errors) = failed
            .iter()
            .find(|(_, _, errors)| !errors[0].starts_with(NOT_MEASURED))
            .or(failed.first())?;
        Some(Failure {
            cell: cell.to_string(),
            repetitions: *repetitions,
            error: errors[0].clone(),
            others: failed
                .iter()
                .filter(|(other, _, _)| other != cell)
                .map(|(other, _, _)| other.to_string())
                .collect(),
        })
    }

    /// The failure in one sentence, as stored with the run and printed after its report.
    pub fn sentence(&self) -> String {
        let others = match self.others.len() {
            0 => String::new(),
            1 => format!(" (and every one of cell {:?})", self.others[0]),
            n => format!(" (and every one of {n} other cells)"),
        };
        format!(
            "every repetition of cell {:?} failed (all {}){others}: {}",
            self.cell, self.repetitions, self.error
        )
    }
}
