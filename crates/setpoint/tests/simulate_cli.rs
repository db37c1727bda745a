//! `setpoint simulate autoscaling` end to end: the binary prints the table for the seed it
//! was given and writes one SVG per scenario plus the results table.

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
