//! A process that passes for a HotSpot JVM, as any local user could make one: a program linked to
//! a library of its own named `libjvm.so` that exports HotSpot's VMStructs symbols, pointed at
//! tables of the test's choosing ([`Table`]). Built with gcc in a folder of its own, owned by the
//! user who runs it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The fake libjvm.so: the VMStructs symbols with HotSpot's strides and offsets, and the tables
/// made by its constructor as `FAKE_JVM_TABLE` asks.
const LIBJVM_C: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct field { const char *type, *name, *type_string; int32_t is_static; uint64_t offset; void *address; };
struct type { const char *name, *superclass; int32_t oop, integer, unsigned_; uint64_t size; };
struct constant { const char *name; uint64_t value; };

void *gHotSpotVMStructs;
uint64_t gHotSpotVMStructEntryArrayStride = sizeof(struct field);
uint64_t gHotSpotVMStructEntryTypeNameOffset = 0;
uint64_t gHotSpotVMStructEntryFieldNameOffset = 8;
uint64_t gHotSpotVMStructEntryTypeStringOffset = 16;
uint64_t gHotSpotVMStructEntryIsStaticOffset = 24;
uint64_t gHotSpotVMStructEntryOffsetOffset = 32;
uint64_t gHotSpotVMStructEntryAddressOffset = 40;
void *gHotSpotVMTypes;
uint64_t gHotSpotVMTypeEntryArrayStride = sizeof(struct type);
uint64_t gHotSpotVMTypeEntryTypeNameOffset = 0;
uint64_t gHotSpotVMTypeEntrySizeOffset = 32;
void *gHotSpotVMIntConstants;
uint64_t gHotSpotVMIntConstantEntryArrayStride = sizeof(struct constant);
uint64_t gHotSpotVMIntConstantEntryNameOffset = 0;
uint64_t gHotSpotVMIntConstantEntryValueOffset = 8;
void *gHotSpotVMLongConstants;
uint64_t gHotSpotVMLongConstantEntryArrayStride = sizeof(struct constant);
uint64_t gHotSpotVMLongConstantEntryNameOffset = 0;
uint64_t gHotSpotVMLongConstantEntryValueOffset = 8;

/* A name of 250 bytes, the longest a reader may take for a C++ name, made distinct by `i`. */
static char *name(const char *kind, long i) {
    char *text = malloc(251);
    int len = snprintf(text, 251, "%s_%08ld_of_a_table_larger_than_any_hotspots_", kind, i);
    memset(text + len, 'x', 250 - len);
    text[250] = 0;
    return text;
}

__attribute__((constructor)) static void make_tables(void) {
    const char *table = getenv("FAKE_JVM_TABLE");
    if (table == NULL || strcmp(table, "huge") != 0) return;
    long n = strtol(getenv("FAKE_JVM_ENTRIES"), NULL, 10);
    struct field *fields = calloc(n + 1, sizeof *fields);
    struct type *types = calloc(n + 1, sizeof *types);
    struct constant *constants = calloc(n + 1, sizeof *constants);
    for (long i = 0; i < n; i++) {
        fields[i] = (struct field){ name("Type", i), name("_field", i), name("String", i), 0, 8, 0 };
        types[i] = (struct type){ fields[i].type, NULL, 0, 0, 0, 64 };
        constants[i] = (struct constant){ name("Constant", i), 1 };
    }
    gHotSpotVMStructs = fields;
    gHotSpotVMTypes = types;
    gHotSpotVMIntConstants = constants;
    gHotSpotVMLongConstants = constants;
}

/* Whether the tables are set. The program calls this rather than reading gHotSpotVMStructs, which
   would give it a copy of its own (a copy relocation), leaving the library's unset. */
int fake_jvm_tables(void) { return gHotSpotVMStructs != 0; }
"#;

/// The fake java: it only waits, with the fake libjvm.so mapped.
const MAIN_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
int fake_jvm_tables(void);
int main(void) {
    printf("ready %d\n", fake_jvm_tables());
    fflush(stdout);
    for (;;) pause();
}
"#;

/// What the fake libjvm's tables hold.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    /// Each of the four tables has this many entries, with distinct names (three a field): what
    /// froze every cycle of a profiler that read them whole, with 131072.
    Huge(u32),
    /// `gHotSpotVMStructs` is never set: a JVM that never ends starting, alive but unreadable.
    Unset,
}

/// The fake JVM's program and library, built in a folder anyone may read and run from.
#[derive(Debug)]
pub struct FakeJvm {
    program: PathBuf,
}

impl FakeJvm {
    /// Builds the fake java and its libjvm.so in `dir` with gcc, and lets anyone run them;
    /// panics, with gcc's words, if it cannot.
    pub fn build(dir: &Path) -> FakeJvm {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .expect("open the fake JVM's folder to all");
        std::fs::write(dir.join("libjvm.c"), LIBJVM_C).expect("write libjvm.c");
        std::fs::write(dir.join("main.c"), MAIN_C).expect("write main.c");
        let gcc = |args: &[&str]| {
            let output = Command::new("gcc")
                .current_dir(dir)
                .args(args)
                .output()
                .expect("gcc runs (package gcc)");
            assert!(
                output.status.success(),
                "gcc {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        gcc(&["-O1", "-shared", "-fPIC", "-o", "libjvm.so", "libjvm.c"]);
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        gcc(&[
            "-O1",
            "-o",
            "fakejava",
            "main.c",
            "-L.",
            "-Wl,--no-as-needed",
            "-ljvm",
            &rpath,
        ]);
        FakeJvm {
            program: dir.join("fakejava"),
        }
    }

    /// The command that starts a fake JVM whose tables are `table`.
    pub fn command(&self, table: Table) -> Command {
        let mut command = Command::new(&self.program);
        match table {
            Table::Huge(entries) => command
                .env("FAKE_JVM_TABLE", "huge")
                .env("FAKE_JVM_ENTRIES", entries.to_string()),
            Table::Unset => command.env("FAKE_JVM_TABLE", "unset"),
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    /// Starts `command` ([`FakeJvm::command`], maybe to run as another user) and waits until its
    /// tables are made (its main has started).
    pub fn spawn(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the fake JVM");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("its stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the fake JVM's first line");
        assert!(
            line.starts_with("ready"),
            "the fake JVM did not start: {line:?}"
        );
        Running { child }
    }
}

/// A fake JVM running, killed when dropped.
#[derive(Debug)]
pub struct Running {
    child: Child,
}

impl Running {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
