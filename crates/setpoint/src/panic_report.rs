//! How the binary reports a panic. The server catches a panic in a request handler or a
//! reconcile and goes on serving, so a report must not cost the process for the rest of its
//! life: printing a symbolized backtrace makes the standard library parse the binary's debug
//! line tables and keep them cached, measured at about 125 MiB more resident memory after the
//! first one (more for each panic in code not symbolized before), never given back.
//!
//! So every panic prints its thread, location and message, as the standard hook does, and a
//! backtrace is symbolized at most once per process: for the first panic, when
//! `RUST_BACKTRACE` asks for backtraces. Later panics say that theirs was left out and why.

use std::backtrace::Backtrace;
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a backtrace has been symbolized and printed.
static SYMBOLIZED: AtomicBool = AtomicBool::new(false);

/// Replaces the standard panic hook with [`report`].
pub(crate) fn install() {
    std::panic::set_hook(Box::new(report));
}

fn wants_backtrace() -> bool {
    std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0")
}

/// Prints one panic to stderr.
fn report(info: &PanicHookInfo<'_>) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
        .unwrap_or("Box<dyn Any>");
    let location = info
        .location()
        .map_or_else(|| "<unknown>".to_owned(), ToString::to_string);
    let note = if !wants_backtrace() {
        "note: run with `RUST_BACKTRACE=1` for a backtrace of the first panic".to_owned()
    } else if SYMBOLIZED.swap(true, Ordering::SeqCst) {
        "note: backtrace left out: one is printed per process (the first panic's), since \
         symbolizing keeps the binary's debug tables in memory for good"
            .to_owned()
    } else {
        format!("stack backtrace:\n{}", Backtrace::force_capture())
    };
    eprintln!("thread '{name}' panicked at {location}:\n{message}\n{note}");
}
