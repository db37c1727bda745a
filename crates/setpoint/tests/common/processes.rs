//! The local processes a test's pods run as: finding them by command line, and killing what a
//! failed test left behind.

use std::process::Command;

/// Kills what a failed test may have left: the marked containers and the agent's shims.
pub struct Cleanup {
    pub marker: String,
    pub agent_root: String,
}

/// The processes whose command line holds `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(needle))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mut pids = processes_with(&self.marker);
        pids.extend(processes_with("agent-shim").into_iter().filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&self.agent_root))
        }));
        for pid in pids {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}
