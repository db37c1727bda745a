//! The string form of a label selector, tokenised and parsed with apimachinery's grammar and
//! quirks, so that every input kube-apiserver accepts is accepted here with the same meaning and
//! every input it rejects is rejected with the same message.
//!
//! ```text
//! selector    ::= "" | requirement ("," requirement)*
//! requirement ::= "!" KEY | KEY | KEY ("in" | "notin") "(" values ")" | KEY op VALUE?
//! op          ::= "=" | "==" | "!=" | ">" | "<"
//! ```
//!
//! Quirks kept on purpose: blanks (space, tab, CR, LF) separate tokens and are otherwise
//! ignored; `in` and `notin` are also ordinary keys and values; a value list may hold empty
//! values (`(a,,b)`, `(,a)`, `()`); set values are sorted and de-duplicated; a NUL byte where a
//! token would start ends the input, and one right after a token is skipped.

use std::collections::BTreeSet;

use super::label::LabelSelectorError;
use super::label_syntax::label_key_problems;
use super::messages::{go_quote, invalid_value};
use super::requirement::{LabelOperator, LabelRequirement};

/// Parses the string form into its requirements, in the order written.
pub(super) fn parse_requirements(
    selector: &str,
) -> Result<Vec<LabelRequirement>, LabelSelectorError> {
    Parser {
        items: Lexer::new(selector).tokens(),
        position: 0,
    }
    .parse()
}

/// A lexical token. Keys and values are [`Token::Identifier`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    /// Symbols that form no token (cannot happen: every single symbol is one).
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// A token and the text it was read from.
#[derive(Clone, Copy, Debug)]
struct Item<'a> {
    token: Token,
    literal: &'a str,
}

/// Whether `in`/`notin` are operators here or plain identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// After a key, where `in` and `notin` are operators.
    KeyAndOperator,
    /// Everywhere else, where they are identifiers.
    Values,
}

/// Splits the input into tokens, reading bytes as apimachinery's lexer does.
struct Lexer<'a> {
    /// The whole input.
    input: &'a str,
    /// Index of the next byte to read; at most `input.len()`.
    position: usize,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The operator or punctuation token spelled `s`, if any.
fn symbol_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

impl<'a> Lexer<'a> {
    fn new(input: &'a str) -> Self {
        Lexer { input, position: 0 }
    }

    /// All tokens up to and including the first [`Token::EndOfString`].
    fn tokens(mut self) -> Vec<Item<'a>> {
        let mut items = Vec::new();
        loop {
            let item = self.lex();
            items.push(item);
            if item.token == Token::EndOfString {
                return items;
            }
        }
    }

    /// The next byte, or 0 at the end of input (a NUL byte reads the same but is consumed).
    fn read(&mut self) -> u8 {
        match self.input.as_bytes().get(self.position) {
            Some(&b) => {
                self.position += 1;
                b
            }
            None => 0,
        }
    }

    /// Gives back the byte just read (only ever called after reading a real byte).
    fn unread(&mut self) {
        self.position -= 1;
    }

    fn lex(&mut self) -> Item<'a> {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return Item {
                token: Token::EndOfString,
                literal: "",
            };
        }
        self.unread();
        if is_special_symbol(ch) {
            self.scan_symbol()
        } else {
            self.scan_identifier_or_keyword()
        }
    }

    /// Reads up to a symbol, a blank or the end; `in` and `notin` are keywords.
    fn scan_identifier_or_keyword(&mut self) -> Item<'a> {
        let start = self.position;
        let end = loop {
            let before = self.position;
            let ch = self.read();
            if ch == 0 {
                break before;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break before;
            }
        };
        // Only ASCII bytes end an identifier, so `start..end` falls on character boundaries.
        let literal = &self.input[start..end];
        let token = match literal {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Identifier,
        };
        Item { token, literal }
    }

    /// Reads the longest run of symbols that still spells a token (`==` and `!=` are the only
    /// two-symbol ones), reading one symbol past it and giving that back.
    fn scan_symbol(&mut self) -> Item<'a> {
        let start = self.position;
        let mut longest: Option<Item<'a>> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special_symbol(ch) {
                self.unread();
                break;
            }
            let buffer = &self.input[start..self.position];
            match symbol_token(buffer) {
                Some(token) => {
                    longest = Some(Item {
                        token,
                        literal: buffer,
                    });
                }
                None if longest.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        longest.unwrap_or(Item {
            token: Token::Error,
            literal: "error expected: keyword",
        })
    }
}

/// A recursive-descent parser over the token list, which always ends in
/// [`Token::EndOfString`].
struct Parser<'a> {
    items: Vec<Item<'a>>,
    /// Index of the next item; never past the final [`Token::EndOfString`].
    position: usize,
}

/// A requirement that could not be parsed, worded as apimachinery words it (without the
/// `unable to parse requirement: ` prefix the caller adds).
type RequirementResult<T> = Result<T, String>;

impl<'a> Parser<'a> {
    fn item(&self, context: Context) -> Item<'a> {
        let last = self.items.len() - 1;
        let mut item = self.items[self.position.min(last)];
        if context == Context::Values && matches!(item.token, Token::In | Token::NotIn) {
            item.token = Token::Identifier;
        }
        item
    }

    fn lookahead(&self, context: Context) -> Item<'a> {
        self.item(context)
    }

    fn consume(&mut self, context: Context) -> Item<'a> {
        let item = self.item(context);
        self.position = (self.position + 1).min(self.items.len() - 1);
        item
    }

    fn parse(mut self) -> Result<Vec<LabelRequirement>, LabelSelectorError> {
        let mut requirements = Vec::new();
        loop {
            let next = self.lookahead(Context::Values);
            match next.token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(LabelSelectorError::Requirement)?;
                    requirements.push(requirement);
                    let after = self.consume(Context::Values);
                    match after.token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let following = self.lookahead(Context::Values);
                            if !matches!(following.token, Token::Identifier | Token::DoesNotExist) {
                                return Err(LabelSelectorError::Syntax(format!(
                                    "found '{}', expected: identifier after ','",
                                    following.literal
                                )));
                            }
                        }
                        _ => {
                            return Err(LabelSelectorError::Syntax(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                after.literal
                            )));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(LabelSelectorError::Syntax(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        next.literal
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> RequirementResult<LabelRequirement> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = inferred {
            return LabelRequirement::new(key, operator, Vec::new()).map_err(|e| e.to_string());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            LabelOperator::In | LabelOperator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        LabelRequirement::new(key, operator, values.into_iter().collect())
            .map_err(|e| e.to_string())
    }

    /// Reads `!`? KEY. The operator is `DoesNotExist` after `!` (even if more follows, which
    /// the caller then rejects), `Exists` for a bare key, and otherwise still to be read.
    fn parse_key_and_infer_operator(
        &mut self,
    ) -> RequirementResult<(String, Option<LabelOperator>)> {
        let mut operator = None;
        let mut item = self.consume(Context::Values);
        if item.token == Token::DoesNotExist {
            operator = Some(LabelOperator::DoesNotExist);
            item = self.consume(Context::Values);
        }
        if item.token != Token::Identifier {
            return Err(format!("found '{}', expected: identifier", item.literal));
        }
        let problems = label_key_problems(item.literal);
        if !problems.is_empty() {
            // apimachinery validates the key here with a nil field path.
            return Err(invalid_value(
                "<nil>",
                &go_quote(item.literal),
                &problems.join("; "),
            ));
        }
        let next = self.lookahead(Context::Values).token;
        if matches!(next, Token::EndOfString | Token::Comma) && operator.is_none() {
            operator = Some(LabelOperator::Exists);
        }
        Ok((item.literal.to_owned(), operator))
    }

    fn parse_operator(&mut self) -> RequirementResult<LabelOperator> {
        let item = self.consume(Context::KeyAndOperator);
        Ok(match item.token {
            Token::In => LabelOperator::In,
            Token::Equals => LabelOperator::Equals,
            Token::DoubleEquals => LabelOperator::DoubleEquals,
            Token::GreaterThan => LabelOperator::GreaterThan,
            Token::LessThan => LabelOperator::LessThan,
            Token::NotIn => LabelOperator::NotIn,
            Token::NotEquals => LabelOperator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    item.literal
                ))
            }
        })
    }

    /// Reads `(` values `)`; `()` is the one empty value.
    fn parse_values(&mut self) -> RequirementResult<BTreeSet<String>> {
        let open = self.consume(Context::Values);
        if open.token != Token::OpenPar {
            return Err(format!("found '{}' expected: '('", open.literal));
        }
        let first = self.lookahead(Context::Values);
        match first.token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).token != Token::ClosedPar {
                    return Err(format!("found '{}', expected: ')'", first.literal));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!(
                "found '{}', expected: ',', ')' or identifier",
                first.literal
            )),
        }
    }

    /// Reads comma-separated, possibly empty values up to (not including) `)`.
    fn parse_identifiers_list(&mut self) -> RequirementResult<BTreeSet<String>> {
        let mut values = BTreeSet::new();
        loop {
            let item = self.consume(Context::Values);
            match item.token {
                Token::Identifier => {
                    values.insert(item.literal.to_owned());
                    let next = self.lookahead(Context::Values);
                    match next.token {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{}', expected: ',' or ')'", next.literal)),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.lookahead(Context::Values).token {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => {
                    return Err(format!(
                        "found '{}', expected: ',', or identifier",
                        item.literal
                    ))
                }
            }
        }
    }

    /// Reads the value after `=`, `==`, `!=`, `>` or `<`; none at all is the empty value.
    fn parse_exact_value(&mut self) -> RequirementResult<BTreeSet<String>> {
        let next = self.lookahead(Context::Values).token;
        if matches!(next, Token::EndOfString | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let item = self.consume(Context::Values);
        if item.token == Token::Identifier {
            Ok(BTreeSet::from([item.literal.to_owned()]))
        } else {
            Err(format!("found '{}', expected: identifier", item.literal))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::selector::LabelSelector;

    const NAME_PART_SHAPE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_SHAPE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    /// Parses `input` and returns its canonical form.
    fn canonical(input: &str) -> String {
        match LabelSelector::parse(input) {
            Ok(selector) => selector.to_string(),
            Err(e) => panic!("{input:?} should parse, got: {e}"),
        }
    }

    /// Parses `input`, which must fail, and returns the error message.
    fn error(input: &str) -> String {
        match LabelSelector::parse(input) {
            Ok(selector) => panic!("{input:?} should not parse, got {selector:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parse_should_accept_every_operator() {
        for (input, expected) in [
            ("", ""),
            ("x=a", "x=a"),
            ("x==a", "x==a"),
            ("x!=a", "x!=a"),
            ("x", "x"),
            ("!x", "!x"),
            ("x in (a,b)", "x in (a,b)"),
            ("x notin (a)", "x notin (a)"),
            ("x>1", "x>1"),
            ("x<10", "x<10"),
            ("x>01", "x>01"),
            ("example.com/x=y", "example.com/x=y"),
            ("x=A.b_c-9", "x=A.b_c-9"),
        ] {
            assert_eq!(canonical(input), expected, "{input:?}");
        }
    }

    #[test]
    fn parse_should_agree_with_apimachinery_on_its_classic_cases() {
        for (input, expected) in [
            ("\rx", "x"),
            ("x= ,z= ", "x=,z="),
            ("x>1,z<5", "x>1,z<5"),
            ("x notin ( )", "x notin ()"),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
            ),
            ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
            (
                "x notin (abc,,def),bar,z in (),w",
                "bar,w,x notin (,abc,def),z in ()",
            ),
        ] {
            assert_eq!(canonical(input), expected, "{input:?}");
        }
        for input in [
            "x=a||y=b",
            "x==a==b",
            "!x=a",
            "x<a",
            "x,,y",
            ",x,y",
            "x nott in (y)",
            "a in (xyz),",
            "a in (xyz)b notin ()",
            "a in (xyz abc)",
            "a notin(",
            "a (",
            "(",
        ] {
            assert!(
                LabelSelector::parse(input).is_err(),
                "{input:?} should not parse"
            );
        }
        assert_eq!(
            error("x==a==b"),
            "found '==', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn parse_should_tolerate_blanks_between_tokens() {
        assert_eq!(canonical("  x  =  a  "), "x=a");
        assert_eq!(canonical("x=a, y!=b"), "x=a,y!=b");
        assert_eq!(canonical("\tx\r\n in\n(\ta ,b ) "), "x in (a,b)");
        assert_eq!(canonical(" ! x "), "!x");
        assert_eq!(canonical("x in(a)"), "x in (a)");
        assert_eq!(canonical("x notin(a)"), "x notin (a)");
        assert_eq!(canonical("   "), "");
    }

    #[test]
    fn parse_should_take_an_omitted_value_as_empty() {
        assert_eq!(canonical("x="), "x=");
        assert_eq!(canonical("x==,y"), "x==,y");
        assert_eq!(canonical("x!="), "x!=");
        assert_eq!(canonical("x in ()"), "x in ()");
        assert_eq!(canonical("x in (,)"), "x in ()");
        assert_eq!(canonical("x in (a,,b)"), "x in (,a,b)");
        assert_eq!(canonical("x in (,a)"), "x in (,a)");
        assert_eq!(canonical("x notin (a,)"), "x notin (,a)");
    }

    #[test]
    fn parse_should_sort_and_deduplicate_set_values() {
        assert_eq!(canonical("x in (c,a,b,a)"), "x in (a,b,c)");
    }

    #[test]
    fn parse_should_treat_in_and_notin_as_names_where_an_identifier_is_expected() {
        assert_eq!(canonical("in"), "in");
        assert_eq!(canonical("in in (in,notin)"), "in in (in,notin)");
        assert_eq!(canonical("notin=in"), "notin=in");
        assert_eq!(canonical("!notin"), "!notin");
    }

    #[test]
    fn parse_should_stop_at_a_nul_where_a_token_starts_and_skip_one_after_a_token() {
        // Regression guard for a lexer quirk of apimachinery kept on purpose: it reads bytes
        // and takes NUL as the end of input.
        assert_eq!(canonical("x=a \u{0}y=b"), "x=a");
        assert_eq!(canonical("x\u{0}=a"), "x=a");
        assert_eq!(
            error("x=a\u{0}y"),
            "found 'y', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn parse_should_reject_junk_between_requirements_without_the_requirement_prefix() {
        assert_eq!(
            error(","),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            error("("),
            "found '(', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            error("!=a"),
            "found '!=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(error("x=a,"), "found '', expected: identifier after ','");
        assert_eq!(error("x=a,,y"), "found ',', expected: identifier after ','");
        assert_eq!(
            error("x=a b"),
            "found 'b', expected: ',' or 'end of string'"
        );
        assert_eq!(error("x=a)"), "found ')', expected: ',' or 'end of string'");
        assert_eq!(error("!x=a"), "found '=', expected: ',' or 'end of string'");
    }

    #[test]
    fn parse_should_reject_malformed_requirements_with_the_requirement_prefix() {
        for (input, detail) in [
            ("x y", "found 'y', expected: in, notin, =, ==, !=, gt, lt"),
            ("x (", "found '(', expected: in, notin, =, ==, !=, gt, lt"),
            ("x!y", "found '!', expected: in, notin, =, ==, !=, gt, lt"),
            ("!", "found '', expected: identifier"),
            ("!!x", "found '!', expected: identifier"),
            ("x=(", "found '(', expected: identifier"),
            ("x=!y", "found '!', expected: identifier"),
            ("x===y", "found '=', expected: identifier"),
            ("x in a", "found 'a' expected: '('"),
            ("x in", "found '' expected: '('"),
            ("x in (", "found '', expected: ',', ')' or identifier"),
            ("x in (=)", "found '=', expected: ',', ')' or identifier"),
            ("x in (a", "found '', expected: ',' or ')'"),
            ("x in (a b)", "found 'b', expected: ',' or ')'"),
            ("x in (,,)", "found ')', expected: ',', or identifier"),
            ("x in (a,=)", "found '=', expected: ',', or identifier"),
        ] {
            assert_eq!(
                error(input),
                format!("unable to parse requirement: {detail}"),
                "{input:?}"
            );
        }
    }

    #[test]
    fn parse_should_report_an_invalid_key_with_a_nil_path_like_kube_apiserver() {
        // Text observed from kube-apiserver for `kubectl get pods -l app:monolith`.
        assert_eq!(
            error("app:monolith"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": {NAME_PART_SHAPE}"
            )
        );
        assert_eq!(
            error("x,-y"),
            format!("unable to parse requirement: <nil>: Invalid value: \"-y\": {NAME_PART_SHAPE}")
        );
        assert_eq!(
            error("a/"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; {NAME_PART_SHAPE}"
            )
        );
        assert!(error("app.kubernetes_io/name=v").starts_with(
            "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": prefix part a lowercase RFC 1123 subdomain"
        ));
        assert!(error("a/b/c ?=? def").starts_with(
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must"
        ));
        assert!(
            error("é=1").starts_with("unable to parse requirement: <nil>: Invalid value: \"é\"")
        );
    }

    #[test]
    fn parse_should_report_invalid_values_with_their_index_and_key() {
        assert_eq!(
            error("x=a@b"),
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"a@b\": {VALUE_SHAPE}"
            )
        );
        assert_eq!(
            error("x in (a,-b)"),
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"-b\": {VALUE_SHAPE}"
            )
        );
        assert_eq!(
            error("x notin (-b,-a)"),
            format!(
                "unable to parse requirement: [values[0][x]: Invalid value: \"-a\": {VALUE_SHAPE}, values[1][x]: Invalid value: \"-b\": {VALUE_SHAPE}]"
            )
        );
        assert_eq!(
            error(&format!("x={}", "v".repeat(64))),
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"{}\": must be no more than 63 characters",
                "v".repeat(64)
            )
        );
    }

    #[test]
    fn parse_should_require_an_integer_for_greater_and_less_than() {
        assert_eq!(
            error("x>a"),
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            error("x<"),
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            error("x>99999999999999999999"),
            "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        // "-1" is an integer but not a valid label value.
        assert_eq!(
            error("x>-1"),
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"-1\": {VALUE_SHAPE}"
            )
        );
    }
}
