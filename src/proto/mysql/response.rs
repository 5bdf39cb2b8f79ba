//! Reading a command's response (OK, an error, or result sets of text or binary rows)
//! on the hot path of every MySQL/MariaDB transaction.
//!
//! The packets already in the read buffer are taken in one synchronous pass, and the
//! socket is read only when the next packet is not whole: one `await` per read of the
//! socket, not one per packet. A point select's answer is five packets (column count,
//! definition, EOF, row, EOF) that arrive in one read; awaiting each through an async
//! helper cost about 250 instructions a transaction more (callgrind, issue 56). Where
//! the response stands between reads is a small [`Reading`]; what each packet means
//! there is [`Reading::take`], a pure function of the packet, so every oddity is an
//! error naming the phase, never a panic.

use bytes::Buf;
use mysql_common::constants::StatusFlags;

use super::codec::{eof_status, lenenc_int, ok_packet, payload_len, server_error, SPLIT};
use super::{protocol, ConnectError, Phase, Session};

/// Where a response's reading stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    /// Expecting the response's first packet (or the next result's, after one that
    /// said more results exist).
    Head,
    /// Column definitions still to skip.
    Definitions(u64),
    /// Expecting the EOF packet after the definitions (connbench never asks for
    /// CLIENT_DEPRECATE_EOF).
    Eof,
    /// Rows, up to the EOF packet that ends the result set.
    Rows,
}

/// A response read so far: its stage and the rows returned (or affected, when none
/// were returned).
#[derive(Debug)]
struct Reading {
    stage: Stage,
    total: u64,
}

/// Why a response ended in an error, and whether the session survives it: a server's
/// error leaves it usable, a response connbench cannot follow does not.
#[derive(Debug)]
struct Stop {
    error: ConnectError,
    broken: bool,
}

/// What the buffered packets leave to do.
enum Next {
    /// The response is whole.
    Done,
    /// The next packet is not whole yet: read the socket.
    Fill,
    /// The next packet is split at 16 MiB: join it (never on a hot path).
    Joined,
}

impl Session {
    /// Reads a command's response, calling `row` with each row's payload. Returns the
    /// rows returned, or the rows affected when there were none. A server error leaves
    /// the session usable.
    pub(super) async fn response(
        &mut self,
        phase: Phase,
        mut row: impl FnMut(&[u8]),
    ) -> Result<u64, ConnectError> {
        let mut r = Reading {
            stage: Stage::Head,
            total: 0,
        };
        loop {
            let taken = match self.scan(&mut r, phase, &mut row) {
                Ok(Next::Done) => return Ok(r.total),
                Ok(Next::Fill) => {
                    self.fill(phase).await?;
                    continue;
                }
                Ok(Next::Joined) if r.stage == Stage::Eof => Err(Stop::broken(expected_eof(phase))),
                Ok(Next::Joined) => {
                    let pkt = self.packet(phase).await?;
                    r.take(&pkt, self.cache_metadata, &mut self.status, phase, &mut row)
                }
                Err(stop) => Err(stop),
            };
            match taken {
                Ok(true) => return Ok(r.total),
                Ok(false) => {}
                Err(stop) => {
                    self.broken |= stop.broken;
                    return Err(stop.error);
                }
            }
        }
    }

    /// Takes every whole packet in the read buffer, up to the response's end or the
    /// first packet not yet whole (room for which is reserved).
    fn scan(&mut self, r: &mut Reading, phase: Phase, row: &mut impl FnMut(&[u8])) -> Result<Next, Stop> {
        loop {
            let Some(head) = self.rbuf.get(..4) else {
                return Ok(Next::Fill);
            };
            let len = payload_len(head);
            if len >= SPLIT {
                return Ok(Next::Joined);
            }
            if self.rbuf.len() < 4 + len {
                self.rbuf.reserve(4 + len - self.rbuf.len());
                return Ok(Next::Fill);
            }
            self.seq = head[3].wrapping_add(1);
            let done = r.take(
                &self.rbuf[4..4 + len],
                self.cache_metadata,
                &mut self.status,
                phase,
                row,
            );
            self.rbuf.advance(4 + len);
            if done? {
                return Ok(Next::Done);
            }
        }
    }
}

impl Reading {
    /// Takes one packet's payload: whether the response is now whole.
    fn take(
        &mut self,
        pkt: &[u8],
        cache_metadata: bool,
        status: &mut StatusFlags,
        phase: Phase,
        row: &mut impl FnMut(&[u8]),
    ) -> Result<bool, Stop> {
        match self.stage {
            Stage::Head => match pkt.first() {
                Some(0x00) => {
                    let (affected, s) = ok_packet(pkt);
                    *status = s;
                    self.total += affected;
                    Ok(!s.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS))
                }
                Some(0xff) => Err(Stop::usable(server_error(phase, pkt))),
                Some(0xfb) => Err(Stop::broken(protocol(
                    phase,
                    "the server asked for a LOCAL INFILE, which connbench never sends".into(),
                ))),
                _ => match lenenc_int(pkt) {
                    Some((columns, used)) => {
                        // With the metadata cache, a byte says whether definitions follow.
                        let definitions = !cache_metadata || pkt.get(used).is_none_or(|&b| b != 0);
                        self.stage = match (definitions, columns) {
                            (true, 1..) => Stage::Definitions(columns),
                            _ => Stage::Eof,
                        };
                        Ok(false)
                    }
                    None => Err(Stop::broken(protocol(
                        phase,
                        "malformed result set header".into(),
                    ))),
                },
            },
            Stage::Definitions(to_skip) => {
                self.stage = match to_skip {
                    2.. => Stage::Definitions(to_skip - 1),
                    _ => Stage::Eof,
                };
                Ok(false)
            }
            Stage::Eof if (1..9).contains(&pkt.len()) && pkt[0] == 0xfe => {
                self.stage = Stage::Rows;
                Ok(false)
            }
            Stage::Eof => Err(Stop::broken(expected_eof(phase))),
            Stage::Rows => match pkt.first() {
                Some(0xfe) if pkt.len() < 9 => {
                    *status = eof_status(pkt);
                    self.stage = Stage::Head;
                    Ok(!status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS))
                }
                Some(0xff) => Err(Stop::usable(server_error(phase, pkt))),
                _ => {
                    self.total += 1;
                    row(pkt);
                    Ok(false)
                }
            },
        }
    }
}

impl Stop {
    fn usable(error: ConnectError) -> Stop {
        Stop { error, broken: false }
    }

    fn broken(error: ConnectError) -> Stop {
        Stop { error, broken: true }
    }
}

fn expected_eof(phase: Phase) -> ConnectError {
    protocol(
        phase,
        "expected an EOF packet after the column definitions".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::transport::{Counted, Stream, UnixConn};
    use crate::proto::Statement;
    use std::io::Write;

    /// A session on one end of a socket pair, its peer (the "server") the other end.
    fn session() -> (Session, std::os::unix::net::UnixStream) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let session = Session::on(Stream::Unix(Counted::new(UnixConn::from_std(a).unwrap())));
        (session, b)
    }

    /// Packets as the server sends them: each payload after its header.
    fn packets(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, p) in payloads.iter().enumerate() {
            out.extend_from_slice(&super::super::codec::header(p.len(), seq as u8 + 1));
            out.extend_from_slice(p);
        }
        out
    }

    #[tokio::test]
    async fn an_answer_split_anywhere_is_read_whole_and_the_request_was_framed() {
        let answer = packets(&[&[1], b"\x03def", EOF, b"\x00\x00\x2a", EOF]);
        // Cut inside the second packet's header, and inside the row's payload.
        for cut in [6, answer.len() - 11] {
            let (mut s, mut peer) = session();
            peer.write_all(&answer[..cut]).unwrap();
            let mut run = Box::pin(s.execute(Statement::Simple("SELECT 1"), &[]));
            // Without the rest it cannot end: it waits for the socket.
            let early = tokio::time::timeout(std::time::Duration::from_millis(50), &mut run).await;
            assert!(
                early.is_err(),
                "cut at {cut}: it ended on part of the answer: {early:?}"
            );
            peer.write_all(&answer[cut..]).unwrap();
            assert_eq!(run.await.unwrap(), 1, "cut at {cut}");
            assert!(!s.is_broken());
            // The request went out as one packet: its header, COM_QUERY and the SQL.
            let mut sent = [0u8; 13];
            std::io::Read::read_exact(&mut peer, &mut sent).unwrap();
            assert_eq!(&sent, b"\x09\x00\x00\x00\x03SELECT 1");
        }
    }

    #[tokio::test]
    async fn a_server_error_leaves_the_session_usable_and_an_oddity_breaks_it() {
        let (mut s, mut peer) = session();
        peer.write_all(&packets(&[b"\xff\x7a\x04#42S02no such table"]))
            .unwrap();
        let e = s.execute(Statement::Simple("SELECT x"), &[]).await.unwrap_err();
        assert!(e.to_string().contains("no such table"), "{e}");
        assert!(!s.is_broken(), "a server error is an answer");
        // The same session, a LOCAL INFILE request: broken.
        peer.write_all(&packets(&[b"\xfbfile"])).unwrap();
        let e = s.execute(Statement::Simple("LOAD DATA"), &[]).await.unwrap_err();
        assert!(e.to_string().contains("LOCAL INFILE"), "{e}");
        assert!(s.is_broken(), "connbench cannot follow that answer");
    }

    /// Feeds payloads to a fresh reading: the rows seen, how each packet was taken
    /// (`Err(broken)` for an error), and the total.
    fn read(cache_metadata: bool, payloads: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<Result<bool, bool>>, u64) {
        let mut r = Reading {
            stage: Stage::Head,
            total: 0,
        };
        let mut status = StatusFlags::empty();
        let mut rows = Vec::new();
        let mut ends = Vec::new();
        for p in payloads {
            let taken = r.take(
                p,
                cache_metadata,
                &mut status,
                Phase::Query,
                &mut |row: &[u8]| rows.push(row.to_vec()),
            );
            ends.push(taken.map_err(|s| s.broken));
        }
        (rows, ends, r.total)
    }

    const EOF: &[u8] = &[0xfe, 0, 0, 2, 0];
    /// An EOF whose status says more results follow (SERVER_MORE_RESULTS_EXISTS).
    const EOF_MORE: &[u8] = &[0xfe, 0, 0, 0x0a, 0];

    #[test]
    fn a_point_select_s_five_packets_end_after_the_last_eof() {
        let def: &[u8] = b"\x03def\x08connbench";
        let (rows, ends, total) = read(false, &[&[1], def, EOF, b"\x00\x00\x2a", EOF]);
        assert_eq!(rows, vec![b"\x00\x00\x2a".to_vec()]);
        assert_eq!(ends, vec![Ok(false), Ok(false), Ok(false), Ok(false), Ok(true)]);
        assert_eq!(total, 1);
    }

    #[test]
    fn every_definition_is_skipped_before_the_eof() {
        // Three columns: three definitions, then the EOF, a row and the last EOF.
        let (rows, ends, _) = read(false, &[&[3], b"d1", b"d2", b"d3", EOF, b"r", EOF]);
        assert_eq!(rows, vec![b"r".to_vec()]);
        assert_eq!(ends.last(), Some(&Ok(true)));
        // One definition too few: the EOF is taken for a definition, and the row is not
        // an EOF.
        let (_, ends, _) = read(false, &[&[3], b"d1", b"d2", EOF, b"r"]);
        assert_eq!(ends.last(), Some(&Err(true)));
    }

    #[test]
    fn the_metadata_cache_s_byte_skips_the_definitions() {
        // Two columns, "definitions follow: no": the EOF comes next.
        let (rows, ends, _) = read(true, &[&[2, 0], EOF, b"r1", b"r2", EOF]);
        assert_eq!(rows.len(), 2);
        assert_eq!(ends.last(), Some(&Ok(true)));
        // "Yes": two definitions, then the EOF.
        let (rows, ends, _) = read(true, &[&[2, 1], b"d1", b"d2", EOF, EOF]);
        assert!(rows.is_empty());
        assert_eq!(ends, [Ok(false), Ok(false), Ok(false), Ok(false), Ok(true)]);
    }

    #[test]
    fn more_results_go_on_to_the_next_head() {
        // OK with SERVER_MORE_RESULTS_EXISTS (0x0008) and 3 rows affected, then a result
        // set of one row that says more follow, then the last OK.
        let ok_more: &[u8] = &[0, 3, 0, 0x08, 0, 0, 0];
        let ok: &[u8] = &[0, 0, 0, 2, 0, 0, 0];
        let (rows, ends, total) = read(false, &[ok_more, &[1], b"d", EOF, b"row", EOF_MORE, ok]);
        assert_eq!(rows.len(), 1);
        assert_eq!(ends.iter().filter(|e| **e == Ok(true)).count(), 1);
        assert_eq!(ends.last(), Some(&Ok(true)));
        assert_eq!(total, 3 + 1);
    }

    #[test]
    fn a_server_error_leaves_the_session_usable_and_oddities_break_it() {
        let err: &[u8] = b"\xff\x7a\x04#42S02Table 'x' doesn't exist";
        assert_eq!(read(false, &[err]).1, vec![Err(false)]);
        // An error in the middle of the rows, too.
        assert_eq!(
            read(false, &[&[1], b"d", EOF, b"r", err]).1.last(),
            Some(&Err(false))
        );
        // LOCAL INFILE, a header that is not a length, an empty packet, a missing EOF:
        // broken.
        assert_eq!(read(false, &[&[0xfb, b'f']]).1, vec![Err(true)]);
        assert_eq!(read(false, &[&[0xfc, 1]]).1, vec![Err(true)]);
        assert_eq!(read(false, &[&[]]).1, vec![Err(true)]);
        assert_eq!(
            read(false, &[&[1], b"d", b"not an eof"]).1.last(),
            Some(&Err(true))
        );
        assert_eq!(read(false, &[&[1], b"d", &[0xfe; 9]]).1.last(), Some(&Err(true)));
    }
}
