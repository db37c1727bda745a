//! Error text rendered the way apimachinery renders it, so that the messages the API server puts
//! in a `Status` read exactly like kube-apiserver's: Go's `%q` string quoting, Go's `%#v` of a
//! `[]string`, `field.Error`'s `<path>: Invalid value: <value>: <detail>` and the
//! `utilerrors.Aggregate` list form.

use std::fmt::Write as _;

/// Quotes `s` as Go's `strconv.Quote` (and so `%q`) does: double quotes, backslash escapes for
/// `"` and `\`, C-style escapes for control characters, `\xNN` for other ASCII controls, and
/// `\uNNNN` / `\UNNNNNNNN` for non-printable non-ASCII characters.
///
/// Go's notion of "printable" comes from Unicode tables Rust's standard library does not have.
/// Here every non-ASCII character is printable except controls, whitespace other than U+0020,
/// the common invisible format characters and private-use characters. Unassigned code points,
/// which Go escapes, are kept as they are.
pub(super) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0B}' => out.push_str("\\v"),
            ' '..='~' => out.push(c),
            c if c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_go_printable(c) => out.push(c),
            c if u32::from(c) < 0x1_0000 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `unicode.IsPrint` for a non-ASCII character (see [`go_quote`]).
fn is_go_printable(c: char) -> bool {
    let cp = u32::from(c);
    let format_or_private = matches!(
        cp,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0xE000..=0xF8FF
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0xF_0000..=0x10_FFFF
    );
    !c.is_control() && !c.is_whitespace() && !format_or_private
}

/// Renders a list of strings as Go's `%#v` renders a `[]string`: `[]string{"a", "b"}`, or
/// `[]string(nil)` when empty (apimachinery passes a nil slice in every empty case that reaches
/// an error message).
pub(super) fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_owned();
    }
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// One `field.Invalid` error: `<path>: Invalid value: <rendered value>: <detail>`.
pub(super) fn invalid_value(path: &str, rendered_value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {rendered_value}: {detail}")
}

/// Renders errors as `utilerrors.NewAggregate(...).Error()` does: one message alone, several as
/// `[first, second]`, with duplicates dropped. `messages` must not be empty.
pub(super) fn aggregate(messages: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::with_capacity(messages.len());
    for m in messages {
        if !unique.contains(&m.as_str()) {
            unique.push(m);
        }
    }
    match unique.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_should_escape_quotes_backslashes_and_controls_like_strconv_quote() {
        assert_eq!(go_quote("plain"), r#""plain""#);
        assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(
            go_quote("\t\n\r\u{7}\u{8}\u{b}\u{c}"),
            r#""\t\n\r\a\b\v\f""#
        );
        assert_eq!(go_quote("\u{0}\u{1b}\u{7f}"), r#""\x00\x1b\x7f""#);
    }

    #[test]
    fn go_quote_should_keep_printable_unicode_and_escape_invisible_characters() {
        assert_eq!(go_quote("héllo☃"), "\"héllo☃\"");
        assert_eq!(go_quote("a\u{a0}b\u{200b}c"), r#""a\u00a0b\u200bc""#);
        assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
    }

    #[test]
    fn go_string_slice_should_render_like_percent_hash_v() {
        assert_eq!(go_string_slice(&[]), "[]string(nil)");
        assert_eq!(
            go_string_slice(&["a".to_owned(), "b\"".to_owned()]),
            r#"[]string{"a", "b\""}"#
        );
    }

    #[test]
    fn aggregate_should_bracket_several_messages_and_drop_duplicates() {
        assert_eq!(aggregate(&["one".to_owned()]), "one");
        assert_eq!(aggregate(&["one".to_owned(), "one".to_owned()]), "one");
        assert_eq!(
            aggregate(&["one".to_owned(), "two".to_owned(), "one".to_owned()]),
            "[one, two]"
        );
    }
}
