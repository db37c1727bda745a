//! A description of the machine a benchmark ran on (CPUs, memory, kernel, filesystem), read
//! from `/proc` on Linux. Anything that cannot be read is reported as unknown, never an error.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// The facts about a machine that explain its benchmark numbers.
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    /// Logical CPUs available to this process.
    pub(crate) cpus: Option<usize>,
    /// The CPU's model name, as `/proc/cpuinfo` gives it.
    pub(crate) cpu_model: Option<String>,
    /// Total memory in bytes.
    pub(crate) memory_bytes: Option<u64>,
    /// The kernel release (`uname -r`).
    pub(crate) kernel: Option<String>,
    /// The filesystem type and device holding the data directory, e.g. `ext4 (/dev/sda1 on /)`.
    pub(crate) filesystem: Option<String>,
    /// The 1, 5 and 15 minute load averages when the benchmark started: other work on the
    /// machine skews the results.
    pub(crate) load: Option<String>,
}

impl Machine {
    /// Describes this machine, and the filesystem that holds `data_dir`.
    pub(crate) fn describe(data_dir: &Path) -> Self {
        Machine {
            cpus: std::thread::available_parallelism().ok().map(usize::from),
            cpu_model: cpu_model(),
            memory_bytes: memory_bytes(),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_owned()),
            filesystem: filesystem_of(data_dir),
            load: fs::read_to_string("/proc/loadavg")
                .ok()
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
        }
    }

    /// One `label: value` pair per fact, in display order.
    pub(crate) fn facts(&self) -> Vec<(&'static str, String)> {
        let unknown = || "unknown".to_owned();
        vec![
            ("CPUs", self.cpus.map_or_else(unknown, |n| n.to_string())),
            ("CPU model", self.cpu_model.clone().unwrap_or_else(unknown)),
            (
                "memory",
                self.memory_bytes.map_or_else(unknown, |b| {
                    format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
                }),
            ),
            ("kernel", self.kernel.clone().unwrap_or_else(unknown)),
            (
                "data dir filesystem",
                self.filesystem.clone().unwrap_or_else(unknown),
            ),
            (
                "load average at start",
                self.load.clone().unwrap_or_else(unknown),
            ),
        ]
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let facts: Vec<String> = self
            .facts()
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        f.write_str(&facts.join(", "))
    }
}

/// The first `model name` in `/proc/cpuinfo`.
fn cpu_model() -> Option<String> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").ok()?;
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_owned())
    })
}

/// `MemTotal` from `/proc/meminfo`, in bytes.
fn memory_bytes() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The type and device of the mount that holds `path`: the mount point in `/proc/self/mounts`
/// that is the longest prefix of its canonical form.
fn filesystem_of(path: &Path) -> Option<String> {
    let path = path.canonicalize().ok()?;
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let device = fields.next()?;
            let mount_point = PathBuf::from(unescape_mount_field(fields.next()?));
            let fs_type = fields.next()?;
            path.starts_with(&mount_point)
                .then_some((mount_point, fs_type, device))
        })
        .max_by_key(|(mount_point, _, _)| mount_point.components().count())
        .map(|(mount_point, fs_type, device)| {
            format!("{fs_type} ({device} on {})", mount_point.display())
        })
}

/// Undoes the octal escapes (`\040` for a space) of a `/proc/self/mounts` field.
fn unescape_mount_field(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes.get(i + 1..i + 4).filter(|_| bytes[i] == b'\\');
        match escape
            .and_then(|digits| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok())
        {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_should_unescape_octal_sequences() {
        assert_eq!(unescape_mount_field(r"/mnt/my\040disk"), "/mnt/my disk");
        assert_eq!(unescape_mount_field(r"/plain"), "/plain");
        assert_eq!(unescape_mount_field(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn describe_should_find_the_filesystem_of_an_existing_dir() {
        let machine = Machine::describe(Path::new("/"));
        if Path::new("/proc/self/mounts").exists() {
            assert!(machine.filesystem.is_some(), "{machine}");
        }
    }
}
