//! The memory mappings of a process, from `/proc/PID/maps`.

use std::path::PathBuf;

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The `rwxp` permission letters.
    pub perms: String,
    /// Offset of the mapping in its file.
    pub offset: u64,
    /// The file path as the target sees it (empty for anonymous mappings).
    pub path: String,
}

impl Mapping {
    /// Whether `addr` lies in the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// Where the mapped file can be opened from this process: `/proc/PID/map_files/START-END`,
    /// which works across mount namespaces and for deleted files.
    pub fn map_file(&self, pid: u32) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{pid}/map_files/{:x}-{:x}",
            self.start, self.end
        ))
    }
}

/// Parses the text of `/proc/PID/maps`; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    let mut parts = line.splitn(6, ' ');
    let (start, end) = parts.next()?.split_once('-')?;
    let perms = parts.next()?.to_string();
    let offset = u64::from_str_radix(parts.next()?, 16).ok()?;
    let _device = parts.next()?;
    let _inode = parts.next()?;
    let path = parts.next().unwrap_or("").trim_start().to_string();
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms,
        offset,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_and_anonymous_mappings() {
        let text = "7f0000000000-7f0000001000 r-xp 00002000 08:01 1234    /usr/lib/jvm/lib/server/libjvm.so\n\
                    7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n\
                    garbage\n";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].start, 0x7f00_0000_0000);
        assert_eq!(maps[0].offset, 0x2000);
        assert_eq!(maps[0].perms, "r-xp");
        assert_eq!(maps[0].path, "/usr/lib/jvm/lib/server/libjvm.so");
        assert_eq!(maps[1].path, "");
        assert!(maps[1].contains(0x7f00_0000_2fff));
        assert!(!maps[1].contains(0x7f00_0000_3000));
    }
}
