//! Numbers written as Java writes them: `String.format(Locale.ROOT, "%.Nf", x)` for the CSV files
//! ([`fixed`]), and `Double.toString(x)` for the values Joular Code for Java's messages quote
//! ([`java_double`]).
//!
//! Java does not round the double's exact binary value: it takes the shortest decimal that reads
//! back as the same double (the digits of `Double.toString`) and rounds that HALF_UP. So 0.15 with
//! `%.1f` is `0.2` in Java (the double is 0.1499999999999999944...), where Rust's `{:.1}` and C's
//! printf give `0.1`, and 0.03125 with `%.4f` is `0.0313` where Rust gives `0.0312` (half-to-even
//! on an exact tie). Checked against OpenJDK 17, 21 and 25 by the test `csv_java_float`.

/// Appends `value` with `decimals` digits after the point, exactly as Java's `%.<decimals>f`.
pub fn push_fixed(out: &mut String, value: f64, decimals: usize) {
    if value.is_nan() {
        out.push_str("NaN");
        return;
    }
    if value.is_sign_negative() {
        out.push('-');
    }
    if value.is_infinite() {
        out.push_str("Infinity");
        return;
    }
    let (digits, point) = shortest_digits(value.abs());
    // The digits of `0.DIGITS × 10^point` kept at this precision; a count below 0 keeps none and
    // rounds on a leading zero, so down.
    let keep = point + decimals as isize;
    let mut kept: Vec<u8> = digits.iter().copied().take(keep.max(0) as usize).collect();
    let mut point = point;
    if keep >= 0 && (keep as usize) < digits.len() && digits[keep as usize] >= b'5' {
        // HALF_UP on the first digit dropped
        if round_up(&mut kept) {
            point += 1;
        }
    }
    let digit_at = |i: isize| -> char {
        if i >= 0 && (i as usize) < kept.len() {
            char::from(kept[i as usize])
        } else {
            '0'
        }
    };
    if point <= 0 {
        out.push('0');
    } else {
        (0..point).for_each(|i| out.push(digit_at(i)));
    }
    if decimals > 0 {
        out.push('.');
        (0..decimals as isize).for_each(|i| out.push(digit_at(point + i)));
    }
}

/// Adds one to a decimal number; true when it grew a digit (`99` becomes `100`, `` becomes `1`).
fn round_up(digits: &mut Vec<u8>) -> bool {
    for digit in digits.iter_mut().rev() {
        if *digit == b'9' {
            *digit = b'0';
        } else {
            *digit += 1;
            return false;
        }
    }
    digits.insert(0, b'1');
    true
}

/// The digits Java writes for `value` (> 0 and finite, or 0), and where the point goes:
/// `value = 0.DIGITS × 10^point`. They are the fewest that read back as `value`; among the
/// decimals of that length (of one or two digits when one is enough), Java takes the closest to
/// `value`, and the even one on a tie.
fn shortest_digits(value: f64) -> (Vec<u8>, isize) {
    if value == 0.0 {
        return (vec![b'0'], 1);
    }
    // Rust's `{:e}` prints the fewest digits that read back, but takes the greater of two on a tie
    let (shortest, point) = scientific(&format!("{value:e}"));
    // The value rounded half-to-even to that length is Java's choice, when it reads back
    let rounded = format!("{value:.*e}", shortest.len().max(2) - 1);
    if rounded.parse::<f64>() != Ok(value) {
        return (shortest, point);
    }
    let (mut digits, point) = scientific(&rounded);
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    (digits, point)
}

/// The digits and the point of a number Rust wrote in scientific notation (`1.25e-5`).
fn scientific(text: &str) -> (Vec<u8>, isize) {
    let (mantissa, exponent) = text
        .split_once('e')
        .expect("scientific notation has an exponent");
    let exponent: isize = exponent
        .parse()
        .expect("the exponent of scientific notation is an integer");
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    (digits, exponent + 1)
}

/// `value` as Java's `%.<decimals>f` writes it.
pub fn fixed(value: f64, decimals: usize) -> String {
    let mut out = String::new();
    push_fixed(&mut out, value, decimals);
    out
}

/// `value` as Java's `Double.toString` writes it since JDK 19: the shortest decimal that reads
/// back as the same double, in plain notation with at least one decimal from 10^-3 up to 10^7
/// (`-1.0`, `0.001`, `1234567.0`), else as `d.dddE<n>` (`1.0E7`, `-2.5E-4`); `NaN`, `Infinity`,
/// `-Infinity`.
pub fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    let sign = if value.is_sign_negative() { "-" } else { "" };
    if value.is_infinite() {
        return format!("{sign}Infinity");
    }
    let (digits, point) = shortest_digits(value.abs());
    let digit = |i: isize| -> char {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .map_or('0', |&d| char::from(d))
    };
    let magnitude = value.abs();
    let mut out = sign.to_owned();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        // Plain: the integer digits (at least a 0), the point, then at least one decimal
        if point <= 0 {
            out.push('0');
        } else {
            (0..point).for_each(|i| out.push(digit(i)));
        }
        out.push('.');
        let last = (digits.len() as isize).max(point + 1);
        (point..last).for_each(|i| out.push(digit(i)));
    } else {
        out.push(digit(0));
        out.push('.');
        (1..(digits.len() as isize).max(2)).for_each(|i| out.push(digit(i)));
        out.push_str(&format!("E{}", point - 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_round_half_up_where_rust_rounds_to_even() {
        assert_eq!(fixed(0.03125, 4), "0.0313");
        assert_eq!(fixed(0.5, 0), "1");
        assert_eq!(fixed(2.5, 0), "3");
        assert_eq!(fixed(0.125, 2), "0.13");
        assert_eq!(fixed(-0.03125, 4), "-0.0313");
    }

    #[test]
    fn the_shortest_decimal_is_rounded_not_the_exact_binary_value() {
        assert_eq!(fixed(0.15, 1), "0.2");
        assert_eq!(fixed(1.005, 2), "1.01");
        assert_eq!(fixed(0.1234567895, 9), "0.123456790");
        // 663295455452.65625 lies halfway between two shortest decimals: Java takes the even one
        assert_eq!(
            fixed(f64::from_bits(0x4263_4def_ae1b_9500), 4),
            "663295455452.6562"
        );
    }

    #[test]
    fn carries_zeros_and_specials() {
        assert_eq!(fixed(0.9999999995, 9), "1.000000000");
        assert_eq!(fixed(9.99995, 4), "10.0000");
        assert_eq!(fixed(5e-5, 4), "0.0001");
        assert_eq!(fixed(1e-10, 4), "0.0000");
        assert_eq!(fixed(0.0, 4), "0.0000");
        assert_eq!(fixed(-0.0, 4), "-0.0000");
        assert_eq!(fixed(3.0, 9), "3.000000000");
        assert_eq!(fixed(1e21, 1), "1000000000000000000000.0");
        assert_eq!(fixed(f64::NAN, 4), "NaN");
        assert_eq!(fixed(f64::INFINITY, 4), "Infinity");
        assert_eq!(fixed(f64::NEG_INFINITY, 4), "-Infinity");
    }

    #[test]
    fn double_to_string_as_java() {
        for (value, java) in [
            (-1.0, "-1.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (42.5, "42.5"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (0.001, "0.001"),
            (9.99e-4, "9.99E-4"),
            (-2.5e-4, "-2.5E-4"),
            (1234567.0, "1234567.0"),
            (9999999.5, "9999999.5"),
            (1e7, "1.0E7"),
            (-1.5e10, "-1.5E10"),
            (1.7976931348623157e308, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            // Two shortest decimals as close: Java takes the even one, Rust's `{:e}` the greater
            // (1716585017161979.25)
            (
                f64::from_bits(0x4318_64e6_60b2_e3ed),
                "1.7165850171619792E15",
            ),
            // One digit reads back, but a second one is closer
            (5e-324, "4.9E-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(java_double(value), java, "{value:e}");
        }
    }
}
