//! The replay's stop (Ctrl-C) as one replay thread's sessions see it.
//!
//! The stop is a watch channel turned true. A session asks "this, unless stopped" of
//! every wait it makes: its time, its connect, each request's answer. Selecting on the
//! watch's wait there made a waiter, registered it under the channel's lock and dropped
//! it again, once a request: 1,225 of the 8,568 instructions a select-only statement
//! cost a replay thread under callgrind (issue 56). Here each thread waits on the
//! watch once, in a task of its own ([`Stop::follow`]), and sets a flag its sessions
//! read; a session waiting when it is set is woken through the waker it left, which it
//! leaves once (a session is one future of its thread's set: its waker does not change
//! from poll to poll).

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use tokio::sync::watch;

/// One thread's stop: the flag and the wakers of its sessions waiting.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    stopped: AtomicBool,
    waiting: Mutex<Slots>,
}

/// The sessions' wakers, a slot each while it lives.
#[derive(Debug, Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Stop {
    /// Sets the stop once `rx` turns true (a sender gone never stops the replay).
    pub async fn follow(self, mut rx: watch::Receiver<bool>) {
        if rx.wait_for(|s| *s).await.is_ok() {
            self.set();
        }
    }

    /// Stops every session of the thread: each waiting is woken and sees the flag.
    pub fn set(&self) {
        self.0.stopped.store(true, Ordering::Release);
        let wakers: Vec<Waker> = {
            let mut slots = self.0.waiting.lock().unwrap_or_else(|e| e.into_inner());
            slots.wakers.iter_mut().filter_map(Option::take).collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// A session's view of the stop.
    pub fn watch(&self) -> Watch {
        Watch {
            stop: self.clone(),
            slot: None,
        }
    }
}

/// A session's view of its thread's stop. A clone is a new view, with no waker left.
#[derive(Debug)]
pub struct Watch {
    stop: Stop,
    /// The slot of the waker this session left, and the waker.
    slot: Option<(usize, Waker)>,
}

impl Clone for Watch {
    fn clone(&self) -> Watch {
        self.stop.watch()
    }
}

impl Watch {
    /// Sets this view's stop once `rx` turns true ([`Stop::follow`]).
    pub fn follow(&self, rx: watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
        self.stop.clone().follow(rx)
    }

    pub fn is_set(&self) -> bool {
        self.stop.0.stopped.load(Ordering::Acquire)
    }

    /// `f`, unless the stop is set first (then `f` is dropped where it waits).
    pub async fn or<F: Future>(&mut self, f: F) -> Option<F::Output> {
        let mut f = pin!(f);
        poll_fn(|cx| {
            if self.is_set() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            self.leave(cx.waker());
            // Set between the first look and the waker left: `set` may have found no
            // waker to wake, so look again.
            if self.is_set() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
    }

    /// Leaves `waker` for `set` to wake, unless it is the one left already.
    fn leave(&mut self, waker: &Waker) {
        if matches!(&self.slot, Some((_, w)) if w.will_wake(waker)) {
            return;
        }
        let mut slots = self.stop.0.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let i = match &self.slot {
            Some((i, _)) => *i,
            None => match slots.free.pop() {
                Some(i) => i,
                None => {
                    slots.wakers.push(None);
                    slots.wakers.len() - 1
                }
            },
        };
        slots.wakers[i] = Some(waker.clone());
        self.slot = Some((i, waker.clone()));
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some((i, _)) = self.slot.take() {
            let mut slots = self.stop.0.waiting.lock().unwrap_or_else(|e| e.into_inner());
            slots.wakers[i] = None;
            slots.free.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Context, Wake};

    /// A waker that counts its wakes.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiting_session_is_woken_once_and_sees_the_stop() {
        let stop = Stop::default();
        let mut watch = stop.watch();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = Box::pin(watch.or(std::future::pending::<()>()));
        // Polled many times with the same waker: left once.
        for _ in 0..3 {
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(stop.0.waiting.lock().unwrap().wakers.iter().flatten().count(), 1);
        stop.set();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken by the stop");
        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn what_ends_first_wins_and_a_gone_session_leaves_no_waker() {
        let stop = Stop::default();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        {
            let mut watch = stop.watch();
            let mut ready = Box::pin(watch.or(async { 7 }));
            assert_eq!(ready.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
            drop(ready);
            let mut waiting = Box::pin(watch.or(std::future::pending::<()>()));
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
        }
        let slots = stop.0.waiting.lock().unwrap();
        assert_eq!((slots.wakers.iter().flatten().count(), slots.free.len()), (0, 1));
        drop(slots);
        stop.set();
        let mut watch = stop.watch();
        let mut late = Box::pin(watch.or(async { 7 }));
        assert_eq!(
            late.as_mut().poll(&mut cx),
            Poll::Ready(None),
            "stopped before it began"
        );
    }

    #[tokio::test]
    async fn follows_the_watch_and_not_a_sender_gone() {
        let (tx, rx) = watch::channel(false);
        let stop = Stop::default();
        let follow = tokio::spawn(stop.clone().follow(rx));
        tx.send_replace(true);
        follow.await.unwrap();
        assert!(stop.watch().is_set());
        let (tx, rx) = watch::channel(false);
        let stop = Stop::default();
        drop(tx);
        stop.clone().follow(rx).await;
        assert!(!stop.watch().is_set(), "a sender gone is no stop");
    }
}
