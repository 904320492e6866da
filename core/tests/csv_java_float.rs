//! Numbers in the CSV files are written as Java's `%.Nf` writes them: checked against
//! `csv_java_float/expected.txt`, which OpenJDK 17, 21 and 25 all produce from
//! `csv_java_float/Generate.java` (5,000 random doubles of every kind, ties and edge cases, 15
//! of them halfway between two shortest decimals).

use joularcode_core::output::java_float::fixed;

#[test]
fn every_value_is_formatted_as_java_formats_it() {
    let expected = include_str!("csv_java_float/expected.txt");
    let mut checked = 0;
    for line in expected.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 5, "malformed fixture line {line:?}");
        let bits = u64::from_str_radix(fields[0], 16).expect("hex bits");
        let value = f64::from_bits(bits);
        for (decimals, java) in [0, 1, 4, 9].into_iter().zip(&fields[1..]) {
            assert_eq!(
                fixed(value, decimals),
                *java,
                "{value:e} (bits {bits:x}) with %.{decimals}f"
            );
            checked += 1;
        }
    }
    assert!(checked > 20_000, "only {checked} values checked");
}

#[test]
fn ties_differ_from_rusts_own_rounding() {
    // The cases where `{:.N}` would be wrong: exact binary ties and decimal ties of the shortest form
    assert_eq!(format!("{:.4}", 0.03125), "0.0312");
    assert_eq!(fixed(0.03125, 4), "0.0313");
    assert_eq!(format!("{:.1}", 0.15), "0.1");
    assert_eq!(fixed(0.15, 1), "0.2");
}
