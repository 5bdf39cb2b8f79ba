//! Recorded PostgreSQL cancels replayed: an application that cancelled a slow query
//! (psycopg2's `cancel()`, psql's Ctrl-C, a client-side timeout) sent a CancelRequest on
//! a connection of its own, which the trace keeps as a session with `cancel_request` and
//! the pid it named (never its key). This module owns what such a cancel becomes: which
//! replayed session it targets ([`plan`]: the recorded session whose BackendKeyData pid
//! it named, open at that moment), the key that session's replayed connection holds now
//! ([`Keys`], [`Slot`]), and the CancelRequest sent at the cancel's recorded offset
//! ([`send_all`]), counted as replayed or as not replayed with its reason ([`Counts`]).
//!
//! With `--pool` the key is that of the pooled connection the session holds at the
//! cancel's moment (the session registers it while it holds one); a session that holds
//! none then (between two transactions) has nothing to cancel, and the cancel counts as
//! not replayed. A cancel hitting a backend with no query running is harmless: the
//! server ignores it. MySQL's `KILL QUERY <id>` is an ordinary query on another
//! connection: [`super::kill`] maps its id through the same [`Keys`], which hold a
//! targeted MySQL session's connection id as they hold a PostgreSQL one's key.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use tokio::sync::watch;

use crate::proto::postgres::{send_cancel, CancelKey};
use crate::proto::{self, Endpoint};

/// A recorded CancelRequest, as the trace holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    /// The cancel connection's open, since the trace's start.
    pub at_ns: u64,
    /// The backend pid it named.
    pub pid: Option<u32>,
}

/// A replayed session as a cancel may target it: what the recording saw of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub session: u64,
    /// Its BackendKeyData pid when recorded.
    pub pid: Option<u32>,
    /// Since the trace's start.
    pub open_ns: u64,
    /// Since its open; `None` when the trace ends first.
    pub close_ns: Option<u64>,
}

/// A recorded cancel and the session it targets, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelPlan {
    pub at_ns: u64,
    pub target: Result<u64, &'static str>,
}

/// Why a cancel names no session of the replay.
const NO_PID: &str = "the recorded CancelRequest has no backend pid";
const NO_SESSION: &str = "no replayed session had the recorded backend pid at the cancel's time";

/// Each recorded cancel's target: the replayed session whose recorded pid it named and
/// that was open at its time (the latest opened, should the server have reused a pid).
pub fn plan(recorded: &[Recorded], sessions: &[Target]) -> Vec<CancelPlan> {
    let mut plans: Vec<CancelPlan> = recorded
        .iter()
        .map(|c| {
            let target = match c.pid {
                None => Err(NO_PID),
                Some(pid) => sessions
                    .iter()
                    .filter(|s| s.pid == Some(pid) && s.open_ns <= c.at_ns)
                    .filter(|s| s.close_ns.is_none_or(|close| s.open_ns + close >= c.at_ns))
                    .max_by_key(|s| s.open_ns)
                    .map(|s| s.session)
                    .ok_or(NO_SESSION),
            };
            CancelPlan {
                at_ns: c.at_ns,
                target,
            }
        })
        .collect();
    plans.sort_by_key(|p| p.at_ns);
    plans
}

/// The cancel keys of the replayed sessions that a cancel targets, by recorded session:
/// set while the session holds a connection, read by the sender. Shared by every replay
/// thread; touched only by targeted sessions, at a connect or a pool's borrow and give-back.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    held: Arc<Mutex<HashMap<u64, Held>>>,
    targets: Arc<HashSet<u64>>,
}

/// What a targeted session's connection is known by now.
#[derive(Debug, Clone, Copy)]
enum Held {
    Postgres(CancelKey),
    /// MySQL's connection id (the handshake's), which `KILL` names.
    Mysql(u32),
}

impl Keys {
    /// For the sessions the cancels target, and `more` (the KILLs' targets).
    pub fn for_plans(plans: &[CancelPlan], more: impl IntoIterator<Item = u64>) -> Keys {
        let mut targets: HashSet<u64> = plans.iter().filter_map(|p| p.target.ok()).collect();
        targets.extend(more);
        Keys {
            held: Arc::default(),
            targets: Arc::new(targets),
        }
    }

    /// The slot of `session`, when a cancel targets it.
    pub fn slot(&self, session: u64) -> Option<Slot> {
        self.targets.contains(&session).then(|| Slot {
            keys: self.clone(),
            session,
        })
    }

    fn get(&self, session: u64) -> Option<CancelKey> {
        match self.lock().get(&session) {
            Some(Held::Postgres(k)) => Some(*k),
            _ => None,
        }
    }

    /// The MySQL connection id `session` holds now.
    pub fn mysql_id(&self, session: u64) -> Option<u32> {
        match self.lock().get(&session) {
            Some(Held::Mysql(id)) => Some(*id),
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One targeted session's entry in [`Keys`].
#[derive(Debug, Clone)]
pub struct Slot {
    keys: Keys,
    session: u64,
}

impl Slot {
    /// The session now holds `s` (its own connection, or a pool's).
    pub fn hold(&self, s: &proto::Session) {
        let held = match s {
            proto::Session::Postgres(p) => p.cancel_key.map(Held::Postgres),
            proto::Session::Mysql(m) => Some(Held::Mysql(m.connection_id)),
        };
        if let Some(h) = held {
            self.keys.lock().insert(self.session, h);
        }
    }

    /// The session holds no connection any more.
    pub fn release(&self) {
        self.keys.lock().remove(&self.session);
    }
}

/// The recorded cancels and what became of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    pub recorded: u64,
    /// A CancelRequest sent to the target session's connection at the cancel's time.
    pub replayed: u64,
    /// Not sent, by reason.
    pub not_replayed: BTreeMap<String, u64>,
}

impl Counts {
    /// `o`'s counts added.
    pub fn merge(&mut self, o: Counts) {
        self.recorded += o.recorded;
        self.replayed += o.replayed;
        for (k, n) in o.not_replayed {
            *self.not_replayed.entry(k).or_default() += n;
        }
    }

    pub fn not(&mut self, why: impl Into<String>) {
        *self.not_replayed.entry(why.into()).or_default() += 1;
    }
}

/// Sends each cancel of `plans` at its time (`at` of its offset: `None` with no schedule)
/// to the key its target session holds then. Waits for `started` (the schedule's start);
/// a cancel still waiting when `ended` turns true (the sessions are done, or Ctrl-C)
/// is not replayed.
pub async fn send_all(
    plans: Vec<CancelPlan>,
    ep: &Endpoint,
    keys: &Keys,
    mut started: watch::Receiver<Option<Instant>>,
    at: impl Fn(Instant, u64) -> Option<Instant>,
    ended: watch::Receiver<bool>,
) -> Counts {
    let mut counts = Counts {
        recorded: plans.len() as u64,
        ..Counts::default()
    };
    if plans.is_empty() {
        return counts;
    }
    let start = match started.wait_for(|s| s.is_some()).await {
        Ok(s) => s.unwrap_or_else(Instant::now),
        Err(_) => {
            counts.not("the replay ended before its schedule started");
            return counts;
        }
    };
    let mut pending: FuturesUnordered<_> = plans
        .into_iter()
        .map(|p| {
            let due = at(start, p.at_ns);
            let mut ended = ended.clone();
            async move {
                let session = p.target?;
                let Some(due) = due else {
                    return Err("--speed max keeps no schedule to cancel at");
                };
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    _ = ended.wait_for(|e| *e) => return Err("the replay ended before the cancel's time"),
                }
                keys.get(session)
                    .ok_or("the target session held no connection at the cancel's time")
                    .map(|k| (session, k))
            }
        })
        .collect();
    let mut sends = FuturesUnordered::new();
    loop {
        tokio::select! {
            Some(due) = pending.next() => match due {
                Ok((_, key)) => sends.push(send_cancel(ep, key)),
                Err(why) => counts.not(why),
            },
            Some(sent) = sends.next() => match sent {
                Ok(()) => counts.replayed += 1,
                Err(e) => counts.not(format!("sending the CancelRequest: {e}")),
            },
            else => break,
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(session: u64, pid: u32, open_ns: u64, close_ns: Option<u64>) -> Target {
        Target {
            session,
            pid: Some(pid),
            open_ns,
            close_ns,
        }
    }

    #[test]
    fn a_cancel_targets_the_session_open_with_its_pid_then() {
        // Pid 7 served session 1, closed at 100; the server gave it to session 3 later.
        let sessions = [
            session(1, 7, 0, Some(100)),
            session(2, 8, 10, None),
            session(3, 7, 200, Some(500)),
        ];
        let cancels = [
            Recorded {
                at_ns: 300,
                pid: Some(7),
            },
            Recorded {
                at_ns: 50,
                pid: Some(7),
            },
            Recorded {
                at_ns: 150,
                pid: Some(7),
            },
            Recorded { at_ns: 60, pid: None },
            Recorded {
                at_ns: 70,
                pid: Some(9),
            },
        ];
        let plans = plan(&cancels, &sessions);
        let targets: Vec<_> = plans.iter().map(|p| (p.at_ns, p.target)).collect();
        assert_eq!(
            targets,
            vec![
                (50, Ok(1)),
                (60, Err(NO_PID)),
                (70, Err(NO_SESSION)),
                (150, Err(NO_SESSION)),
                (300, Ok(3)),
            ]
        );
    }

    /// Sends nothing (no session holds a key, or there is no schedule): the endpoint is
    /// never reached.
    fn not_sent(plans: Vec<CancelPlan>, scheduled: bool) -> Counts {
        let target = crate::targets::Target::parse("host=127.0.0.1 port=1 sslmode=disable").unwrap();
        let ep = Endpoint::new(target).unwrap();
        let keys = Keys::for_plans(&plans, []);
        let (_started, started_rx) = watch::channel(Some(Instant::now()));
        let (_ended, ended_rx) = watch::channel(false);
        let at =
            move |start: Instant, ns: u64| scheduled.then(|| start + std::time::Duration::from_nanos(ns));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(send_all(plans, &ep, &keys, started_rx, at, ended_rx))
    }

    #[test]
    fn a_cancel_whose_session_holds_no_connection_is_counted_not_sent() {
        let plans = vec![
            CancelPlan {
                at_ns: 1_000,
                target: Ok(4),
            },
            CancelPlan {
                at_ns: 2_000,
                target: Err(NO_SESSION),
            },
        ];
        let c = not_sent(plans.clone(), true);
        assert_eq!((c.recorded, c.replayed), (2, 0));
        assert_eq!(
            c.not_replayed,
            BTreeMap::from([
                (
                    "the target session held no connection at the cancel's time".to_string(),
                    1
                ),
                (NO_SESSION.to_string(), 1),
            ])
        );
        let c = not_sent(plans, false);
        assert_eq!(
            c.not_replayed["--speed max keeps no schedule to cancel at"], 1,
            "{c:?}"
        );
    }

    #[test]
    fn only_targeted_sessions_get_a_slot() {
        let plans = [
            CancelPlan {
                at_ns: 1,
                target: Ok(4),
            },
            CancelPlan {
                at_ns: 2,
                target: Err(NO_PID),
            },
        ];
        let keys = Keys::for_plans(&plans, []);
        assert!(keys.slot(4).is_some());
        assert!(keys.slot(5).is_none());
        assert_eq!(keys.get(4), None);
    }
}
