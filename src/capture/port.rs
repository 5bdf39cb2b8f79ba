//! The first pass over a capture: what it holds (its first packet's time, link type,
//! interface) and which TCP port is the server's. Given `--port`, the port must carry
//! TCP; else it is guessed: the port seen answering a startup (PostgreSQL's
//! StartupMessage or SSLRequest goes to it) or greeting (MySQL's server greeting comes
//! from it), else the engine's usual ports (5432 and 6432; 3306). Nothing is written
//! before this pass has said the capture is usable.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Result};

use super::file::{segments, FileInfo, Segment};
use crate::targets::Engine;

/// What the first pass found.
#[derive(Debug, Default)]
struct Seen {
    /// TCP segments by port, either end.
    ports: HashMap<u16, u64>,
    /// PostgreSQL startups by the port they went to.
    startups: HashMap<u16, u64>,
    /// MySQL greetings by the port they came from.
    greetings: HashMap<u16, u64>,
}

impl Seen {
    fn add(&mut self, s: &Segment<'_>) {
        *self.ports.entry(s.src.port()).or_default() += 1;
        *self.ports.entry(s.dst.port()).or_default() += 1;
        let p = s.payload;
        if p.len() >= 8 {
            let len = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize;
            let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
            // Protocol 3.x, SSLRequest, GSSENCRequest.
            if len <= p.len() && (code >> 16 == 3 || code == 80877103 || code == 80877104) {
                *self.startups.entry(s.dst.port()).or_default() += 1;
            }
        }
        if p.len() >= 5 {
            let len = u32::from_le_bytes([p[0], p[1], p[2], 0]) as usize;
            // Sequence 0, protocol version 10.
            if len + 4 == p.len() && p[3] == 0 && p[4] == 10 {
                *self.greetings.entry(s.src.port()).or_default() += 1;
            }
        }
    }

    fn most(m: &HashMap<u16, u64>) -> Option<u16> {
        m.iter()
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
            .map(|(p, _)| *p)
    }

    fn guess(&self, engine: Engine) -> Option<u16> {
        let (answered, usual): (_, &[u16]) = match engine {
            Engine::Postgres => (&self.startups, &[5432, 6432]),
            Engine::Mysql => (&self.greetings, &[3306]),
        };
        Seen::most(answered).or_else(|| {
            usual
                .iter()
                .filter(|p| self.ports.contains_key(p))
                .max_by_key(|p| self.ports[p])
                .copied()
        })
    }

    /// The busiest ports, for an error.
    fn busiest(&self) -> String {
        let mut v: Vec<_> = self.ports.iter().collect();
        v.sort_by_key(|(p, n)| (std::cmp::Reverse(**n), **p));
        let list: Vec<String> = v.iter().take(5).map(|(p, n)| format!("{p} ({n})")).collect();
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    }
}

/// The capture's facts and its server port: `port` checked, or guessed for `engine`.
pub fn scan(path: &Path, engine: Engine, port: Option<u16>) -> Result<(FileInfo, u16)> {
    let mut seen = Seen::default();
    let info = segments(path, |s| {
        seen.add(s);
        Ok(())
    })?;
    let shown = path.display();
    if info.packets == 0 {
        bail!("--from-pcap {shown}: finding the connections: the capture holds no packets (was tcpdump stopped before any traffic?)");
    }
    if seen.ports.is_empty() {
        bail!(
            "--from-pcap {shown}: finding the connections: none of its {} packet(s) is TCP over \
             IP; capture the database's traffic (tcpdump -i IFACE -w FILE tcp port PORT)",
            info.packets
        );
    }
    let other = match engine {
        Engine::Postgres => (Engine::Mysql, "mysql"),
        Engine::Mysql => (Engine::Postgres, "postgres"),
    };
    let hint = match seen.guess(other.0) {
        Some(p) => format!(" (it looks like --engine {} --port {p})", other.1),
        None => String::new(),
    };
    match port {
        Some(p) if seen.ports.contains_key(&p) => Ok((info, p)),
        Some(p) => bail!(
            "--from-pcap {shown}: finding the connections: no TCP to or from port {p}; the \
             capture's busiest TCP ports (segments): {}; give the server's --port{hint}",
            seen.busiest()
        ),
        None => match seen.guess(engine) {
            Some(p) => Ok((info, p)),
            None => bail!(
                "--from-pcap {shown}: finding the connections: no {} server port found (no \
                 startup or greeting seen, no TCP to {}); the capture's busiest TCP ports \
                 (segments): {}; give the server's --port{hint}",
                match engine {
                    Engine::Postgres => "PostgreSQL",
                    Engine::Mysql => "MySQL",
                },
                match engine {
                    Engine::Postgres => "5432 or 6432",
                    Engine::Mysql => "3306",
                },
                seen.busiest()
            ),
        },
    }
}
