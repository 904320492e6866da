//! What the sampler needs from the machine before it loads anything: a recent enough kernel
//! that describes its types (BTF), the right to load BPF programs and open perf events, and the
//! host's PID namespace. Each failure is one line that says how to fix it.

use std::fs;
use std::io::Read;
use std::path::Path;

use super::SamplerError;
use crate::proc_files::ProcStatus;

/// Where the kernel tells its release.
const OS_RELEASE: &str = "/proc/sys/kernel/osrelease";
/// Where the kernel gives its BTF, which the programs' `tp_btf` tracepoints and CO-RE need.
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
/// The first bytes of BTF data: the magic 0xEB9F, in the machine's byte order.
const BTF_MAGIC: [u8; 2] = 0xEB9F_u16.to_ne_bytes();
/// The oldest kernel that runs the sampler: bpf_task_pt_regs came in 5.15 (the ring buffer in
/// 5.8; bpf_loop, used from 5.17 on, is replaced by a bounded loop before).
pub const MIN_KERNEL: (u32, u32) = (5, 15);

/// The inode of the host's (the initial) PID namespace, which the kernel fixes
/// (`PROC_PID_INIT_INO`).
const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The `major.minor` of a kernel release such as `6.18.44-fc-v669`.
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether the running kernel is `version` (major, minor) or newer; false if it cannot be read.
pub fn kernel_is_at_least(version: (u32, u32)) -> bool {
    running_kernel().is_ok_and(|(_, running)| running >= version)
}

/// The running kernel's release, as [`OS_RELEASE`] gives it, and its `major.minor`.
fn running_kernel() -> Result<(String, (u32, u32)), SamplerError> {
    let release = fs::read_to_string(OS_RELEASE)
        .map_err(|e| SamplerError::Kernel(format!("cannot read {OS_RELEASE}: {e}")))?;
    let version = parse_release(&release).ok_or_else(|| {
        SamplerError::Kernel(format!(
            "{OS_RELEASE} holds {:?}, not a kernel release",
            release.trim()
        ))
    })?;
    Ok((release, version))
}

/// Fails, naming the version needed, when the running kernel is older than [`MIN_KERNEL`].
pub fn check_kernel() -> Result<(), SamplerError> {
    let (release, version) = running_kernel()?;
    if version < MIN_KERNEL {
        return Err(SamplerError::Kernel(format!(
            "Linux {} is too old: joularcode-bpf needs Linux {}.{} or newer (for bpf_task_pt_regs)",
            release.trim(),
            MIN_KERNEL.0,
            MIN_KERNEL.1
        )));
    }
    check_btf()
}

/// What is wrong with the kernel's BTF, given the first bytes of [`VMLINUX_BTF`]; `None` when
/// they are BTF's.
fn btf_problem(header: &[u8]) -> Option<&'static str> {
    match header {
        [] => Some("is empty"),
        _ if header.starts_with(&BTF_MAGIC) => None,
        _ => Some("does not hold BTF"),
    }
}

/// Fails when the kernel does not give its BTF, before libbpf tries (and says so in several
/// lines of its own, ending in an I/O error).
fn check_btf() -> Result<(), SamplerError> {
    let mut header = Vec::with_capacity(BTF_MAGIC.len());
    let problem = match fs::File::open(VMLINUX_BTF)
        .and_then(|file| file.take(BTF_MAGIC.len() as u64).read_to_end(&mut header))
    {
        Ok(_) => btf_problem(&header).map(str::to_owned),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("is missing".to_owned()),
        Err(e) => Some(format!("cannot be read: {e}")),
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(SamplerError::Kernel(format!(
            "{VMLINUX_BTF} {problem}: the BPF programs need the kernel's BTF, which a kernel \
             built with CONFIG_DEBUG_INFO_BTF=y gives"
        ))),
    }
}

/// Fails when this process runs in a PID namespace of its own (a container without
/// `--pid=host`, `unshare --pid`): the BPF programs see the host's pids, and the processes this
/// process sees (and launches) have other pids there, so every JVM would get no sample.
pub fn check_pid_namespace() -> Result<(), SamplerError> {
    use std::os::unix::fs::MetadataExt;
    let namespace = fs::metadata("/proc/self/ns/pid")
        .map_err(|e| SamplerError::PidNamespace(format!("cannot read /proc/self/ns/pid: {e}")))?;
    if namespace.ino() == INITIAL_PID_NAMESPACE {
        return Ok(());
    }
    Err(SamplerError::PidNamespace(
        "this process runs in a PID namespace of its own (a container without --pid=host, or \
         unshare --pid), where the BPF sampler cannot tell which pids are its processes: run \
         joularcode-bpf in the host's PID namespace"
            .into(),
    ))
}

/// The capabilities missing from an effective set (the `CapEff` hex mask of /proc/PID/status):
/// empty if it has CAP_SYS_ADMIN, or both CAP_BPF and CAP_PERFMON.
pub fn missing_capabilities(effective: u64) -> Vec<&'static str> {
    let has = |cap: u32| effective & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) {
        return Vec::new();
    }
    [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|&(cap, _)| !has(cap))
        .map(|(_, name)| name)
        .collect()
}

/// Fails with one line naming what is needed when this process may not load BPF programs and
/// open system-wide perf events.
pub fn check_privileges() -> Result<(), SamplerError> {
    let status = ProcStatus::read(Path::new("/proc"), "self")
        .map_err(|e| SamplerError::Privileges(format!("cannot read /proc/self/status: {e}")))?;
    let effective = status
        .mask("CapEff")
        .ok_or_else(|| SamplerError::Privileges("/proc/self/status has no CapEff line".into()))?;
    let missing = missing_capabilities(effective);
    if missing.is_empty() {
        return Ok(());
    }
    Err(SamplerError::Privileges(format!(
        "loading the BPF sampler needs root, or the capabilities CAP_BPF and CAP_PERFMON (missing: {}): run it with sudo",
        missing.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kernel_releases() {
        assert_eq!(parse_release("6.18.44-fc-v669\n"), Some((6, 18)));
        assert_eq!(parse_release("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(parse_release("6.1"), Some((6, 1)));
        assert_eq!(parse_release("x.y"), None);
        assert!(parse_release("5.14.21").expect("a release") < MIN_KERNEL);
        assert!(parse_release("5.15.0").expect("a release") >= MIN_KERNEL);
    }

    #[test]
    fn tells_btf_from_an_empty_or_foreign_file() {
        assert_eq!(btf_problem(&BTF_MAGIC), None);
        assert_eq!(btf_problem(&[]), Some("is empty"));
        assert_eq!(btf_problem(b"\x7fELF"), Some("does not hold BTF"));
        // The running kernel's, which the end-to-end tests load programs with
        assert!(check_btf().is_ok(), "{:?}", check_btf());
    }

    #[test]
    fn names_the_missing_capabilities() {
        assert_eq!(missing_capabilities(0), vec!["CAP_BPF", "CAP_PERFMON"]);
        assert_eq!(missing_capabilities(1 << CAP_BPF), vec!["CAP_PERFMON"]);
        assert!(missing_capabilities((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_empty());
        assert!(missing_capabilities(1 << CAP_SYS_ADMIN).is_empty());
        assert!(missing_capabilities(0x1ff_ffff_ffff).is_empty());
    }
}
