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
    fn counts_with_their_noun() {
        assert_eq!(count(0, "entry", "entries"), "0 entries");
        assert_eq!(count(1, "entry", "entries"), "1 entry");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
        assert_eq!(noun(1, "file", "files"), "file");
    }
}
