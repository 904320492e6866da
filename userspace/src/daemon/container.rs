//! The container a process runs in, from its cgroup path (`/proc/PID/cgroup`): the container id
//! that Docker, containerd, CRI-O and Podman put in the names of their cgroups, and the
//! Kubernetes pod UID when the path shows one.
//!
//! The runtimes name a container's cgroup after its 64-hex-digit id, bare (`/docker/<id>`,
//! `/kubepods/burstable/pod<uid>/<id>`) or as a systemd scope (`docker-<id>.scope`,
//! `cri-containerd-<id>.scope`, `crio-<id>.scope`, `libpod-<id>.scope`); the kubelet names a
//! pod's cgroup `pod<uid>` (cgroupfs driver) or `kubepods-<class>-pod<uid_with_underscores>.slice`
//! (systemd driver).

use std::path::Path;

use crate::discovery::{cgroup_paths, read_cgroup_file};

/// Where a process runs: both empty on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Container {
    /// The container id (64 hex digits), or empty.
    pub id: String,
    /// The Kubernetes pod UID, or empty.
    pub pod_uid: String,
}

/// Prefixes of the systemd scopes of container runtimes, before the container id.
const SCOPE_PREFIXES: &[&str] = &[
    "docker-",
    "cri-containerd-",
    "containerd-",
    "crio-",
    "libpod-",
];

impl Container {
    /// The container of process `pid`, read from `proc_root/PID/cgroup`; empty when it cannot be
    /// read (the process has ended) or the process runs on the host. Bytes that are not UTF-8
    /// name no container.
    pub fn of(proc_root: &Path, pid: u32) -> Container {
        read_cgroup_file(proc_root, pid)
            .map(|cgroup| Container::parse(&cgroup))
            .unwrap_or_default()
    }

    /// The container named by the lines of a `/proc/PID/cgroup` file (v1 or v2): the first line
    /// whose path names one.
    pub fn parse(cgroup: &str) -> Container {
        let mut found = Container::default();
        for path in cgroup_paths(cgroup) {
            for part in path.split('/') {
                if found.id.is_empty() {
                    if let Some(id) = container_id(part) {
                        found.id = id.to_string();
                    }
                }
                if found.pod_uid.is_empty() {
                    if let Some(uid) = pod_uid(part) {
                        found.pod_uid = uid;
                    }
                }
            }
            if !found.id.is_empty() {
                break;
            }
        }
        found
    }
}

/// The container id a cgroup path component names, if it names one.
fn container_id(part: &str) -> Option<&str> {
    let name = part.strip_suffix(".scope").unwrap_or(part);
    let id = SCOPE_PREFIXES
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))
        .unwrap_or(name);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The pod UID a cgroup path component names (`pod<uid>`, or the systemd driver's
/// `kubepods-<class>-pod<uid with _>.slice`), with dashes.
fn pod_uid(part: &str) -> Option<String> {
    let name = part.strip_suffix(".slice").unwrap_or(part);
    let (_, uid) = name.rsplit_once("pod")?;
    let uid = uid.replace('_', "-");
    let groups: Vec<&str> = uid.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
    let uid_like = lengths == [8, 4, 4, 4, 12]
        && groups
            .iter()
            .all(|group| group.bytes().all(|b| b.is_ascii_hexdigit()));
    uid_like.then_some(uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f9c2b1a0d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";
    const UID: &str = "2c3f1e4a-5b6d-4e7f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn every_runtime_names_its_containers() {
        let uid_ = UID.replace('-', "_");
        for (cgroup, pod) in [
            // Docker, cgroup v1 and v2 (systemd driver)
            (format!("12:memory:/docker/{ID}\n0::/docker/{ID}\n"), ""),
            (format!("0::/system.slice/docker-{ID}.scope\n"), ""),
            // Podman
            (format!("0::/machine.slice/libpod-{ID}.scope/container\n"), ""),
            (format!("0::/libpod_parent/libpod-{ID}\n"), ""),
            // containerd under Kubernetes, cgroupfs and systemd drivers
            (format!("0::/kubepods/burstable/pod{UID}/{ID}\n"), UID),
            (
                format!(
                    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{ID}.scope\n"
                ),
                UID,
            ),
            // CRI-O
            (
                format!(
                    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid_}.slice/crio-{ID}.scope\n"
                ),
                UID,
            ),
        ] {
            let container = Container::parse(&cgroup);
            assert_eq!(container.id, ID, "{cgroup}");
            assert_eq!(container.pod_uid, pod, "{cgroup}");
        }
    }

    #[test]
    fn the_host_and_other_cgroups_name_no_container() {
        for cgroup in [
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "0::/\n",
            "0::/system.slice/docker-notanid.scope\n",
            "garbage without colons\n",
            "",
        ] {
            assert_eq!(Container::parse(cgroup), Container::default(), "{cgroup}");
        }
    }
}
