//! Java programs whose method names are as long or as unusual as the JVM allows, their source
//! generated here (a name of 65 000 bytes is not one to keep in a file) and compiled once per
//! build folder, as [`crate::workload_classes`] is. Each prints `READY <pid>` once it runs its
//! steady state, takes the seconds to run as its first argument, and runs with
//! `-cp` [`odd_names_class_path`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{compiled_once, javac, repo_root, target_dir};

/// The bytes of each of [`LONG_NAME_METHODS`]'s names in `LongNames`: near the 65535 a constant
/// pool entry holds.
pub const LONG_NAME_BYTES: usize = 65_000;
/// How many methods of long names `LongNames` has; their names differ only in their last byte.
pub const LONG_NAME_METHODS: usize = 4;
/// How deep `LongNames` recurses through them.
pub const LONG_NAME_DEPTH: usize = 20;

/// The name of method `k` of `LongNames`.
pub fn long_name(k: usize) -> String {
    format!("{}{k}", "L".repeat(LONG_NAME_BYTES - 1))
}

/// `LongNames`: calls its long-named methods [`LONG_NAME_DEPTH`] deep, starting from each of
/// them in turn (so that its stacks are [`LONG_NAME_METHODS`] branches that differ in every
/// frame), and burns CPU at the bottom.
fn long_names_source() -> String {
    let mut methods = String::new();
    let mut starts = String::new();
    for k in 0..LONG_NAME_METHODS {
        let next = long_name((k + 1) % LONG_NAME_METHODS);
        methods.push_str(&format!(
            "    static void {name}(int depth) {{\n        if (depth == 0) {{\n            \
             for (int i = 0; i < 200_000; i++) {{ sink += i; }}\n            return;\n        \
             }}\n        {next}(depth - 1);\n    }}\n",
            name = long_name(k)
        ));
        starts.push_str(&format!(
            "            case {k} -> {name}({LONG_NAME_DEPTH});\n",
            name = long_name(k)
        ));
    }
    format!(
        "public class LongNames {{\n    static volatile long sink;\n\n    \
         public static void main(String[] args) {{\n        \
         long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;\n        \
         System.out.println(\"READY \" + ProcessHandle.current().pid());\n        \
         for (int k = 0; System.nanoTime() < end; k = (k + 1) % {LONG_NAME_METHODS}) {{\n            \
         switch (k) {{\n{starts}            default -> {{}}\n            }}\n        }}\n    }}\n\n\
         {methods}}}\n"
    )
}

/// The class holding `UnusualNames`'s methods of supplementary characters.
pub const SUPPLEMENTARY_CLASS: &str = "Sup\u{1d49c}";
/// Two methods whose names differ only in a character beyond the BMP (U+1D49C, U+1D49E: each
/// six bytes in modified UTF-8).
pub const SUPPLEMENTARY_METHODS: [&str; 2] = ["run\u{1d49c}", "run\u{1d49e}"];
/// Two methods, of classes defined at run time, whose names hold a NUL (`C0 80` in the class
/// file) and differ only after it.
pub const NUL_METHODS: [&str; 2] = ["burn\0a", "burn\0b"];

/// `UnusualNames`: runs in turn [`SUPPLEMENTARY_METHODS`] of [`SUPPLEMENTARY_CLASS`] (javac
/// takes Java letters beyond the BMP) and [`NUL_METHODS`], which javac cannot name: their class
/// files are written at run time by `DaemonGenerated.load` (`DataOutput.writeUTF` writes
/// modified UTF-8).
fn unusual_names_source() -> String {
    let [a, c] = SUPPLEMENTARY_METHODS;
    let [nul_a, nul_b] = NUL_METHODS.map(|name| name.replace('\0', "\\0"));
    format!(
        "import java.lang.reflect.Method;\n\n\
         public class UnusualNames {{\n    static volatile long sink;\n\n    \
         public static void main(String[] args) throws Exception {{\n        \
         long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;\n        \
         Method nulA = DaemonGenerated.load(\"Nul\", \"{nul_a}\");\n        \
         Method nulB = DaemonGenerated.load(\"Nul\", \"{nul_b}\");\n        \
         System.out.println(\"READY \" + ProcessHandle.current().pid());\n        \
         while (System.nanoTime() < end) {{\n            \
         sink += {SUPPLEMENTARY_CLASS}.{a}(300_000);\n            \
         sink += {SUPPLEMENTARY_CLASS}.{c}(300_000);\n            \
         sink += (int) nulA.invoke(null, 300_000);\n            \
         sink += (int) nulB.invoke(null, 300_000);\n        }}\n    }}\n}}\n\n\
         class {SUPPLEMENTARY_CLASS} {{\n    \
         static int {a}(int n) {{ int s = 0; for (int i = 0; i < n; i++) {{ s += i ^ s; }} return s; }}\n    \
         static int {c}(int n) {{ int s = 0; for (int i = 0; i < n; i++) {{ s += i ^ s; }} return s; }}\n}}\n"
    )
}

/// The class path of `LongNames` and `UnusualNames` (with `DaemonGenerated`, which
/// `UnusualNames` uses), compiled once per build folder and set of sources.
pub fn odd_names_class_path() -> &'static Path {
    static CLASSES: OnceLock<PathBuf> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let dir = target_dir().join("odd-names-sources");
        std::fs::create_dir_all(&dir).expect("a folder for the generated sources");
        let mut sources: Vec<PathBuf> = [
            ("LongNames.java", long_names_source()),
            ("UnusualNames.java", unusual_names_source()),
        ]
        .into_iter()
        .map(|(file, source)| {
            // Written aside, then renamed: test programs running at once write the same text.
            let path = dir.join(file);
            let fresh = dir.join(format!("{file}.{}", std::process::id()));
            std::fs::write(&fresh, source).expect("the generated source");
            std::fs::rename(&fresh, &path).expect("the generated source in place");
            path
        })
        .collect();
        sources.push(repo_root().join("testkit/java/DaemonGenerated.java"));
        compiled_once("odd-names", &sources, |out| {
            javac(out, &sources, "the generated odd names")
        })
    })
}
