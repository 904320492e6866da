//! Outputs fed by the profiler's results, one file per format, and the files they go to.

pub mod flamegraph;
pub mod folded;
pub mod pprof;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// An output file named by a command-line option (`--flamegraph FILE`), created at once so that
/// a path that cannot be written is refused before any work, and written when the results are
/// ready. The profiler runs as root: a symbolic link at the path is refused, never followed.
#[derive(Debug)]
pub struct OutputFile {
    option: &'static str,
    path: PathBuf,
    file: File,
}

impl OutputFile {
    /// Creates (or empties) the file at `path` for the option `option` (`--flamegraph`).
    pub fn create(option: &'static str, path: &Path) -> Result<OutputFile, String> {
        let file = crate::files::create_no_follow(path).map_err(|error| {
            format!(
                "{option} {}: {error}. Give a path to a file that can be written (not a symbolic \
                 link).",
                path.display()
            )
        })?;
        Ok(OutputFile {
            option,
            path: path.to_path_buf(),
            file,
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the file's content with `write`.
    pub fn write(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), String> {
        let mut out = BufWriter::new(self.file);
        write(&mut out).and_then(|()| out.flush()).map_err(|error| {
            format!(
                "{} {}: cannot write it: {error}",
                self.option,
                self.path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_refused_and_the_option_named() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("out.svg");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = OutputFile::create("--flamegraph", &link).unwrap_err();
        assert!(error.starts_with("--flamegraph "), "{error}");
        assert!(error.contains("not a symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let file = OutputFile::create("--pprof", &dir.path().join("p")).unwrap();
        file.write(|out| out.write_all(b"x")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("p")).unwrap(), b"x");
    }
}
