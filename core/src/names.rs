//! Java class names as Joular Code for Java shows them (`java.lang.Thread`, hidden classes as
//! `demo.Burn$$Lambda/0x00000008000c5898`), from the forms the JVM holds internally.

/// The binary name of a class (`java.lang.Thread`) from its internal name (`java/lang/Thread`).
///
/// Hidden classes (lambdas since JDK 15) carry an address after a `+` inside the JVM; Java shows
/// it after a `/`, and so does this: `demo/Burn$$Lambda+0x0000000800c5898` becomes
/// `demo.Burn$$Lambda/0x0000000800c5898`.
pub fn binary_class_name(internal: &str) -> String {
    match internal.rsplit_once('+') {
        Some((name, suffix)) => format!("{}/{suffix}", name.replace('/', ".")),
        None => internal.replace('/', "."),
    }
}

/// The binary name of a class from its type signature (`Ljava/lang/Thread;`), as JVMTI's
/// GetClassSignature gives it. A signature without the `L...;` wrapper is taken as an internal
/// name.
pub fn class_name_from_signature(signature: &str) -> String {
    let internal = signature
        .strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(signature);
    binary_class_name(internal)
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
    }
}
