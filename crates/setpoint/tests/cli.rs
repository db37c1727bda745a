//! The `setpoint` binary's own commands, run as a user runs them:
//! - `setpoint simulate autoscaling` prints the table for the seed it was given and writes one
//!   SVG per scenario plus the results table;
//! - a panic is reported with its message and place, and at most one backtrace per process.

use std::process::Command;

#[test]
fn simulate_autoscaling_should_print_measures_and_write_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plots");
    let output = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["simulate", "autoscaling", "--seed", "3", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("seed 3;"), "{stdout}");
    for scenario in ["step-up", "step-down", "small-step"] {
        for controller in ["hpa", "pid"] {
            assert!(
                stdout.contains(&format!("| {scenario} | {controller} |")),
                "{scenario}/{controller} missing:\n{stdout}"
            );
        }
        let svg = std::fs::read_to_string(out.join(format!("{scenario}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("seed 3"),
            "{scenario}.svg"
        );
    }
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("| step-up | pid |"));
}

#[test]
fn simulate_autoscaling_should_refuse_a_bad_seed() {
    let output = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["simulate", "autoscaling", "--seed", "minus-one"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--seed"));
}

// Regression (issue 14.16): after the first panic under RUST_BACKTRACE=1 the server's RSS grew
// by about 125 MiB (symbolizing the backtrace caches the binary's debug tables for good), and
// by more with each panic elsewhere, never coming down. Now one backtrace per process at most.
#[test]
fn panics_should_each_be_reported_but_only_the_first_with_a_backtrace() {
    for (backtrace, expected_backtraces) in [("1", 1), ("0", 0)] {
        let output = Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .args(["debug", "panics", "--count", "4"])
            .env("RUST_BACKTRACE", backtrace)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert_eq!(stderr.matches("panicked at").count(), 4, "{stderr}");
        for i in [0, 2] {
            assert!(stderr.contains(&format!("debug panic {i} ")), "{stderr}");
        }
        assert_eq!(
            stderr.matches("stack backtrace:").count(),
            expected_backtraces,
            "RUST_BACKTRACE={backtrace}: {stderr}"
        );
        if expected_backtraces == 1 {
            assert_eq!(stderr.matches("backtrace left out").count(), 3, "{stderr}");
        }
    }
}
