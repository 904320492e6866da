//! The standard output, the one way every command prints on it ([`print`]): `print!` panics
//! when its reader is gone (`report | head -1`) or its disk is full (`report > /dev/full`),
//! where this returns an error, which the command turns into its one line and a non-zero exit.
//! SIGPIPE is ignored by Rust programs, so a closed pipe is an error here, not the end of the
//! process.

use std::io::{self, Write};

/// Writing on the standard output failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot write on the standard output: {0}. Its reader ended, or its disk is full: read \
     the whole output, or send it to a file with room."
)]
pub struct StdoutError(#[from] io::Error);

/// Writes `bytes` on the standard output and flushes it.
pub fn print(bytes: impl AsRef<[u8]>) -> Result<(), StdoutError> {
    write_flushed(&mut io::stdout().lock(), bytes.as_ref())
}

/// Writes `bytes` to `out` and flushes it.
fn write_flushed(out: &mut impl Write, bytes: &[u8]) -> Result<(), StdoutError> {
    out.write_all(bytes)?;
    Ok(out.flush()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    #[test]
    fn a_full_disk_and_a_closed_pipe_are_errors_of_one_line() {
        let mut full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let error = write_flushed(&mut full, b"energy\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("No space left on device"), "{error}");
        let (reader, writer) = nix::unistd::pipe().unwrap();
        drop(reader);
        let error = write_flushed(&mut std::fs::File::from(writer), b"energy\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("Broken pipe"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }
}
