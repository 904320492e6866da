//! Why the kernel refuses to let the profiler inspect a process (read its maps or memory), in
//! words that say what to do about it.
//!
//! Reading `/proc/PID/maps` takes a ptrace "read" access check. It passes for a process of the
//! same user, or with CAP_SYS_PTRACE in the user namespace the process belongs to; then the
//! Linux security modules (SELinux, AppArmor, Yama, BPF LSM programs) may still refuse it.

use std::path::Path;

use crate::proc_files::ProcStatus;

/// CAP_SYS_PTRACE's bit in the capability sets of `/proc/PID/status`.
const CAP_SYS_PTRACE: u32 = 19;

/// What `/proc/<pid>/status` and `uid_map` tell of a process.
#[derive(Debug, Default)]
struct Process {
    name: String,
    effective_uid: Option<u32>,
    effective_caps: u64,
    uid_map: String,
}

impl Process {
    fn read(proc_root: &Path, pid: &str) -> Process {
        let status = ProcStatus::read(proc_root, pid).unwrap_or_default();
        Process {
            name: status.field("Name").unwrap_or_default().to_string(),
            effective_uid: status.effective_uid(),
            effective_caps: status.mask("CapEff").unwrap_or(0),
            uid_map: std::fs::read_to_string(proc_root.join(pid).join("uid_map"))
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Why process `pid` may not be inspected by this one, once the kernel has refused it: one
/// sentence, with what to do about it.
pub fn why_denied(proc_root: &Path, pid: u32) -> String {
    let me = Process::read(proc_root, "self");
    let target = Process::read(proc_root, &pid.to_string());
    let who = if target.name.is_empty() {
        format!("process {pid}")
    } else {
        format!("process {pid} ({})", target.name)
    };
    let may_ptrace = me.effective_caps & (1 << CAP_SYS_PTRACE) != 0;
    if !may_ptrace && target.effective_uid != me.effective_uid {
        return format!(
            "{who} belongs to another user and this process lacks CAP_SYS_PTRACE: run \
             joularcode-bpf as root, or give it CAP_SYS_PTRACE"
        );
    }
    if !me.uid_map.is_empty() && me.uid_map != target.uid_map && me.uid_map != "0 0 4294967295" {
        return format!(
            "{who} runs outside the user namespace this process runs in (a container's), where \
             its privileges do not reach: run joularcode-bpf on the host"
        );
    }
    if !may_ptrace {
        return format!(
            "{who} does not allow being inspected (it is not dumpable) and this process lacks \
             CAP_SYS_PTRACE: run joularcode-bpf as root, or give it CAP_SYS_PTRACE"
        );
    }
    let hint = if target.name.contains("java") {
        String::new()
    } else {
        format!(" (is {pid} the pid of a JVM?)")
    };
    format!(
        "the kernel's security policy (a Linux security module: SELinux, AppArmor, Yama or a BPF \
         LSM program) forbids inspecting {who}, even to root with CAP_SYS_PTRACE{hint}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(root: &Path, dir: &str, name: &str, uid: u32, caps: &str, uid_map: &str) {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let status = format!("Name:\t{name}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nCapEff:\t{caps}\n");
        std::fs::write(dir.join("status"), status).unwrap();
        std::fs::write(dir.join("uid_map"), uid_map).unwrap();
    }

    const HOST: &str = "         0          0 4294967295\n";
    const ROOT_CAPS: &str = "000001fffeffffff";

    #[test]
    fn root_refused_by_a_security_module() {
        let root = tempfile::tempdir().unwrap();
        process(root.path(), "self", "joularcode-bpf", 0, ROOT_CAPS, HOST);
        process(root.path(), "1", "process_api", 0, "000001ffffffffff", HOST);
        let why = why_denied(root.path(), 1);
        assert!(
            why.ends_with("forbids inspecting process 1 (process_api), even to root with CAP_SYS_PTRACE (is 1 the pid of a JVM?)"),
            "{why}"
        );
    }

    #[test]
    fn without_ptrace_another_users_process() {
        let root = tempfile::tempdir().unwrap();
        process(
            root.path(),
            "self",
            "joularcode-bpf",
            1000,
            "0000000000000000",
            HOST,
        );
        process(root.path(), "7", "java", 1001, "0000000000000000", HOST);
        assert!(why_denied(root.path(), 7).contains("lacks CAP_SYS_PTRACE"));
        process(root.path(), "8", "java", 1000, "0000000000000000", HOST);
        assert!(why_denied(root.path(), 8).contains("not dumpable"));
    }

    #[test]
    fn from_inside_a_user_namespace() {
        let root = tempfile::tempdir().unwrap();
        process(
            root.path(),
            "self",
            "joularcode-bpf",
            0,
            ROOT_CAPS,
            "0 100000 65536\n",
        );
        process(root.path(), "9", "java", 0, ROOT_CAPS, HOST);
        assert!(why_denied(root.path(), 9).contains("outside the user namespace"));
    }
}
