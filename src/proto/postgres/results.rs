//! A statement's answer, read up to ReadyForQuery: rows counted in place on the hot path,
//! and kept (first column, or each result's columns and last row) only when asked. Apart
//! from the session because it is the one long reader of the protocol's result messages.

use bytes::Buf;
use postgres_protocol::message::backend::{DataRowBody, Message};

use super::{unexpected, Session};
use crate::proto::{ConnectError, ErrorKind, Phase, ResultSet};

/// What [`Session::finish_statement`] keeps of the rows it reads. The hot path keeps
/// nothing, and reads every row in place without parsing it.
pub(super) enum Collect<'a> {
    Nothing,
    /// The first column of every row.
    FirstColumn(&'a mut Vec<String>),
    /// Per result: the column names and the last row (for `\gset` and `\aset`).
    Results(&'a mut Vec<ResultSet>),
}

impl Session {
    /// Reads a statement's responses up to ReadyForQuery; returns the rows seen, or when
    /// there were none the rows the command reports having affected (and
    /// collects their first column when asked). A server error is returned after
    /// ReadyForQuery, so the session stays in step and usable.
    pub(super) async fn finish_statement(&mut self, mut collect: Collect<'_>) -> Result<u64, ConnectError> {
        let p = Phase::Query;
        let mut rows = 0;
        let mut failure = None;
        // Under Collect::Results: whether the last result set is still receiving rows.
        let mut open_set = false;
        loop {
            // The hot path reads the messages of a statement's answer in place: only an
            // error, or a row whose value is wanted, is parsed into a message. Splitting
            // every message off the buffer would make the buffer shared (an allocation
            // and atomic reference counts per message).
            let next = self.buffered_message(p).inspect_err(|_| self.broken = true)?;
            let Some((tag, len)) = next else {
                if let Err(e) = self.fill(p).await {
                    return Err(failure.unwrap_or(e));
                }
                continue;
            };
            // Each message's body has the size its kind needs before it is read in place.
            let short = |need: usize| {
                ConnectError::new(
                    p,
                    ErrorKind::Protocol(format!(
                        "the server sent a {:?} message of {} bytes; it needs at least {need}",
                        char::from(tag),
                        len - 1
                    )),
                )
            };
            match tag {
                b'Z' => {
                    if len != 6 {
                        self.broken = true;
                        return Err(short(5));
                    }
                    self.transaction_status = self.rbuf[5];
                    self.rbuf.advance(len);
                    break;
                }
                b'D' if matches!(collect, Collect::Nothing) => {
                    rows += 1;
                    self.rbuf.advance(len);
                }
                b'T' | b'I' | b'C' if matches!(collect, Collect::Results(_)) => {
                    let Collect::Results(sets) = &mut collect else {
                        unreachable!("matched above")
                    };
                    if tag == b'T' {
                        let Message::RowDescription(desc) = self.recv(p).await? else {
                            return Err(unexpected(p, "RowDescription"));
                        };
                        let mut set = ResultSet::default();
                        let mut fields = desc.fields();
                        while let Ok(Some(f)) = fallible_iterator::FallibleIterator::next(&mut fields) {
                            set.columns.push(f.name().to_string());
                        }
                        set.returns_rows = true;
                        sets.push(set);
                        open_set = true;
                        continue;
                    }
                    // CommandComplete ends a result; without a RowDescription before it
                    // (or for an EmptyQueryResponse) it is a result without rows.
                    if !open_set {
                        sets.push(ResultSet::default());
                    }
                    open_set = false;
                    if tag == b'I' {
                        self.rbuf.advance(len);
                        continue;
                    }
                    if len < 6 {
                        self.broken = true;
                        return Err(short(5));
                    }
                    if rows == 0 {
                        rows = tag_rows(&self.rbuf[5..len - 1]);
                    }
                    self.rbuf.advance(len);
                }
                b'C' => {
                    // With no rows returned, count the rows the command affected or
                    // copied ("UPDATE 1", "COPY 100000").
                    if len < 6 {
                        self.broken = true;
                        return Err(short(5));
                    }
                    if rows == 0 {
                        rows = tag_rows(&self.rbuf[5..len - 1]);
                    }
                    self.rbuf.advance(len);
                }
                b'D' | b'E' => match self.recv(p).await {
                    Ok(Message::DataRow(row)) => {
                        rows += 1;
                        keep_row(&mut collect, &row, open_set);
                    }
                    Ok(_) => {}
                    Err(ConnectError {
                        kind: kind @ ErrorKind::Server { .. },
                        ..
                    }) => failure = Some(ConnectError::new(p, kind)),
                    Err(e) => return Err(failure.unwrap_or(e)),
                },
                // ParseComplete, BindComplete, RowDescription, NoData, EmptyQueryResponse,
                // notices and the like: nothing to keep.
                _ => self.rbuf.advance(len),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }
}

/// The rows a CommandComplete tag reports ("UPDATE 1", "COPY 100000": the last word).
#[inline]
fn tag_rows(body: &[u8]) -> u64 {
    body.rsplit(|&b| b == b' ')
        .next()
        .and_then(|n| std::str::from_utf8(n).ok()?.parse().ok())
        .unwrap_or(0)
}

/// Keeps what `collect` asks of one DataRow: its first column, or the last row of the
/// open result set.
fn keep_row(collect: &mut Collect<'_>, row: &DataRowBody, open_set: bool) {
    match collect {
        Collect::FirstColumn(out) => out.push(first_text(row).unwrap_or_default()),
        Collect::Results(sets) => {
            if let Some(set) = sets.last_mut().filter(|_| open_set) {
                set.rows += 1;
                set.last_row.clear();
                let mut ranges = row.ranges();
                while let Ok(Some(r)) = fallible_iterator::FallibleIterator::next(&mut ranges) {
                    set.last_row
                        .push(r.map(|r| String::from_utf8_lossy(&row.buffer()[r]).into_owned()));
                }
            }
        }
        Collect::Nothing => {}
    }
}

fn first_text(row: &DataRowBody) -> Option<String> {
    let mut ranges = row.ranges();
    let range = fallible_iterator::FallibleIterator::next(&mut ranges).ok()??;
    range.map(|r| String::from_utf8_lossy(&row.buffer()[r]).into_owned())
}
