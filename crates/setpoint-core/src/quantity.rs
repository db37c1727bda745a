//! Kubernetes quantities (`500m`, `1.5Gi`, `2e3`, `128974848`): parsed exactly and rounded
//! up, as Kubernetes' `MilliValue`/`Value` do, so nothing is counted as less than it says.

/// A quantity in thousandths of its unit, rounded up (`"100m"` → 100, `"1Ki"` → 1,024,000,
/// `"1.5"` → 1,500, `"1e3"` → 1,000,000). `None` if it is not a quantity.
pub fn milli_value(s: &str) -> Option<i128> {
    scaled_value(s, 3)
}

/// A quantity times `10^exp10`, rounded up: `scaled_value(q, 0)` is its value in whole units
/// (bytes of a memory quantity), `3` in thousandths, `9` in billionths (nanocores of a CPU
/// quantity). `None` if it is not a quantity or the result does not fit.
pub fn scaled_value(s: &str, exp10: i32) -> Option<i128> {
    let s = s.trim();
    let (negative, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let mut mantissa: i128 = 0;
    for d in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(d - b'0'))?;
    }
    let (exp10_of_suffix, exp2) = suffix_exponents(suffix)?;
    let exp10 = exp10 + exp10_of_suffix - i32::try_from(fraction.len()).ok()?;
    let mut value = mantissa.checked_mul(2i128.checked_pow(exp2)?)?;
    if exp10 >= 0 {
        value = value.checked_mul(10i128.checked_pow(exp10.unsigned_abs())?)?;
    } else {
        value = ceil_div(value, 10i128.checked_pow(exp10.unsigned_abs())?);
    }
    Some(if negative { -value } else { value })
}

/// The powers of ten and of two a quantity suffix stands for.
fn suffix_exponents(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        exponent => {
            let digits = exponent
                .strip_prefix('e')
                .or_else(|| exponent.strip_prefix('E'))?;
            (digits.parse::<i32>().ok().filter(|e| e.abs() <= 30)?, 0)
        }
    })
}

/// `a / b` rounded up (toward positive infinity); `b > 0`.
pub fn ceil_div(a: i128, b: i128) -> i128 {
    if a >= 0 {
        (a + b - 1) / b
    } else {
        a / b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_value_should_parse_every_suffix_and_round_up() {
        assert_eq!(milli_value("100m"), Some(100));
        assert_eq!(milli_value("2"), Some(2_000));
        assert_eq!(milli_value("1.5"), Some(1_500));
        assert_eq!(milli_value(".5"), Some(500));
        assert_eq!(milli_value("1Ki"), Some(1_024_000));
        assert_eq!(milli_value("1Gi"), Some(1_073_741_824_000));
        assert_eq!(milli_value("500M"), Some(500_000_000_000));
        assert_eq!(milli_value("1e3"), Some(1_000_000));
        assert_eq!(milli_value("1E3"), Some(1_000_000));
        assert_eq!(milli_value("1E"), Some(1_000_000_000_000_000_000_000));
        assert_eq!(milli_value("1n"), Some(1), "rounds up to a thousandth");
        assert_eq!(milli_value("1500u"), Some(2));
        assert_eq!(milli_value("-1"), Some(-1_000));
        assert_eq!(milli_value("abc"), None);
        assert_eq!(milli_value("1Qi"), None);
        assert_eq!(milli_value(""), None);
        assert_eq!(milli_value("1.2.3"), None);
    }

    #[test]
    fn scaled_value_should_give_whole_units_and_nano_units() {
        assert_eq!(scaled_value("1.5Ki", 0), Some(1536));
        assert_eq!(scaled_value("100m", 9), Some(100_000_000));
        assert_eq!(scaled_value("250n", 9), Some(250));
        assert_eq!(scaled_value("1m", 0), Some(1), "rounds up to a whole unit");
        assert_eq!(scaled_value("x", 0), None);
    }
}
