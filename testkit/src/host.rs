//! What the security tests set up on the host as root, and always take down again, also when a
//! test fails: an unprivileged user, and a small tmpfs (a disk that fills up).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Runs `program args` as root and panics, with its stderr, unless it succeeds.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A system user made for one test (`useradd`), with a folder of its own; removed (`userdel`)
/// with what it left in /tmp when dropped. Drop its processes first.
#[derive(Debug)]
pub struct User {
    /// Its name.
    pub name: String,
    /// Its user id.
    pub uid: u32,
    /// Its group id.
    pub gid: u32,
    home: tempfile::TempDir,
}

impl User {
    /// Makes the user `jcs<tag><pid>` (useradd, retried while another process holds
    /// /etc/passwd's lock), and a folder it owns.
    pub fn create(tag: &str) -> User {
        let name = format!("jcs{tag}{}", std::process::id());
        let mut tries = 0;
        loop {
            let output = Command::new("useradd")
                .args(["--system", "--user-group", "--no-create-home"])
                .args(["--shell", "/usr/sbin/nologin", &name])
                .output()
                .expect("useradd runs (package passwd)");
            if output.status.success() {
                break;
            }
            tries += 1;
            assert!(
                tries < 20,
                "useradd {name} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        let id = |flag: &str| -> u32 {
            let output = Command::new("id")
                .args([flag, &name])
                .output()
                .expect("id runs");
            String::from_utf8_lossy(&output.stdout)
                .trim()
                .parse()
                .expect("a numeric id")
        };
        let (uid, gid) = (id("-u"), id("-g"));
        let home = tempfile::Builder::new()
            .prefix("jcsafe-home")
            .tempdir()
            .expect("a folder for the user");
        std::os::unix::fs::chown(home.path(), Some(uid), Some(gid)).expect("chown its folder");
        User {
            name,
            uid,
            gid,
            home,
        }
    }

    /// A folder the user owns (its JVMs' working folder).
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Makes `path` (not following a link there) belong to the user, as if the user had made it.
    pub fn own(&self, path: &Path) {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
            .unwrap_or_else(|e| panic!("lchown {}: {e}", path.display()));
    }

    /// A FIFO at `path`, the user's.
    pub fn mkfifo(&self, path: &Path) {
        run("mkfifo", &[path.to_str().expect("a UTF-8 path")]);
        self.own(path);
    }

    /// A symbolic link at `link` to `target`, the user's.
    pub fn symlink(&self, target: &Path, link: &Path) {
        std::os::unix::fs::symlink(target, link)
            .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
        self.own(link);
    }

    /// `command`, to run as the user in its folder.
    pub fn run_as(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        command.uid(self.uid).gid(self.gid).current_dir(self.home());
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(format!("/tmp/hsperfdata_{}", self.name));
        let status = Command::new("userdel").arg(&self.name).status();
        if !status.is_ok_and(|status| status.success()) {
            eprintln!("userdel {} failed: remove the user by hand", self.name);
        }
    }
}

/// A tmpfs of a given size mounted on a folder of its own, unmounted when dropped.
#[derive(Debug)]
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, such as `256k`).
    pub fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("jcsafe-tmpfs")
            .tempdir()
            .expect("a mount point");
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
                dir.path().to_str().expect("a UTF-8 path"),
            ],
        );
        Tmpfs { dir }
    }

    /// Where it is mounted.
    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let path = self.dir.path().to_string_lossy().into_owned();
        let status = Command::new("umount").args(["--lazy", &path]).status();
        if !status.is_ok_and(|status| status.success()) {
            eprintln!("umount {path} failed: unmount it by hand");
        }
    }
}
