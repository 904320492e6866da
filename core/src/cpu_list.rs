//! The kernel's CPU list format (`0-3,8,10-11`), as in `/sys/devices/system/cpu/online` and a
//! perf PMU's `cpumask`.

/// The highest CPU number accepted, above any kernel's NR_CPUS: a list naming more is not one.
const MAX_CPU: u32 = (1 << 16) - 1;

/// The CPUs of a list such as `0`, `0,18`, `0-3,8` (surrounding white space and empty items
/// ignored). `None` if it is malformed, names a CPU above 65535, or names none.
pub fn parse(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for item in text.trim().split(',').filter(|item| !item.is_empty()) {
        let (first, last): (u32, u32) = match item.split_once('-') {
            Some((first, last)) => (first.parse().ok()?, last.parse().ok()?),
            None => {
                let cpu = item.parse().ok()?;
                (cpu, cpu)
            }
        };
        if first > last || last > MAX_CPU {
            return None;
        }
        cpus.extend(first..=last);
    }
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse("0"), Some(vec![0]));
        assert_eq!(parse("0,18"), Some(vec![0, 18]));
        assert_eq!(parse("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse("0-65535").map(|cpus| cpus.len()), Some(65536));
    }

    #[test]
    fn malformed_lists_are_none() {
        for text in [
            "",
            "\n",
            ",",
            "a",
            "3-1",
            "0-",
            "-1",
            "0-65536",
            "0-4294967295",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}
