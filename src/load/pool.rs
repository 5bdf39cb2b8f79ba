//! The client-side connection pool of one worker thread (`--pool`): at most `size`
//! connections shared by the thread's clients, retired by lifetime and idleness as an
//! application's pool retires them. One per thread, so no locks: `RefCell` and a
//! `Notify` for a client waiting on a free connection.

use std::cell::RefCell;
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::proto::{Session, Timeline};

/// A pooled connection.
pub struct Pooled {
    pub id: u64,
    pub session: Session,
    created: Instant,
    last_used: Instant,
}

/// A client-side connection pool for the clients of one worker thread: at most `size`
/// connections; a connection older than `max_lifetime` is retired when it comes back,
/// and one idle longer than `idle_timeout` is closed instead of handed out.
pub struct Pool {
    pub size: usize,
    max_lifetime: Option<Duration>,
    idle_timeout: Option<Duration>,
    state: RefCell<PoolState>,
    freed: Notify,
}

struct PoolState {
    idle: Vec<Pooled>,
    /// Connections retired on their way back, closed by the next `acquire` (or at the
    /// end): `release` is not async, and a task to close them needs a LocalSet, which
    /// a replay thread does not have.
    closing: Vec<Session>,
    open: usize,
    next_id: u64,
}

impl Pool {
    pub fn new(size: usize, max_lifetime: Option<Duration>, idle_timeout: Option<Duration>) -> Pool {
        Pool {
            size: size.max(1),
            max_lifetime,
            idle_timeout,
            state: RefCell::new(PoolState {
                idle: Vec::new(),
                closing: Vec::new(),
                open: 0,
                next_id: 0,
            }),
            freed: Notify::new(),
        }
    }

    fn expired(&self, c: &Pooled, now: Instant) -> bool {
        self.max_lifetime.is_some_and(|l| now - c.created >= l)
            || self.idle_timeout.is_some_and(|t| now - c.last_used >= t)
    }

    /// A connection: an idle one, a new one (from `open`) when below `size`, or the next
    /// one freed.
    pub async fn acquire<F, Fut, E>(&self, open: F) -> Result<(Pooled, Option<Timeline>), E>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<(Session, Timeline), E>>,
    {
        loop {
            let now = Instant::now();
            let mut retired = Vec::new();
            let ready = {
                let mut st = self.state.borrow_mut();
                retired.append(&mut st.closing);
                let mut found = None;
                while let Some(c) = st.idle.pop() {
                    if self.expired(&c, now) {
                        st.open -= 1;
                        retired.push(c.session);
                    } else {
                        found = Some(c);
                        break;
                    }
                }
                match found {
                    Some(c) => Some(Ok(c)),
                    None if st.open < self.size => {
                        st.open += 1;
                        st.next_id += 1;
                        Some(Err(st.next_id))
                    }
                    None => None,
                }
            };
            // Closed here, not in a task of their own: a replay thread polls its
            // sessions as one future with no LocalSet to spawn on (spawning panicked a
            // pooled replay whose pool retired a connection), and a close is a
            // Terminate written into the socket's buffer and a shutdown: no wait on
            // the server.
            for s in retired {
                s.close().await;
            }
            match ready {
                Some(Ok(c)) => return Ok((c, None)),
                Some(Err(id)) => match open().await {
                    Ok((session, tl)) => {
                        let now = Instant::now();
                        return Ok((
                            Pooled {
                                id,
                                session,
                                created: now,
                                last_used: now,
                            },
                            Some(tl),
                        ));
                    }
                    Err(e) => {
                        self.state.borrow_mut().open -= 1;
                        self.freed.notify_one();
                        return Err(e);
                    }
                },
                None => self.freed.notified().await,
            }
        }
    }

    /// A connection opened before the clock (see `worker`), idle and young.
    pub fn add(&self, session: Session) {
        let now = Instant::now();
        let mut st = self.state.borrow_mut();
        st.open += 1;
        st.next_id += 1;
        let id = st.next_id;
        st.idle.push(Pooled {
            id,
            session,
            created: now,
            last_used: now,
        });
    }

    /// Gives a connection back; a broken or too-old one is closed instead.
    pub fn release(&self, mut c: Pooled) {
        let now = Instant::now();
        let retire = c.session.is_broken() || self.max_lifetime.is_some_and(|l| now - c.created >= l);
        {
            let mut st = self.state.borrow_mut();
            if retire {
                st.open -= 1;
                st.closing.push(c.session);
            } else {
                c.last_used = now;
                st.idle.push(c);
                drop(st);
                self.freed.notify_one();
                return;
            }
        }
        self.freed.notify_one();
    }

    /// Every idle connection, and any retired and not yet closed, for closing at the
    /// end.
    pub fn drain(&self) -> Vec<Session> {
        let mut st = self.state.borrow_mut();
        let mut out: Vec<Session> = st.idle.drain(..).map(|c| c.session).collect();
        out.append(&mut st.closing);
        out
    }
}
