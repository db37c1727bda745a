//! `setpoint debug panics`: panics several times, each caught as the server catches a panic in
//! a request handler, and prints the process's resident memory before and after, so that a
//! test (and a person) can see what reporting a panic costs. See `panic_report`.

use anyhow::Result;

use crate::cli::PanicsArgs;

/// The resident set size of this process in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Panics in one of several places (so later panics need code not symbolized before).
#[inline(never)]
fn fail(i: usize) {
    match i % 3 {
        0 => panic!("debug panic {i} (first place)"),
        1 => {
            let v: Vec<u8> = Vec::new();
            let _ = std::hint::black_box(&v)[i];
        }
        _ => panic!("debug panic {i} (third place)"),
    }
}

pub(crate) fn panics(args: &PanicsArgs) -> Result<()> {
    println!("rss_kib_before {}", rss_kib());
    for i in 0..args.count {
        let caught = std::thread::spawn(move || fail(i)).join();
        anyhow::ensure!(caught.is_err(), "panic {i} did not panic");
    }
    println!("rss_kib_after {}", rss_kib());
    Ok(())
}
