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
mod tests;
