//! Writing SQL safely: every name that goes into a statement is quoted as an identifier
//! ([`ident`]), every value as a string literal ([`literal`]). Statements that take no bind
//! parameters for names (`CREATE DATABASE`, `ALTER ROLE`, `GRANT`) are built only from these,
//! keywords from fixed lists, and integers.

/// `name` as a quoted identifier: in double quotes, with double quotes doubled. A NUL cannot
/// be in a PostgreSQL name; it is dropped.
pub(crate) fn ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars().filter(|c| *c != '\0') {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `value` as a string literal: an escape string (`E'…'`) when it holds a backslash, quotes
/// doubled and backslashes doubled; NULs dropped.
pub(crate) fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 3);
    let escape = value.contains('\\');
    if escape {
        out.push('E');
    }
    out.push('\'');
    for c in value.chars().filter(|c| *c != '\0') {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `name` as an identifier, or the keyword `DEFAULT` as itself (provider-sql's convention for
/// `template` and `tablespace`).
pub(crate) fn ident_or_default(name: &str) -> String {
    if name == "DEFAULT" {
        name.to_owned()
    } else {
        ident(name)
    }
}

/// `value` as a literal, or the keyword `DEFAULT` as itself (`encoding`, `lcCollate`, …).
pub(crate) fn literal_or_default(value: &str) -> String {
    if value == "DEFAULT" {
        value.to_owned()
    } else {
        literal(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ident_should_quote_and_double_embedded_quotes() {
        assert_eq!(ident("app"), "\"app\"");
        assert_eq!(ident("Mixed Case"), "\"Mixed Case\"");
        assert_eq!(ident("a\"; DROP ROLE x; --"), "\"a\"\"; DROP ROLE x; --\"");
        assert_eq!(ident("nul\0byte"), "\"nulbyte\"");
    }

    #[test]
    fn literal_should_escape_quotes_and_backslashes() {
        assert_eq!(literal("secret"), "'secret'");
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(literal("back\\slash'"), "E'back\\\\slash'''");
    }

    #[test]
    fn default_keyword_should_pass_unquoted() {
        assert_eq!(ident_or_default("DEFAULT"), "DEFAULT");
        assert_eq!(ident_or_default("default"), "\"default\"");
        assert_eq!(literal_or_default("DEFAULT"), "DEFAULT");
        assert_eq!(literal_or_default("UTF8"), "'UTF8'");
    }
}
