//! The programs, from Debian's packages (scripts/test-setup.sh installs them), each run by its
//! own command line on inputs generated here, the same every time: each does the same work over
//! and over for some ten seconds of CPU, so that what a sampler sees does not depend on when it
//! samples.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use joularcode_testkit::{jdk, repo_root, Jdk};

/// A program and how to run it.
pub struct Program {
    /// Its name in messages and folders.
    pub name: &'static str,
    /// The JDK it runs on, 17 or 21 (see the test's doc on Java 25).
    pub jdk: u32,
    /// A frame that the stacks of its work hold, on both sides: its main method, or for JRuby the
    /// Ruby method each round runs (its start-up, parsing and compiling Ruby, is left out).
    pub work: &'static str,
    /// Its jars.
    jars: Vec<PathBuf>,
    /// Its command line after the JVM's options: the main class and its arguments, or for JRuby
    /// the script and its arguments.
    args: Vec<String>,
    /// Whether it runs through Debian's `jruby` launcher (JVM options given as `-J<option>`).
    jruby: bool,
}

/// JFR keeps the newest 64 frames of a stack by default: these programs' are deeper.
const JFR_DEPTH: &str = "-XX:FlightRecorderOptions=stackdepth=512";

/// The heap, of a fixed size, touched whole at the JVM's start (see the module's doc, "first
/// touches").
const HEAP: [&str; 3] = ["-Xms1g", "-Xmx1g", "-XX:+AlwaysPreTouch"];

impl Program {
    /// The JDK it runs on.
    pub fn jdk(&self) -> Jdk {
        jdk(self.jdk)
    }

    /// Its class path.
    pub fn classpath(&self) -> String {
        let jars: Vec<String> = self.jars.iter().map(|j| j.display().to_string()).collect();
        jars.join(":")
    }

    /// The command that runs it with the JVM option `jfr` (the recording), in `dir`.
    pub fn command(&self, jfr: &str, dir: &Path) -> Command {
        for jar in &self.jars {
            assert!(
                jar.is_file(),
                "no {}: install Debian's package of {} (scripts/test-setup.sh does)",
                jar.display(),
                self.name
            );
        }
        let mut command;
        if self.jruby {
            command = Command::new("/usr/bin/jruby");
            command
                .env("JAVA_HOME", &self.jdk().home)
                .arg(format!("-J{jfr}"))
                .arg(format!("-J{JFR_DEPTH}"))
                .args(HEAP.map(|option| format!("-J{option}")));
        } else {
            command = Command::new(self.jdk().java());
            command
                .arg(jfr)
                .arg(JFR_DEPTH)
                .args(HEAP)
                .arg("-cp")
                .arg(self.classpath());
        }
        command.args(&self.args).current_dir(dir);
        command
    }
}

/// A jar of /usr/share/java.
fn jar(name: &str) -> PathBuf {
    Path::new("/usr/share/java").join(name)
}

/// Lucene's jars, as Debian's liblucene8-java names them.
fn lucene_jar(module: &str) -> PathBuf {
    jar(&format!("lucene-{module}-8.7.0.jar"))
}

/// `path` written once per build folder by `write` (into a fresh file, renamed), and returned.
fn generated(name: &str, write: impl FnOnce(&Path)) -> PathBuf {
    let path = super::inputs_dir().join(name);
    if !path.exists() {
        std::fs::create_dir_all(super::inputs_dir()).expect("a folder for the inputs");
        let fresh = super::inputs_dir().join(format!("{name}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&fresh);
        let _ = std::fs::remove_file(&fresh);
        write(&fresh);
        if std::fs::rename(&fresh, &path).is_err() {
            // Another test process renamed its copy first.
            let _ = std::fs::remove_dir_all(&fresh);
        }
    }
    path
}

/// A small seeded generator of numbers below `bound`, the same sequence every time.
fn numbers(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |bound| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % bound
    }
}

/// H2 (`libh2-java`) running an SQL script with its `RunScript` tool on an in-memory database:
/// round after round, rows inserted into an indexed table, a join grouped and ordered, a search
/// by pattern, an update.
pub fn h2() -> Program {
    let script = generated("h2.sql", |path| {
        let mut sql = String::from(
            "CREATE TABLE item(id INT PRIMARY KEY, name VARCHAR(40), grp INT, \
             price DECIMAL(10,2));\n\
             INSERT INTO item SELECT X, 'item-' || X, MOD(X, 97), MOD(X * 7919, 10000) / 100.0 \
             FROM SYSTEM_RANGE(1, 20000);\n\
             CREATE TABLE sale(id INT PRIMARY KEY, item INT, qty INT, note VARCHAR(60));\n\
             CREATE INDEX sale_item ON sale(item);\n",
        );
        for round in 0..40 {
            let (low, high) = (round * 5000 + 1, (round + 1) * 5000);
            let _ = write!(
                sql,
                "INSERT INTO sale SELECT X, MOD(X * 31, 20000) + 1, MOD(X, 13) + 1, \
                 'note ' || (X * 17) FROM SYSTEM_RANGE({low}, {high});\n\
                 SELECT i.grp, COUNT(*), SUM(s.qty * i.price) FROM sale s JOIN item i \
                 ON s.item = i.id GROUP BY i.grp ORDER BY 3 DESC;\n\
                 SELECT name, price FROM item WHERE name LIKE '%{round}7%' ORDER BY price DESC \
                 LIMIT 10;\n\
                 UPDATE item SET price = price + 1 WHERE MOD(id, 40) = {round};\n"
            );
        }
        std::fs::write(path, sql).expect("write the SQL script");
    });
    Program {
        name: "h2",
        jdk: 21,
        work: "org.h2.tools.RunScript.main",
        jars: vec![jar("h2.jar")],
        args: vec![
            "org.h2.tools.RunScript".into(),
            "-url".into(),
            "jdbc:h2:mem:test".into(),
            "-script".into(),
            script.display().to_string(),
        ],
        jruby: false,
    }
}

/// Saxon-HE (`libsaxonhe-java`) transforming an XML document of orders with an XSLT 3.0
/// stylesheet (grouping, sorting, sums, string functions), the transform repeated by its
/// `-repeat` option.
pub fn saxon() -> Program {
    let orders = generated("orders.xml", |path| {
        let words = [
            "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        ];
        let mut next = numbers(7);
        let mut xml = String::from("<orders>\n");
        for id in 0..4000 {
            let _ = writeln!(
                xml,
                "<order id=\"{id}\" customer=\"c{}\" date=\"2026-{:02}-{:02}\">",
                next(300),
                next(12) + 1,
                next(28) + 1
            );
            for _ in 0..next(4) + 1 {
                let text: Vec<&str> = (0..6).map(|_| words[next(words.len())]).collect();
                let _ = writeln!(
                    xml,
                    "<line sku=\"s{}\" qty=\"{}\" price=\"{}.{:02}\">{}</line>",
                    next(500),
                    next(8) + 1,
                    next(100) + 1,
                    next(100),
                    text.join(" ")
                );
            }
            xml.push_str("</order>\n");
        }
        xml.push_str("</orders>\n");
        std::fs::write(path, xml).expect("write the XML document");
    });
    let stylesheet = repo_root().join("testkit/xslt/report.xsl");
    Program {
        name: "saxon",
        jdk: 17,
        work: "net.sf.saxon.Transform.main",
        jars: vec![jar("Saxon-HE.jar")],
        args: vec![
            "net.sf.saxon.Transform".into(),
            format!("-s:{}", orders.display()),
            format!("-xsl:{}", stylesheet.display()),
            "-o:report.xml".into(),
            "-repeat:120".into(),
        ],
        jruby: false,
    }
}

/// Debian's JRuby running `testkit/ruby/workload.rb` (objects, blocks, hashes, strings, sorting)
/// with its own command line, on Java 17 (Debian's `jruby` launcher and its JVM options).
pub fn jruby() -> Program {
    let script = repo_root().join("testkit/ruby/workload.rb");
    Program {
        name: "jruby",
        jdk: 17,
        work: "workload.RUBY$method$round",
        jars: vec![Path::new("/usr/share/jruby/lib/jruby.jar").to_path_buf()],
        args: vec![script.display().to_string(), "3000".into()],
        jruby: true,
    }
}

/// Lucene (`liblucene8-java`) indexing generated text with its demo's `IndexFiles` command line:
/// 12,000 documents of 1,500 words from a vocabulary of 20,000, some frequent, most rare, analysed,
/// inverted and written into segments.
pub fn lucene() -> Program {
    let docs = generated("docs-12000", |dir| {
        std::fs::create_dir_all(dir).expect("a folder for the documents");
        let syllables = [
            "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe", "gu", "ha",
        ];
        let mut next = numbers(3);
        let vocabulary: Vec<String> = (0..20_000)
            .map(|_| (0..next(4) + 1).map(|_| syllables[next(14)]).collect())
            .collect();
        for doc in 0..12000 {
            let words: Vec<&str> = (0..1500)
                .map(|_| {
                    // Half the words from the first 200 (frequent), half from all.
                    let bound = if next(2) == 0 { 200 } else { vocabulary.len() };
                    vocabulary[next(bound)].as_str()
                })
                .collect();
            std::fs::write(dir.join(format!("d{doc}.txt")), words.join(" "))
                .expect("write a document");
        }
    });
    Program {
        name: "lucene",
        jdk: 21,
        work: "org.apache.lucene.demo.IndexFiles.main",
        jars: ["core", "analyzers-common", "demo", "queryparser"]
            .map(lucene_jar)
            .to_vec(),
        args: vec![
            "org.apache.lucene.demo.IndexFiles".into(),
            "-index".into(),
            "index".into(),
            "-docs".into(),
            docs.display().to_string(),
        ],
        jruby: false,
    }
}
