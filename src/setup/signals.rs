//! The Ctrl-C channel: the first Ctrl-C (or SIGTERM) stops a run cleanly, the second
//! quits at once.

use tokio::sync::watch;

/// A channel that turns true on the first Ctrl-C (or SIGTERM), so a run can stop cleanly
/// and still report.
pub fn stop_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term_fut = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        let first = async {
            match interrupt.as_mut() {
                Some(i) => {
                    i.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = first => {}
            _ = term_fut => {}
        }
        eprintln!("\nstopping: reporting what was measured so far (Ctrl-C again to quit at once)");
        let _ = tx.send(true);
        // Once a handler is installed the default action is gone, and tokio's handler is
        // only read when the runtime is polled: a teardown that blocks the runtime (a
        // sandbox waiting for its servers to stop) would never see a second Ctrl-C. So
        // the second one goes to a plain handler that quits at once: finished
        // repetitions are already in the store, and a sandbox's watchdog removes its
        // servers and directory when this process ends.
        // SAFETY: `quit_now` only calls the async-signal-safe write(2) and _exit(2).
        unsafe { libc::signal(libc::SIGINT, quit_now as *const () as libc::sighandler_t) };
    });
    rx
}

/// The second Ctrl-C: says so and ends the process with 130, from signal context.
extern "C" fn quit_now(_: libc::c_int) {
    const MSG: &[u8] = b"\nsecond Ctrl-C: quitting now; the sandbox's watchdog removes what is left\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::_exit(130);
    }
}
