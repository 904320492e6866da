//! Java class names as Joular Code for Java shows them (`java.lang.Thread`, hidden classes as
//! `demo.Burn$$Lambda/0x00000008000c5898`, the name `getClass().getName()` gives), from each form
//! the JVM hands out. Every way the profiler names a method (the JVM's own Symbols read through
//! VMStructs, JVMTI in the symbolizer agent, the JDK's perf map) goes through this module, so that
//! one method gets one name, whichever way it was named.
//!
//! | form | plain class | hidden class |
//! | --- | --- | --- |
//! | internal (a `Symbol`, VMStructs) | `demo/Burn` | `demo/Burn$$Lambda+0x0000000800c5898` |
//! | JVMTI signature (GetClassSignature) | `Ldemo/Burn;` | `Ldemo/Burn$$Lambda.0x0000000800c5898;` |
//! | binary (Java's `getName`, perf maps) | `demo.Burn` | `demo.Burn$$Lambda/0x0000000800c5898` |
//!
//! Every name is bounded where it is made ([`cut`]): a class name at most
//! [`MAX_CLASS_NAME_BYTES`], a method name at most [`MAX_METHOD_NAME_BYTES`], so a frame's
//! `class.method` at most [`MAX_FRAME_NAME_BYTES`]. HotSpot allows 65535 bytes for each; javac
//! and the JDK's own classes stay below 200 (the longest are generated lambda and inner class
//! names), so only a name made to be long is ever cut. A cut name keeps its start and a hash of
//! the whole (`prefix…#1a2b3c4d`): two long names stay two, and the same name is always cut the
//! same way.

use std::borrow::Cow;
use std::hash::Hasher;

/// The longest class name kept, in bytes.
pub const MAX_CLASS_NAME_BYTES: usize = 512;
/// The longest method name kept, in bytes.
pub const MAX_METHOD_NAME_BYTES: usize = 511;
/// The longest frame name (`class.method`), in bytes: also the longest label value the daemon
/// exports.
pub const MAX_FRAME_NAME_BYTES: usize = MAX_CLASS_NAME_BYTES + 1 + MAX_METHOD_NAME_BYTES;
/// What stands where a cut name was cut, before the hash of the whole name.
pub const CUT_MARK: &str = "…#";
/// The bytes [`CUT_MARK`] and the hash take.
pub const CUT_BYTES: usize = CUT_MARK.len() + 8;

/// `name` if it has at most `max` bytes (at least [`CUT_BYTES`]), else its start, cut on a
/// character boundary, then [`CUT_MARK`] and [`short_hash`] of the whole, `max` bytes at most.
/// A name cut once is not cut again.
pub fn cut(name: &str, max: usize) -> Cow<'_, str> {
    if name.len() <= max {
        return Cow::Borrowed(name);
    }
    let mut end = max.saturating_sub(CUT_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}{CUT_MARK}{}",
        &name[..end],
        short_hash(name.as_bytes())
    ))
}

/// Eight hex digits of a hash of `bytes` (FNV-1a, the same on every host and every run).
pub fn short_hash(bytes: &[u8]) -> String {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    let hash = hasher.finish();
    format!("{:08x}", (hash ^ (hash >> 32)) as u32)
}

/// A method's name, cut beyond [`MAX_METHOD_NAME_BYTES`].
pub fn method_name(name: &str) -> Cow<'_, str> {
    cut(name, MAX_METHOD_NAME_BYTES)
}

/// A frame's `package.Class.method` as perf maps and code maps write it, its class and its
/// method each cut as [`binary_class_name`] and [`method_name`] cut them, so that a method named
/// by any reader gets one name. A name without a `.` is cut beyond [`MAX_FRAME_NAME_BYTES`].
pub fn qualified_name(name: &str) -> Cow<'_, str> {
    match name.rsplit_once('.') {
        _ if name.len() <= MAX_METHOD_NAME_BYTES => Cow::Borrowed(name),
        Some((class, method)) => {
            let (class, method) = (cut(class, MAX_CLASS_NAME_BYTES), method_name(method));
            if class.len() + method.len() + 1 == name.len() {
                Cow::Borrowed(name)
            } else {
                Cow::Owned(format!("{class}.{method}"))
            }
        }
        None => cut(name, MAX_FRAME_NAME_BYTES),
    }
}

/// `name`, or its [`cut`] beyond [`MAX_CLASS_NAME_BYTES`].
fn bounded_class(name: String) -> String {
    match cut(&name, MAX_CLASS_NAME_BYTES) {
        Cow::Borrowed(_) => name,
        Cow::Owned(cut) => cut,
    }
}

/// The binary name of a class (`java.lang.Thread`) from its internal name (`java/lang/Thread`),
/// cut beyond [`MAX_CLASS_NAME_BYTES`].
///
/// Hidden classes (lambdas since JDK 15) carry an address after a `+` inside the JVM; Java shows
/// it after a `/`, and so does this: `demo/Burn$$Lambda+0x0000000800c5898` becomes
/// `demo.Burn$$Lambda/0x0000000800c5898`.
pub fn binary_class_name(internal: &str) -> String {
    bounded_class(match internal.rsplit_once('+') {
        Some((name, suffix)) => hidden(name, suffix),
        None => internal.replace('/', "."),
    })
}

/// The binary name of a class from its type signature (`Ljava/lang/Thread;`), as JVMTI's
/// GetClassSignature gives it, cut beyond [`MAX_CLASS_NAME_BYTES`]. A signature without the `L...;` wrapper is taken as an internal
/// name.
///
/// JVMTI writes a hidden class's suffix after a `.` (`Ldemo/Burn$$Lambda.0x0000000800c5898;`):
/// a `.` can be nothing else in a signature, since the internal form of a class name separates
/// packages with `/` and no part of it may hold a `.` (JVMS §4.2).
pub fn class_name_from_signature(signature: &str) -> String {
    let internal = signature
        .strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(signature);
    match internal.rsplit_once('.') {
        Some((name, suffix)) => bounded_class(hidden(name, suffix)),
        None => binary_class_name(internal),
    }
}

/// The binary name of the hidden class whose internal name, without its suffix, is `name`.
fn hidden(name: &str, suffix: &str) -> String {
    format!("{}/{suffix}", name.replace('/', "."))
}

/// `name` fit for a folder name: every character other than a letter, a digit, `.`, `_`, `-` or
/// `$` becomes `_`.
pub fn fit_for_file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-$".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Launcher options followed by a separate value.
const OPTIONS_WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--limit-modules",
    "--add-reads",
    "--add-exports",
    "--add-opens",
    "--patch-module",
    "--enable-native-access",
    "--source",
];

/// The main class of a JVM from its command line (`args[0]` is the program): the first argument
/// after the options, the jar's file name for `-jar x.jar`, the class (or module) for
/// `-m module/class`; the program's name when there is none. Characters other than letters,
/// digits, `.`, `_`, `-` and `$` become `_`, so it fits in a folder name.
pub fn main_class(args: &[String]) -> String {
    let mut rest = args.iter().skip(1);
    let mut found = None;
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-jar" => {
                found = rest
                    .next()
                    .map(|jar| jar.rsplit('/').next().unwrap_or(jar).to_string());
                break;
            }
            "-m" | "--module" => {
                found = rest
                    .next()
                    .map(|module| module.rsplit('/').next().unwrap_or(module).to_string());
                break;
            }
            option if OPTIONS_WITH_VALUE.contains(&option) => {
                rest.next();
            }
            option if option.starts_with('-') => {}
            class => {
                found = Some(class.to_string());
                break;
            }
        }
    }
    let name = found
        .or_else(|| {
            args.first()
                .map(|program| program.rsplit('/').next().unwrap_or(program).to_string())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "jvm".to_string());
    fit_for_file_name(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_nested_classes() {
        assert_eq!(binary_class_name("java/lang/Thread"), "java.lang.Thread");
        assert_eq!(binary_class_name("a/B$C"), "a.B$C");
        assert_eq!(binary_class_name("Top"), "Top");
    }

    #[test]
    fn hidden_classes_keep_their_address_after_a_slash() {
        assert_eq!(
            binary_class_name("demo/Burn$$Lambda+0x00000008000c5898"),
            "demo.Burn$$Lambda/0x00000008000c5898"
        );
    }

    #[test]
    fn signatures() {
        assert_eq!(
            class_name_from_signature("Ljava/lang/String;"),
            "java.lang.String"
        );
        assert_eq!(
            class_name_from_signature("java/lang/String"),
            "java.lang.String"
        );
        assert_eq!(class_name_from_signature("LTop$1;"), "Top$1");
    }

    /// JVMTI's form of a hidden class, seen on JDK 17 and 21 (`X$$Lambda$1.0x00007f40...`), is
    /// the same class as VMStructs' `X$$Lambda$1+0x00007f40...`: one name for both.
    #[test]
    fn every_form_of_a_hidden_class_gives_one_name() {
        let java = "demo.Burn$$Lambda$14/0x00007f4044000a08";
        assert_eq!(
            class_name_from_signature("Ldemo/Burn$$Lambda$14.0x00007f4044000a08;"),
            java
        );
        assert_eq!(
            binary_class_name("demo/Burn$$Lambda$14+0x00007f4044000a08"),
            java
        );
        assert_eq!(
            class_name_from_signature("LBurn$$Lambda.0x0000000800c5898;"),
            "Burn$$Lambda/0x0000000800c5898"
        );
        assert_eq!(
            class_name_from_signature("Ljava/lang/invoke/LambdaForm$MH.0x00007fdb40001000;"),
            "java.lang.invoke.LambdaForm$MH/0x00007fdb40001000"
        );
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_apart() {
        let long = |last: char| format!("{}{last}", "\u{1d49c}".repeat(20_000));
        let (a, b) = (long('a'), long('b'));
        let (cut_a, cut_b) = (method_name(&a), method_name(&b));
        assert!(cut_a.len() <= MAX_METHOD_NAME_BYTES, "{}", cut_a.len());
        assert!(
            cut_a.len() > MAX_METHOD_NAME_BYTES - 4,
            "cut on a char boundary"
        );
        assert_ne!(cut_a, cut_b, "two long names stay two");
        assert_eq!(cut_a, method_name(&a), "the same name is cut the same way");
        assert!(cut_a.ends_with(&format!("{CUT_MARK}{}", short_hash(a.as_bytes()))));
        assert_eq!(method_name(&cut_a), cut_a, "a cut name is not cut again");
        assert_eq!(method_name("run"), "run");
        let class = format!("a/{}", "B".repeat(70_000));
        let signature = format!("L{class};");
        assert!(binary_class_name(&class).len() <= MAX_CLASS_NAME_BYTES);
        assert_eq!(
            binary_class_name(&class),
            class_name_from_signature(&signature)
        );
    }

    /// A perf map's or a code map's `class.method` gets the name the readers of Symbols and
    /// JVMTI give: the class and the method each cut.
    #[test]
    fn a_qualified_name_is_cut_as_its_class_and_method() {
        let class = format!("a/{}", "C".repeat(3000));
        let method = "m".repeat(65_535);
        let qualified = format!("{}.{method}", class.replace('/', "."));
        let expected = format!("{}.{}", binary_class_name(&class), method_name(&method));
        assert_eq!(qualified_name(&qualified), expected);
        assert!(expected.len() <= MAX_FRAME_NAME_BYTES);
        assert_eq!(qualified_name(&expected), expected);
        assert_eq!(
            qualified_name("java.lang.Thread.run"),
            "java.lang.Thread.run"
        );
        assert!(qualified_name(&"S".repeat(5000)).len() <= MAX_FRAME_NAME_BYTES);
    }

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn main_classes_from_command_lines() {
        for (line, class) in [
            (
                "java -cp /a:/b -Xint com.example.Main arg",
                "com.example.Main",
            ),
            (
                "/usr/bin/java -jar /opt/app/my-app.jar --port 80",
                "my-app.jar",
            ),
            (
                "java --module-path mods -m app.mod/com.example.App",
                "com.example.App",
            ),
            ("java --module app.mod", "app.mod"),
            (
                "java -XX:+UseG1GC -Dx=1 --add-opens java.base/java.lang=ALL-UNNAMED Main",
                "Main",
            ),
            ("java -version", "java"),
            ("java Weird:Name*", "Weird_Name_"),
        ] {
            assert_eq!(main_class(&args(line)), class, "{line}");
        }
        assert_eq!(main_class(&[]), "jvm");
    }
}
