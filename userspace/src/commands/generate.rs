//! `joularcode-bpf generate DIR` (hidden from the help): the manual pages and the shell
//! completions, generated from the command line's own definition ([`crate::cli`]), for the
//! packages (`scripts/package.sh`). It writes, through [`OutputDir`] (no link followed):
//!
//! - `DIR/man/joularcode-bpf.1` and a page per subcommand (`joularcode-bpf-record.1`, ...);
//! - `DIR/completions/joularcode-bpf.bash`, `_joularcode-bpf` (zsh), `joularcode-bpf.fish`.

use clap::CommandFactory;
use clap_complete::Shell;
use joularcode_core::output::path::{Mode, OutputDir};

use crate::cli::{Cli, GenerateArgs, VERSION};

/// The name the pages and completions are for.
const NAME: &str = "joularcode-bpf";

/// Runs `generate`: writes the pages and completions; returns 0, or the error to print.
pub fn run(args: &GenerateArgs) -> Result<i32, String> {
    // Built, each subcommand is displayed as `joularcode-bpf-<name>`, its page's title
    let mut cli = Cli::command().bin_name(NAME).disable_help_subcommand(true);
    cli.build();
    let shown: Vec<clap::Command> = cli
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .cloned()
        .collect();
    let mut pages = vec![(format!("{NAME}.1"), page(cli.clone())?)];
    for sub in &shown {
        let name = sub.get_display_name().unwrap_or(sub.get_name());
        pages.push((format!("{name}.1"), page(sub.clone())?));
    }
    // clap_complete offers hidden subcommands too: the completions are of the shown ones only
    let mut cli = clap::Command::new(NAME).version(VERSION).subcommands(shown);
    let completions = [
        (Shell::Bash, format!("{NAME}.bash")),
        (Shell::Zsh, format!("_{NAME}")),
        (Shell::Fish, format!("{NAME}.fish")),
    ]
    .map(|(shell, file)| {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut cli, NAME, &mut text);
        (file, text)
    });
    write_all(args, "man", pages)?;
    write_all(args, "completions", completions)?;
    Ok(0)
}

/// The manual page of `command`, in roff.
fn page(command: clap::Command) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut text)
        .map_err(|e| format!("cannot render a manual page: {e}"))?;
    Ok(text)
}

/// Writes each (name, bytes) of `files` into the folder `sub` of `args.dir`, made if missing.
fn write_all(
    args: &GenerateArgs,
    sub: &str,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<(), String> {
    let path = args.dir.join(sub);
    let fail = |what: &str, e: std::io::Error| format!("cannot write {what}: {e}");
    let dir = OutputDir::create(&path).map_err(|e| fail(&path.display().to_string(), e))?;
    for (name, bytes) in files {
        let what = path.join(&name).display().to_string();
        let mut file = dir
            .open_file(&name, Mode::Truncate)
            .map_err(|e| fail(&what, e))?;
        std::io::Write::write_all(&mut file, &bytes).map_err(|e| fail(&what, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_and_completions_name_every_subcommand() {
        let dir = tempfile::tempdir().expect("a folder");
        let args = GenerateArgs {
            dir: dir.path().to_path_buf(),
        };
        assert_eq!(run(&args), Ok(0));
        let read = |path: &str| std::fs::read_to_string(dir.path().join(path)).expect(path);
        let main = read("man/joularcode-bpf.1");
        assert!(main.starts_with(".ie \\n(.g .ds Aq"), "{main}");
        for sub in ["raw", "stacks", "record", "report", "top", "daemon"] {
            assert!(main.contains(sub), "{sub} in the main page");
            let page = read(&format!("man/joularcode-bpf-{sub}.1"));
            assert!(
                page.contains(&format!("joularcode\\-bpf\\-{sub}")),
                "{page}"
            );
            assert!(read("completions/joularcode-bpf.bash").contains(sub));
            assert!(read("completions/_joularcode-bpf").contains(sub));
            assert!(read("completions/joularcode-bpf.fish").contains(sub));
        }
        // the hidden subcommand is in none of them
        assert!(!dir.path().join("man/joularcode-bpf-generate.1").exists());
        assert!(!read("completions/joularcode-bpf.bash").contains("generate"));
    }
}
