//! Unit tests of `limits.rs`: conversions, parsing, and the v1 and v2 file writes and reads
//! against fake cgroup trees in temporary directories.

use super::*;

#[test]
fn cpu_conversions_should_follow_the_kubelet() {
    assert_eq!(cpu_shares(None), 2);
    assert_eq!(cpu_shares(Some(1)), 2);
    assert_eq!(cpu_shares(Some(250)), 256);
    assert_eq!(cpu_shares(Some(1000)), 1024);
    assert_eq!(cpu_shares(Some(1_000_000)), 262_144);
    assert_eq!(cpu_weight(2), 1);
    assert_eq!(cpu_weight(262_144), 10_000);
    assert_eq!(cpu_weight(1024), 39);
    assert_eq!(cpu_quota_us(200), 20_000);
    assert_eq!(cpu_quota_us(1), 1_000);
    assert_eq!(cpu_quota_us(1500), 150_000);
}

#[test]
fn v1_mounts_and_own_cgroup_should_be_parsed() {
    let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
33 25 0:29 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
34 25 0:30 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset";
    assert_eq!(
        v1_mounts(mountinfo),
        vec![
            (
                PathBuf::from("/sys/fs/cgroup/memory"),
                vec![Controller::Memory]
            ),
            (
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"),
                vec![Controller::Cpu, Controller::Cpuacct]
            ),
        ]
    );
    let own = "12:pids:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/\n0::/";
    assert_eq!(
        own_cgroup(own, "memory").as_deref(),
        Some("/process_api/abc")
    );
    assert_eq!(own_cgroup(own, "cpuacct").as_deref(), Some("/"));
    assert_eq!(own_cgroup(own, "hugetlb"), None);
}

fn fake(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default()
}

#[test]
fn v2_limits_should_enable_controllers_and_write_v2_files() {
    let tree = tempfile::tempdir().expect("tempdir");
    let mount = tree.path();
    fake(
        mount,
        &[
            ("cgroup.controllers", "cpuset cpu io memory hugetlb pids"),
            ("cgroup.subtree_control", ""),
        ],
    );
    let parent_dir = mount.join("setpoint").join("0123");
    fake(&mount.join("setpoint"), &[("cgroup.subtree_control", "")]);
    fake(&parent_dir, &[("cgroup.subtree_control", "")]);
    let parent = v2_parent(mount, &parent_dir).expect("v2 offers cpu and memory");
    assert_eq!(
        parent.controllers,
        vec![Controller::Cpu, Controller::Memory]
    );
    for dir in [mount, &mount.join("setpoint"), &parent_dir] {
        assert_eq!(read(dir, "cgroup.subtree_control"), "+cpu +memory");
    }
    let limits_parent = LimitParent {
        parents: vec![parent],
    };
    let tracking = RunCgroup {
        hierarchy: mount.to_owned(),
        dir: parent_dir.join("uid-app-0"),
    };
    let cgroups = limits_parent.run("uid", "app", 0, Some(&tracking));
    assert_eq!(cgroups.len(), 1);
    assert_eq!(
        cgroups[0].cgroup, tracking,
        "v2 limits go on the tracking cgroup"
    );
    assert!(
        limits_parent.run("uid", "app", 0, None).is_empty(),
        "no v2 limits without the tracking cgroup"
    );
    fake(
        &tracking.dir,
        &[("memory.swap.max", "max"), ("memory.oom.group", "0")],
    );
    let limits = RunLimits {
        memory_bytes: Some(64 << 20),
        cpu_limit_milli: Some(500),
        cpu_request_milli: Some(250),
        oom_score_adj: None,
        cgroups: cgroups.clone(),
    };
    assert_eq!(
        apply(&cgroups[0], &limits).expect("written"),
        Vec::<String>::new()
    );
    let dir = &tracking.dir;
    assert_eq!(read(dir, "memory.max"), (64u64 << 20).to_string());
    assert_eq!(read(dir, "memory.swap.max"), "0");
    assert_eq!(read(dir, "memory.oom.group"), "1");
    assert_eq!(read(dir, "cpu.max"), "50000 100000");
    assert_eq!(read(dir, "cpu.weight"), cpu_weight(256).to_string());

    fake(
        dir,
        &[
            ("memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"),
            ("cpu.stat", "usage_usec 1500\nuser_usec 1000\n"),
            ("memory.current", "10000000\n"),
            ("memory.stat", "anon 1\nfile 4000\ninactive_file 3000\n"),
        ],
    );
    assert_eq!(oom_kills(&cgroups), Some(1));
    assert_eq!(usage(&cgroups), (Some(1_500_000), Some(9_997_000)));
}

#[test]
fn v2_without_cpu_or_memory_should_not_be_used_for_limits() {
    // The hybrid layout of a machine whose v2 mount only has hugetlb.
    let tree = tempfile::tempdir().expect("tempdir");
    fake(tree.path(), &[("cgroup.controllers", "hugetlb")]);
    assert_eq!(v2_parent(tree.path(), &tree.path().join("setpoint")), None);
}

#[test]
fn v1_limits_should_write_v1_files_and_read_v1_counters() {
    let tree = tempfile::tempdir().expect("tempdir");
    let memory = tree.path().join("memory/run");
    let cpu = tree.path().join("cpu/run");
    let cpuacct = tree.path().join("cpuacct/run");
    fake(&memory, &[("memory.memsw.limit_in_bytes", "")]);
    fake(&cpu, &[]);
    fake(&cpuacct, &[]);
    let cg = |dir: &Path, controllers| LimitCgroup {
        version: CgroupVersion::V1,
        controllers,
        cgroup: RunCgroup {
            hierarchy: tree.path().to_owned(),
            dir: dir.to_owned(),
        },
    };
    let cgroups = vec![
        cg(&memory, vec![Controller::Memory]),
        cg(&cpu, vec![Controller::Cpu]),
        cg(&cpuacct, vec![Controller::Cpuacct]),
    ];
    let limits = RunLimits {
        memory_bytes: Some(1 << 30),
        cpu_limit_milli: Some(200),
        cpu_request_milli: None,
        oom_score_adj: None,
        cgroups: cgroups.clone(),
    };
    for c in &cgroups {
        assert!(apply(c, &limits).expect("written").is_empty());
    }
    // A quota the kernel refuses is a warning, not a failure (here: a directory in its way).
    let refused = tree.path().join("cpu/refused");
    std::fs::create_dir_all(refused.join("cpu.cfs_quota_us")).expect("mkdir");
    let refused_cg = cg(&refused, vec![Controller::Cpu]);
    let warnings = apply(&refused_cg, &limits).expect("not fatal");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(read(&refused, "cpu.shares"), "204");
    assert_eq!(read(&memory, "memory.limit_in_bytes"), "1073741824");
    assert_eq!(read(&memory, "memory.memsw.limit_in_bytes"), "1073741824");
    assert_eq!(read(&cpu, "cpu.cfs_period_us"), "100000");
    assert_eq!(read(&cpu, "cpu.cfs_quota_us"), "20000");
    assert_eq!(
        read(&cpu, "cpu.shares"),
        "204",
        "the request defaults to the limit"
    );
    fake(
        &memory,
        &[
            (
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
            ),
            ("memory.usage_in_bytes", "5000\n"),
            ("memory.stat", "cache 10\ntotal_inactive_file 1000\n"),
        ],
    );
    fake(&cpuacct, &[("cpuacct.usage", "123456789\n")]);
    assert_eq!(oom_kills(&cgroups), Some(2));
    assert_eq!(usage(&cgroups), (Some(123_456_789), Some(4000)));
    assert_eq!(oom_kills(&cgroups[1..]), None);
}
