//! Outputs fed by the profiler's results, one file per format, the files they go to, and the
//! standard output.

pub mod flamegraph;
pub mod folded;
pub mod pprof;
pub mod stdout;

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use joularcode_core::output::path::{self, Mode};
use thiserror::Error;

/// An output file named by a command-line option (`--flamegraph FILE`), checked at once so that
/// a path that cannot be written is refused before any work, and written when the results are
/// ready: until then a file already there is left as it is. The profiler runs as root: no
/// symbolic link on the path is followed ([`path`], docs/security.md).
#[derive(Debug)]
pub struct OutputFile {
    option: &'static str,
    path: PathBuf,
}

/// Why an output file was refused or could not be written; the message starts with the option
/// and the path.
#[derive(Debug, Error)]
pub enum OutputError {
    /// The path cannot be used.
    #[error("{option} {}: {reason}", path.display())]
    Refused {
        /// The option that named it.
        option: &'static str,
        /// The path.
        path: PathBuf,
        /// Why, and what to give instead.
        reason: String,
    },
    /// Writing the file failed.
    #[error("{option} {}: cannot write it: {source}", path.display())]
    Write {
        /// The option that named it.
        option: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Writing on the standard output failed.
    #[error("{0}")]
    Stdout(#[from] stdout::StdoutError),
}

impl OutputFile {
    /// The file at `path` for the option `option` (`--flamegraph`), if it can be written: no
    /// symbolic link on its path, a regular file with no other link if it exists
    /// ([`path::check_file`]), in a folder that exists and can be written.
    pub fn create(option: &'static str, path: &Path) -> Result<OutputFile, OutputError> {
        let refuse = |reason: String| OutputError::Refused {
            option,
            path: path.to_path_buf(),
            reason,
        };
        path::check_file(path).map_err(|error| refuse(error.to_string()))?;
        let folder = match path.parent() {
            Some(folder) if !folder.as_os_str().is_empty() => folder,
            _ => Path::new("."),
        };
        nix::unistd::access(folder, nix::unistd::AccessFlags::W_OK).map_err(|error| {
            refuse(format!(
                "its folder {} cannot be written ({}). Give a path to a file that can be written.",
                folder.display(),
                error.desc()
            ))
        })?;
        Ok(OutputFile {
            option,
            path: path.to_path_buf(),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates (or empties) the file, never through a symbolic link, and writes its content with
    /// `write`.
    pub fn write(
        self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), OutputError> {
        let written = path::create_file(&self.path, Mode::Truncate).and_then(|file| {
            let mut out = BufWriter::new(file);
            write(&mut out)?;
            out.flush()
        });
        written.map_err(|source| OutputError::Write {
            option: self.option,
            path: self.path,
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_refused_and_a_file_there_kept_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("out.svg");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = OutputFile::create("--flamegraph", &link)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("--flamegraph "), "{error}");
        assert!(error.contains("is a symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let error = OutputFile::create("--pprof", dir.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a regular file"), "{error}");
        let error = OutputFile::create("--pprof", &dir.path().join("no/such/p"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("cannot be written"), "{error}");

        let file = OutputFile::create("--pprof", &target).unwrap();
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "keep",
            "until written"
        );
        file.write(|out| out.write_all(b"x")).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"x");
        assert!(OutputFile::create("--pprof", Path::new("relative.pb.gz")).is_ok());
    }
}
