//! Numbers written as Java's `String.format(Locale.ROOT, "%.Nf", x)` writes them.
//!
//! Java does not round the double's exact binary value: it takes the shortest decimal that reads
//! back as the same double (the digits of `Double.toString`) and rounds that HALF_UP. So 0.15 with
//! `%.1f` is `0.2` in Java (the double is 0.1499999999999999944...), where Rust's `{:.1}` and C's
//! printf give `0.1`, and 0.03125 with `%.4f` is `0.0313` where Rust gives `0.0312` (half-to-even
//! on an exact tie). Checked against OpenJDK 17, 21 and 25 by the test `csv_java_float`.

use std::io::Write;

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

/// The shortest decimal digits that read back as `value` (> 0 and finite, or 0), and where the
/// point goes: `value = 0.DIGITS × 10^point`.
fn shortest_digits(value: f64) -> (Vec<u8>, isize) {
    if value == 0.0 {
        return (vec![b'0'], 1);
    }
    // Rust's `{:e}` prints the shortest round-trip digits, as `d.ddde-5`
    let mut buffer = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    write!(cursor, "{value:e}").expect("an f64 in scientific notation fits in 40 bytes");
    let len = cursor.position() as usize;
    let text = &buffer[..len];
    let e = text
        .iter()
        .position(|&b| b == b'e')
        .expect("scientific notation has an exponent");
    let digits: Vec<u8> = text[..e].iter().copied().filter(|&b| b != b'.').collect();
    let exponent: isize = std::str::from_utf8(&text[e + 1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("the exponent of scientific notation is an integer");
    (digits, exponent + 1)
}

/// `value` as Java's `%.<decimals>f` writes it.
pub fn fixed(value: f64, decimals: usize) -> String {
    let mut out = String::new();
    push_fixed(&mut out, value, decimals);
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
}
