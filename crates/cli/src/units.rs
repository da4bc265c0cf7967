//! Figures for people: sizes in binary units and counts with their noun in the right number.
//! Text output only: `--json` keeps exact numbers (bytes, counts).

/// A size in bytes in binary units with one decimal: `0 B`, `999 B`, `1.0 KiB`, `1.5 MiB`,
/// `2.0 GiB` (up to EiB). Below 1 KiB the exact number of bytes.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    // Past 1023.95 the rounded figure would read "1024.0": the next unit instead.
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A count with a comma between thousands: `999`, `1,234`, `12,345,678`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate of things per second for a progress line, rounded to what a person reads: one
/// decimal below 100 (`0.5/s`, `12.3/s`), whole numbers with thousands separated above
/// (`1,234/s`); `0/s` for a rate that is not a finite positive number (nothing measured yet).
pub(crate) fn per_second(rate: f64) -> String {
    if !rate.is_finite() || rate <= 0.0 {
        return "0/s".to_owned();
    }
    if rate < 99.95 {
        return format!("{rate:.1}/s");
    }
    // Saturating: a rate past u64::MAX reads as the largest count.
    format!("{}/s", thousands(rate.round() as u64))
}

/// A rate of bytes per second for a progress line, in the binary units of [`bytes`] with one
/// decimal: `512 B/s`, `12.3 MiB/s`; `0 B/s` when nothing is measured yet.
pub(crate) fn bytes_per_second(rate: f64) -> String {
    if !rate.is_finite() || rate <= 0.0 {
        return "0 B/s".to_owned();
    }
    format!("{}/s", bytes(rate.round() as u64))
}

/// `n` and its noun, singular for exactly one: `count(1, "file", "files")` is `1 file`,
/// `count(0, "file", "files")` `0 files`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", noun(n, one, many))
}

/// The noun for `n` things: `one` for exactly one, else `many`.
pub(crate) fn noun<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1), "1 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(1024 * 1024 * 3 / 2), "1.5 MiB");
        assert_eq!(bytes(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(bytes(5 << 30), "5.0 GiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn rates_are_rounded_for_people() {
        assert_eq!(per_second(0.0), "0/s");
        assert_eq!(per_second(f64::NAN), "0/s");
        assert_eq!(per_second(f64::INFINITY), "0/s");
        assert_eq!(per_second(-3.0), "0/s");
        assert_eq!(per_second(0.04), "0.0/s");
        assert_eq!(per_second(0.5), "0.5/s");
        assert_eq!(per_second(12.345_678), "12.3/s");
        assert_eq!(per_second(99.94), "99.9/s");
        assert_eq!(per_second(99.96), "100/s");
        assert_eq!(per_second(1234.5678), "1,235/s");
        assert_eq!(per_second(12_345_678.9), "12,345,679/s");
        assert_eq!(bytes_per_second(0.0), "0 B/s");
        assert_eq!(bytes_per_second(512.4), "512 B/s");
        assert_eq!(bytes_per_second(12.9e6), "12.3 MiB/s");
        assert_eq!(bytes_per_second(1536.0), "1.5 KiB/s");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn counts_with_their_noun() {
        assert_eq!(count(0, "entry", "entries"), "0 entries");
        assert_eq!(count(1, "entry", "entries"), "1 entry");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
        assert_eq!(noun(1, "file", "files"), "file");
    }
}
