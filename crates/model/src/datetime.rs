//! W3C Datetime values (<https://www.w3.org/TR/NOTE-datetime>) as used by Sitemaps and
//! ResourceSync (Z39.99-2014 §7, Appendix A).
//!
//! A value keeps the precision it was written with (year, month, day, minutes, seconds,
//! fractional seconds) and its time zone designator, so that it is written back exactly as it
//! was read. Values are ordered by the instant they start at (a value without a time of day is
//! taken at midnight UTC), then by precision and representation, so that the order is total and
//! agrees with equality.
//!
//! The parser is written by hand: general ISO 8601 parsers accept far more than the W3C profile
//! allows and do not report the precision a value was written with, which a faithful round trip
//! needs. `jiff` does the calendar arithmetic.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use jiff::civil;
use jiff::tz::Offset;

/// How much of a W3C Datetime was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Precision {
    /// `YYYY`
    Year,
    /// `YYYY-MM`
    Month,
    /// `YYYY-MM-DD`
    Day,
    /// `YYYY-MM-DDThh:mmTZD`
    Minute,
    /// `YYYY-MM-DDThh:mm:ssTZD`
    Second,
    /// `YYYY-MM-DDThh:mm:ss.sTZD`, with one to nine fractional digits.
    Fraction,
}

/// The time zone designator of a value with a time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tz {
    /// No designator: only for values without a time of day (taken as UTC).
    None,
    /// `Z`
    Utc,
    /// `+hh:mm` or `-hh:mm`, in minutes east of UTC (`+00:00` is kept apart from `Z`).
    Offset(i16),
}

/// A W3C Datetime, kept at the precision it was given with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct W3cDateTime {
    ts: Timestamp,
    year: i16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    nanos: u32,
    frac_digits: u8,
    precision: Precision,
    tz: Tz,
}

/// Why a string is not a W3C Datetime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid W3C datetime {value:?}: {reason}")]
pub struct DateTimeError {
    /// The rejected text (cut to 64 characters).
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl W3cDateTime {
    /// Parses a W3C Datetime in any of its six precisions.
    pub fn parse(s: &str) -> Result<Self, DateTimeError> {
        parse(s.as_bytes()).map_err(|reason| DateTimeError {
            value: s.chars().take(64).collect(),
            reason,
        })
    }

    /// A value at second precision in UTC (`YYYY-MM-DDThh:mm:ssZ`) for an instant, or at
    /// fractional precision when the instant has a sub-second part.
    pub fn from_timestamp(ts: Timestamp) -> Self {
        let dt = Offset::UTC.to_datetime(ts);
        let nanos = u32::try_from(dt.subsec_nanosecond()).unwrap_or(0);
        let (precision, frac_digits) = if nanos == 0 {
            (Precision::Second, 0)
        } else {
            // Shortest exact representation of the fraction.
            let mut digits = 9u8;
            let mut n = nanos;
            while n % 10 == 0 {
                n /= 10;
                digits -= 1;
            }
            (Precision::Fraction, digits)
        };
        W3cDateTime {
            ts,
            year: dt.year(),
            month: dt.month() as u8,
            day: dt.day() as u8,
            hour: dt.hour() as u8,
            minute: dt.minute() as u8,
            second: dt.second() as u8,
            nanos,
            frac_digits,
            precision,
            tz: Tz::Utc,
        }
    }

    /// The current time, at second precision (or finer when `fraction` is set) in UTC.
    pub fn now(fraction: bool) -> Self {
        let now = Timestamp::now();
        if fraction {
            Self::from_timestamp(now)
        } else {
            Self::from_timestamp(Timestamp::from_second(now.as_second()).unwrap_or(now))
        }
    }

    /// The instant the value starts at. Values without a time of day are taken at midnight UTC.
    pub fn timestamp(&self) -> Timestamp {
        self.ts
    }

    /// The precision the value was written with.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The time zone designator.
    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// Whether the value is a complete UTC date and time (`YYYY-MM-DDThh:mm:ss[.s]Z`), the form
    /// Z39.99-2014 §7 recommends for `at`, `completed`, `from` and `until`.
    pub fn is_recommended_form(&self) -> bool {
        self.tz == Tz::Utc && self.precision >= Precision::Second
    }

    /// Compares the instants of two values, ignoring precision and representation.
    pub fn cmp_instant(&self, other: &Self) -> Ordering {
        self.ts.cmp(&other.ts)
    }
}

impl Ord for W3cDateTime {
    fn cmp(&self, other: &Self) -> Ordering {
        self.ts
            .cmp(&other.ts)
            .then(self.precision.cmp(&other.precision))
            .then(self.tz.cmp(&other.tz))
            .then(self.frac_digits.cmp(&other.frac_digits))
    }
}

impl PartialOrd for W3cDateTime {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for W3cDateTime {
    type Err = DateTimeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Writes `n` as `N` decimal digits (zero-padded, `n < 10^N`) at the end of `out`.
fn push_digits<const N: usize>(out: &mut Vec<u8>, mut n: u32) {
    let mut d = [b'0'; N];
    for slot in d.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.extend_from_slice(&d);
}

impl W3cDateTime {
    /// The text of a UTC date-time at second or finer precision with a year 0..=9999 (every
    /// datetime a writer emits in practice), without the formatting machinery: this runs for
    /// every `lastmod` and `datetime` written.
    fn fast_text(&self, out: &mut Vec<u8>) -> bool {
        let Ok(year) = u32::try_from(self.year) else {
            return false;
        };
        if year > 9999
            || self.precision < Precision::Second
            || self.tz != Tz::Utc
            || (self.precision == Precision::Fraction && !(1..=9).contains(&self.frac_digits))
        {
            return false;
        }
        push_digits::<4>(out, year);
        out.push(b'-');
        push_digits::<2>(out, u32::from(self.month));
        out.push(b'-');
        push_digits::<2>(out, u32::from(self.day));
        out.push(b'T');
        push_digits::<2>(out, u32::from(self.hour));
        out.push(b':');
        push_digits::<2>(out, u32::from(self.minute));
        out.push(b':');
        push_digits::<2>(out, u32::from(self.second));
        if self.precision == Precision::Fraction {
            let digits = u32::from(self.frac_digits);
            out.push(b'.');
            push_digits::<9>(out, self.nanos);
            // Keep the recorded number of fraction digits.
            out.truncate(out.len() - (9 - digits as usize));
        }
        out.push(b'Z');
        true
    }
}

impl fmt::Display for W3cDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Vec::with_capacity(32);
        if self.fast_text(&mut buf) {
            return f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?);
        }
        write!(f, "{:04}", self.year)?;
        if self.precision == Precision::Year {
            return Ok(());
        }
        write!(f, "-{:02}", self.month)?;
        if self.precision == Precision::Month {
            return Ok(());
        }
        write!(f, "-{:02}", self.day)?;
        if self.precision == Precision::Day {
            return Ok(());
        }
        write!(f, "T{:02}:{:02}", self.hour, self.minute)?;
        if self.precision >= Precision::Second {
            write!(f, ":{:02}", self.second)?;
        }
        if self.precision == Precision::Fraction {
            let digits = usize::from(self.frac_digits);
            let scaled = self.nanos / 10u32.pow(9 - u32::from(self.frac_digits));
            write!(f, ".{scaled:0digits$}")?;
        }
        match self.tz {
            Tz::None => Ok(()),
            Tz::Utc => f.write_str("Z"),
            Tz::Offset(m) => {
                let sign = if m < 0 { '-' } else { '+' };
                let m = m.unsigned_abs();
                write!(f, "{sign}{:02}:{:02}", m / 60, m % 60)
            }
        }
    }
}

impl serde::Serialize for W3cDateTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn digits(b: &[u8], at: usize, n: usize) -> Result<u32, &'static str> {
    let Some(part) = b.get(at..at + n) else {
        return Err("value ends too early");
    };
    let mut v = 0u32;
    for &c in part {
        if !c.is_ascii_digit() {
            return Err("expected a digit");
        }
        v = v * 10 + u32::from(c - b'0');
    }
    Ok(v)
}

fn expect(b: &[u8], at: usize, c: u8, what: &'static str) -> Result<(), &'static str> {
    if b.get(at) == Some(&c) {
        Ok(())
    } else {
        Err(what)
    }
}

/// The fields of a value as written, before they are checked as a date and a time of day.
struct Fields {
    year: i16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    nanos: u32,
    frac_digits: u8,
    precision: Precision,
    tz: Tz,
}

fn parse(b: &[u8]) -> Result<W3cDateTime, &'static str> {
    if b.len() > 64 {
        return Err("too long");
    }
    let (f, end) = parse_fields(b)?;
    if end != b.len() {
        return Err("unexpected characters after the value");
    }
    to_value(f)
}

/// The fields of the six formats of the W3C profile, as far as `b` goes: the date to the
/// precision given, then a time of day with its designator. Returns where they end.
#[inline]
fn parse_fields(b: &[u8]) -> Result<(Fields, usize), &'static str> {
    let mut f = Fields {
        year: digits(b, 0, 4)? as i16,
        month: 1,
        day: 1,
        hour: 0,
        minute: 0,
        second: 0,
        nanos: 0,
        frac_digits: 0,
        precision: Precision::Year,
        tz: Tz::None,
    };
    if b.len() == 4 {
        return Ok((f, 4));
    }
    expect(b, 4, b'-', "expected '-' after the year")?;
    f.month = digits(b, 5, 2)? as u8;
    f.precision = Precision::Month;
    if b.len() == 7 {
        return Ok((f, 7));
    }
    expect(b, 7, b'-', "expected '-' after the month")?;
    f.day = digits(b, 8, 2)? as u8;
    f.precision = Precision::Day;
    if b.len() == 10 {
        return Ok((f, 10));
    }
    let i = parse_time(b, &mut f)?;
    let i = parse_tz(b, i, &mut f)?;
    Ok((f, i))
}

/// `Thh:mm`, then `:ss` and `.s` when given (from byte 10). Returns where it ends.
#[inline]
fn parse_time(b: &[u8], f: &mut Fields) -> Result<usize, &'static str> {
    expect(b, 10, b'T', "expected 'T' after the date")?;
    f.hour = digits(b, 11, 2)? as u8;
    expect(b, 13, b':', "expected ':' after the hour")?;
    f.minute = digits(b, 14, 2)? as u8;
    f.precision = Precision::Minute;
    if b.get(16) != Some(&b':') {
        return Ok(16);
    }
    f.second = digits(b, 17, 2)? as u8;
    f.precision = Precision::Second;
    if b.get(19) != Some(&b'.') {
        return Ok(19);
    }
    let start = 20;
    let mut end = start;
    while end < b.len() && b[end].is_ascii_digit() {
        end += 1;
    }
    let n = end - start;
    if n == 0 {
        return Err("expected digits after the decimal point");
    }
    if n > 9 {
        return Err("more than nine fractional digits");
    }
    let v = digits(b, start, n)?;
    f.nanos = v * 10u32.pow(9 - n as u32);
    f.frac_digits = n as u8;
    f.precision = Precision::Fraction;
    Ok(end)
}

/// The time zone designator at `i`: `Z` or `+hh:mm`/`-hh:mm`. Returns where it ends.
#[inline]
fn parse_tz(b: &[u8], i: usize, f: &mut Fields) -> Result<usize, &'static str> {
    match b.get(i) {
        Some(b'Z') => {
            f.tz = Tz::Utc;
            Ok(i + 1)
        }
        Some(&s @ (b'+' | b'-')) => {
            let oh = digits(b, i + 1, 2)?;
            expect(b, i + 3, b':', "expected ':' in the time zone offset")?;
            let om = digits(b, i + 4, 2)?;
            if oh > 23 || om > 59 {
                return Err("time zone offset out of range");
            }
            let m = (oh * 60 + om) as i16;
            f.tz = Tz::Offset(if s == b'-' { -m } else { m });
            Ok(i + 6)
        }
        None => Err("a time of day needs a time zone designator (Z or +hh:mm)"),
        Some(_) => Err("expected a time zone designator (Z or +hh:mm)"),
    }
}

/// The value of fields that name a day of the calendar and a time of day, at the instant
/// they give.
#[inline]
fn to_value(f: Fields) -> Result<W3cDateTime, &'static str> {
    if !(1..=12).contains(&f.month) {
        return Err("month out of range");
    }
    if f.hour > 23 || f.minute > 59 || f.second > 59 {
        return Err("time of day out of range");
    }
    let date = civil::Date::new(f.year, f.month as i8, f.day as i8).map_err(|_| "no such day")?;
    let dt = date.to_datetime(
        civil::Time::new(f.hour as i8, f.minute as i8, f.second as i8, f.nanos as i32)
            .map_err(|_| "time of day out of range")?,
    );
    let offset = match f.tz {
        Tz::Offset(m) => Offset::from_seconds(i32::from(m) * 60).map_err(|_| "bad offset")?,
        _ => Offset::UTC,
    };
    let ts = offset
        .to_timestamp(dt)
        .map_err(|_| "instant out of the supported range")?;
    Ok(W3cDateTime {
        ts,
        year: f.year,
        month: f.month,
        day: f.day,
        hour: f.hour,
        minute: f.minute,
        second: f.second,
        nanos: f.nanos,
        frac_digits: f.frac_digits,
        precision: f.precision,
        tz: f.tz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_six_precisions_round_trip() {
        // W3C NOTE-datetime, the six formats.
        for s in [
            "1997",
            "1997-07",
            "1997-07-16",
            "1997-07-16T19:20+01:00",
            "1997-07-16T19:20:30+01:00",
            "1997-07-16T19:20:30.45+01:00",
            "2013-01-03T09:00:00Z",
            "2013-01-03T09:00:00.000Z",
            "2013-01-03T09:00:00+00:00",
            "2013-01-03T09:00:00-05:30",
            "2013-01-03T09:00:00.123456789Z",
        ] {
            let v = W3cDateTime::parse(s).unwrap();
            assert_eq!(v.to_string(), s);
        }
    }

    #[test]
    fn precision_is_reported() {
        let p = |s| W3cDateTime::parse(s).unwrap().precision();
        assert_eq!(p("2013"), Precision::Year);
        assert_eq!(p("2013-02"), Precision::Month);
        assert_eq!(p("2013-02-03"), Precision::Day);
        assert_eq!(p("2013-02-03T10:00Z"), Precision::Minute);
        assert_eq!(p("2013-02-03T10:00:00Z"), Precision::Second);
        assert_eq!(p("2013-02-03T10:00:00.5Z"), Precision::Fraction);
    }

    #[test]
    fn ordered_by_instant_across_offsets() {
        let a = W3cDateTime::parse("2013-01-03T09:00:00Z").unwrap();
        let b = W3cDateTime::parse("2013-01-03T10:30:00+01:00").unwrap();
        let c = W3cDateTime::parse("2013-01-03T09:00:00.001Z").unwrap();
        assert!(a < b);
        assert!(a < c && c < b);
        assert_eq!(
            a.cmp_instant(&W3cDateTime::parse("2013-01-03T10:00:00+01:00").unwrap()),
            Ordering::Equal
        );
        // A day starts at midnight UTC.
        let d = W3cDateTime::parse("2013-01-03").unwrap();
        assert!(d < a);
        assert_eq!(
            d.cmp_instant(&W3cDateTime::parse("2013-01-03T00:00Z").unwrap()),
            Ordering::Equal
        );
    }

    #[test]
    fn rejects_malformed_values() {
        for s in [
            "",
            "13",
            "2013-1-03",
            "2013-13",
            "2013-02-30",
            "2013-01-03T09:00:00",
            "2013-01-03T09:00",
            "2013-01-03T25:00:00Z",
            "2013-01-03T09:60:00Z",
            "2013-01-03T09:00:00.Z",
            "2013-01-03T09:00:00.1234567890Z",
            "2013-01-03T09:00:00+0100",
            "2013-01-03T09:00:00+24:00",
            "2013-01-03 09:00:00Z",
            "2013-01-03T09:00:00Zjunk",
            "२०१३",
        ] {
            assert!(W3cDateTime::parse(s).is_err(), "{s} accepted");
        }
    }

    #[test]
    fn from_timestamp_picks_shortest_form() {
        let t = Timestamp::from_second(1_357_203_600).unwrap();
        assert_eq!(
            W3cDateTime::from_timestamp(t).to_string(),
            "2013-01-03T09:00:00Z"
        );
        let t = Timestamp::new(1_357_203_600, 250_000_000).unwrap();
        assert_eq!(
            W3cDateTime::from_timestamp(t).to_string(),
            "2013-01-03T09:00:00.25Z"
        );
    }
}
