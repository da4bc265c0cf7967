//! The parts of XML 1.0 the XML parser lets through and the reader checks itself: the XML
//! declaration's syntax (XML 1.0 §2.8, productions [23]-[26] and [32]; §4.3.3, [80] and [81])
//! and processing-instruction targets (§2.6, [16] and [17]).
//!
//! Both run only on `<?...?>` tokens, which are rare, so they cost nothing on the entries.

/// A fault in a declaration: the byte index in the declaration's text (as given to
/// [`check_declaration`]) where it is, and what is wrong.
pub(super) type DeclFault = (usize, String);

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Checks an XML declaration. `text` is what lies between `<?` and `?>`, starting with `xml`
/// (the XML parser only hands over a declaration when `xml` is followed by white space or the
/// end).
///
/// XMLDecl ::= '<?xml' VersionInfo EncodingDecl? SDDecl? S? '?>'   (XML 1.0 [23])
pub(super) fn check_declaration(text: &str) -> Result<(), DeclFault> {
    let b = text.as_bytes();
    let mut i = 3; // after "xml"
    // 0: nothing yet, 1: version, 2: encoding, 3: standalone (the order of [23]).
    let mut seen = 0u8;
    loop {
        let space_start = i;
        i = skip_space(b, i);
        if i == b.len() {
            break;
        }
        if i == space_start {
            // [24], [80], [32] each begin with S.
            return Err((
                i,
                "the XML declaration's pseudo-attributes must be separated by white space \
                 (XML 1.0 §2.8 [24], [32]; §4.3.3 [80])"
                    .into(),
            ));
        }
        let (name, order, name_end) = pseudo_attribute_name(text, i, seen)?;
        let (value_start, value_end) = pseudo_attribute_value(text, name_end, name)?;
        if let Err(p) = check_value(order, &text[value_start..value_end]) {
            return Err((value_start, p));
        }
        seen = order;
        i = value_end + 1;
    }
    if seen == 0 {
        return Err((3, NO_VERSION.into()));
    }
    Ok(())
}

/// The fault of a declaration without `version`.
const NO_VERSION: &str = "the XML declaration has no version (XML 1.0 §2.8 [23], [24]): write \
                          <?xml version=\"1.0\" encoding=\"UTF-8\"?>";

/// The index of the first byte at or after `i` that is not white space.
fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_space(b[i]) {
        i += 1;
    }
    i
}

/// The pseudo-attribute name at `start`, after the ones `seen` (see [`check_declaration`]):
/// the name, its place in the order of [23] and where it ends.
fn pseudo_attribute_name(
    text: &str,
    start: usize,
    seen: u8,
) -> Result<(&str, u8, usize), DeclFault> {
    let b = text.as_bytes();
    let mut i = start;
    while i < b.len() && b[i].is_ascii_alphanumeric() {
        i += 1;
    }
    let name = &text[start..i];
    let order = match name {
        "version" => 1,
        "encoding" => 2,
        "standalone" => 3,
        _ => {
            let what: String = text[start..].chars().take(20).collect();
            return Err((
                start,
                format!(
                    "unexpected {what:?} in the XML declaration, which holds version, then \
                     optionally encoding and standalone (XML 1.0 §2.8 [23])"
                ),
            ));
        }
    };
    if seen == 0 && order != 1 {
        let msg = if text[i..].contains("version") {
            format!("the XML declaration must begin with version, not {name} (XML 1.0 §2.8 [23])")
        } else {
            NO_VERSION.to_owned()
        };
        return Err((start, msg));
    }
    if order <= seen {
        return Err((
            start,
            format!(
                "{name} is repeated or out of order in the XML declaration: the order is \
                 version, encoding, standalone (XML 1.0 §2.8 [23])"
            ),
        ));
    }
    Ok((name, order, i))
}

/// The `= "value"` after pseudo-attribute `name`, from `i`: where the value starts and ends
/// (at its closing quote).
///
/// Eq ::= S? '=' S?   ([25])
fn pseudo_attribute_value(text: &str, i: usize, name: &str) -> Result<(usize, usize), DeclFault> {
    let b = text.as_bytes();
    let i = skip_space(b, i);
    if b.get(i) != Some(&b'=') {
        return Err((
            i,
            format!("expected '=' after {name} in the XML declaration (XML 1.0 §2.8 [25])"),
        ));
    }
    let i = skip_space(b, i + 1);
    let quote = match b.get(i) {
        Some(&q @ (b'"' | b'\'')) => q,
        _ => {
            return Err((
                i,
                format!("the value of {name} in the XML declaration must be quoted"),
            ));
        }
    };
    let value_start = i + 1;
    let Some(len) = b[value_start..].iter().position(|&c| c == quote) else {
        return Err((
            i,
            format!("the value of {name} in the XML declaration has no closing quote"),
        ));
    };
    Ok((value_start, value_start + len))
}

/// What is wrong with the value of the pseudo-attribute at place `order` of [23], if anything.
fn check_value(order: u8, value: &str) -> Result<(), String> {
    match order {
        // VersionNum ::= '1.' [0-9]+   ([26])
        1 if !(value.len() > 2
            && value.starts_with("1.")
            && value[2..].bytes().all(|c| c.is_ascii_digit())) =>
        {
            Err(format!(
                "version {value:?} is not an XML 1.x version number (XML 1.0 §2.8 [26]): \
                 write version=\"1.0\""
            ))
        }
        // EncName ::= [A-Za-z] ([A-Za-z0-9._] | '-')*   ([81])
        2 if !(value
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && value
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))) =>
        {
            Err(format!(
                "encoding name {value:?} is not well-formed (XML 1.0 §4.3.3 [81])"
            ))
        }
        // SDDecl: 'yes' | 'no'   ([32])
        3 if value != "yes" && value != "no" => Err(format!(
            "standalone must be \"yes\" or \"no\", not {value:?} (XML 1.0 §2.9 [32])"
        )),
        _ => Ok(()),
    }
}

/// Checks a processing instruction's target: an XML name ([16]), and not `xml` in any case
/// ([17]: "PITarget ::= Name - (('X' | 'x') ('M' | 'm') ('L' | 'l'))"). Targets that only
/// begin with `xml`, such as `xml-stylesheet`, are allowed.
pub(super) fn check_pi_target(target: &str, first: bool) -> Result<(), String> {
    if target.eq_ignore_ascii_case("xml") {
        return Err(if first {
            format!(
                "<?{target} is not an XML declaration: the declaration is written <?xml in lower \
                 case (XML 1.0 §2.8 [23]), and {target} is a reserved name no processing \
                 instruction may have (§2.6 [17])"
            )
        } else {
            format!(
                "a processing instruction may not be named {target} (xml in any case is reserved, \
                 XML 1.0 §2.6 [17])"
            )
        });
    }
    if !is_name(target) {
        let t: String = target.chars().take(40).collect();
        return Err(format!(
            "processing instruction target {t:?} is not an XML name (XML 1.0 §2.6 [16])"
        ));
    }
    Ok(())
}

/// Whether `s` is an XML name (XML 1.0 §2.3 [5]). ASCII characters are checked exactly; other
/// characters are accepted (the name-start ranges of [4] admit nearly all letters).
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let start = |c: char| !c.is_ascii() || c.is_ascii_alphabetic() || c == '_' || c == ':';
    start(first) && chars.all(|c| start(c) || c.is_ascii_digit() || c == '-' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(decl: &str) -> Option<usize> {
        check_declaration(decl).err().map(|(i, _)| i)
    }

    #[test]
    fn declarations_follow_the_productions() {
        for ok in [
            "xml version=\"1.0\"",
            "xml version='1.0' encoding='UTF-8'",
            "xml version=\"1.1\" encoding=\"utf-8\" standalone=\"yes\" ",
            "xml version = \"1.0\"\n encoding = 'ISO-8859-1'",
            "xml version=\"1.0\" standalone='no'",
        ] {
            assert_eq!(check_declaration(ok), Ok(()), "{ok}");
        }
        assert_eq!(fault("xml"), Some(3));
        assert_eq!(fault("xml encoding=\"UTF-8\""), Some(4));
        assert_eq!(fault("xml encoding=\"UTF-8\" version=\"1.0\""), Some(4));
        assert_eq!(fault("xml version=\"2.0\""), Some(13));
        assert_eq!(fault("xml version=\"1.\""), Some(13));
        assert_eq!(fault("xml version=\"1.0\" standalone=\"maybe\""), Some(30));
        assert_eq!(fault("xml version=\"1.0\"encoding=\"UTF-8\""), Some(17));
        assert_eq!(fault("xml version=\"1.0\" version=\"1.0\""), Some(18));
        assert_eq!(
            fault("xml version=\"1.0\" standalone=\"no\" encoding=\"x\""),
            Some(34)
        );
        assert_eq!(fault("xml version=\"1.0\" encoding=\"8bit\""), Some(28));
        assert_eq!(fault("xml version=1.0"), Some(12));
        assert_eq!(fault("xml version=\"1.0"), Some(12));
        assert_eq!(fault("xml version \"1.0\""), Some(12));
        assert_eq!(fault("xml version=\"1.0\" foo=\"bar\""), Some(18));
    }

    #[test]
    fn pi_targets() {
        assert!(check_pi_target("xml-stylesheet", false).is_ok());
        assert!(check_pi_target("xmlfoo", false).is_ok());
        assert!(check_pi_target("php", false).is_ok());
        for bad in ["XML", "Xml", "xmL"] {
            assert!(check_pi_target(bad, true).is_err(), "{bad}");
            assert!(check_pi_target(bad, false).is_err(), "{bad}");
        }
        assert!(check_pi_target("", false).is_err());
        assert!(check_pi_target("1abc", false).is_err());
        assert!(check_pi_target("xmlversion=\"1.0\"", true).is_err());
    }
}
