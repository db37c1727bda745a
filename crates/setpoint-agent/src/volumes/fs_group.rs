//! `securityContext.fsGroup` on a pod's volumes, as the kubelet applies it to volumes that
//! support ownership management (emptyDir, configMap, secret, downwardAPI, projected,
//! persistentVolumeClaim; never hostPath): every file and directory is group-owned by the
//! fsGroup, directories get the setgid bit (new files inherit the group) and group access,
//! files group read (and write, unless the volume holds API data, which is read-only).

use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

/// Setgid bit of a directory's mode.
const SETGID: u32 = 0o2000;

/// Gives the tree at `root` to group `gid` (see the module doc); `read_only`: API data.
/// Symbolic links are re-owned, not followed.
pub(crate) fn apply(root: &Path, gid: u32, read_only: bool) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(root)?;
    std::os::unix::fs::lchown(root, None, Some(gid))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.mode() & 0o7777;
    let wanted = if meta.is_dir() {
        mode | SETGID | if read_only { 0o050 } else { 0o070 }
    } else {
        mode | if read_only { 0o040 } else { 0o060 }
    };
    if wanted != mode {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(wanted))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(root)? {
            apply(&entry?.path(), gid, read_only)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_should_be_group_owned_with_setgid_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("vol");
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        std::fs::write(root.join("sub/file"), "x").expect("write");
        std::fs::set_permissions(
            root.join("sub/file"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        std::os::unix::fs::symlink("sub/file", root.join("link")).expect("symlink");
        // Our own group works without root; another one needs it.
        let gid = if rustix::process::geteuid().is_root() {
            4321
        } else {
            rustix::process::getegid().as_raw()
        };
        apply(&root, gid, false).expect("applied");
        for path in [&root, &root.join("sub"), &root.join("sub/file")] {
            assert_eq!(std::fs::metadata(path).expect("meta").gid(), gid);
        }
        assert_eq!(
            std::fs::symlink_metadata(root.join("link"))
                .expect("meta")
                .gid(),
            gid
        );
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").mode() & 0o7777;
        assert_eq!(mode(&root.join("sub")) & 0o2070, 0o2070);
        assert_eq!(mode(&root.join("sub/file")), 0o660);
        apply(&root, gid, true).expect("again");
        assert_eq!(mode(&root.join("sub/file")), 0o660, "never removes access");
    }
}
