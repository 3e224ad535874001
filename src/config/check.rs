//! The validation pass's tools: the error list (each error with its line), `${VAR}` interpolation, and the
//! typing of a [`Leaf`] as a string, an integer, a duration or a boolean with its default.
//!
//! Every function records a located error and returns a default instead of stopping, so one pass reports
//! every problem. Messages quote what the user wrote (the `${VAR}` template), never an interpolated value,
//! which may be a key or a password.

use std::ops::Range;
use std::time::Duration;

use toml::{Spanned, Value};

use super::raw::{Leaf, TableOr};
use super::ConfigError;

/// Byte offsets of a value in the config file.
pub(super) type Span = Range<usize>;

/// A string setting: as written, and after `${VAR}` interpolation.
pub(super) struct Setting {
    /// As written in the file: safe to quote unless the user wrote a secret inline (URL fields never quote it).
    pub raw: String,
    /// Interpolated: may hold a secret; never put it in a message.
    pub value: String,
    /// Where it is written.
    pub span: Span,
}

/// `section.key`, or `key` at the top level.
pub(super) fn field(section: &str, key: &str) -> String {
    if section.is_empty() {
        key.to_owned()
    } else {
        format!("{section}.{key}")
    }
}

/// The error list, the environment and the file's line starts, shared by every section.
pub(super) struct Checker<'a> {
    /// The config file, as given.
    pub file: String,
    /// Every problem found so far.
    pub errors: Vec<ConfigError>,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// Byte offset of each line's first character.
    line_starts: Vec<usize>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(file: String, text: &str, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(idx, _)| idx + 1))
            .collect();
        Self {
            file,
            errors: Vec::new(),
            env,
            line_starts,
        }
    }

    /// The 1-based line of a byte offset.
    pub(super) fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    /// Records a problem in the config file, at the line of `at` when known.
    pub(super) fn error(
        &mut self,
        at: Option<&Span>,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: at.map(|span| self.line(span.start)),
            field: field.to_owned(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    /// Records a problem in another file (an ABI), whose own message says where.
    pub(super) fn error_in(
        &mut self,
        file: String,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.errors.push(ConfigError {
            file,
            line: None,
            field: field.to_owned(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    /// A table and its span; `None` when absent or not a table (reported with `fix`).
    pub(super) fn table<'r, T>(
        &mut self,
        raw: Option<&'r Spanned<TableOr<T>>>,
        field: &str,
        fix: &str,
    ) -> Option<(&'r T, Span)> {
        let raw = raw?;
        match raw.get_ref() {
            TableOr::Table(table) => Some((table, raw.span())),
            TableOr::Other(kind) => {
                self.error(
                    Some(&raw.span()),
                    field,
                    format!("is a {kind}, not a table"),
                    fix,
                );
                None
            }
        }
    }

    /// A string, interpolated; `None` when absent or bad (reported).
    pub(super) fn string(&mut self, leaf: Option<&Leaf>, field: &str) -> Option<Setting> {
        let leaf = leaf?;
        let span = leaf.span();
        match leaf.get_ref() {
            Value::String(raw) => self.interpolate(&span, field, raw).map(|value| Setting {
                raw: raw.clone(),
                value,
                span,
            }),
            other => {
                self.error(
                    Some(&span),
                    field,
                    format!("is a {}, not a string", other.type_str()),
                    "put the value in double quotes",
                );
                None
            }
        }
    }

    /// A required string; its absence is reported at `section` (the line of the table that lacks it).
    pub(super) fn required_string(
        &mut self,
        leaf: Option<&Leaf>,
        section: Option<&Span>,
        field: &str,
        fix: &str,
    ) -> Option<Setting> {
        if leaf.is_none() {
            self.error(section, field, "is missing", fix);
            return None;
        }
        self.string(leaf, field)
    }

    /// Replaces each `${NAME}` in `raw` with the environment's value; `None` when one is unset (reported).
    pub(super) fn interpolate(&mut self, at: &Span, field: &str, raw: &str) -> Option<String> {
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw;
        let mut ok = true;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                self.error(
                    Some(at),
                    field,
                    "has \"${\" without a closing \"}\"",
                    "write ${NAME} to read NAME from the environment",
                );
                return None;
            };
            let name = &after[..end];
            let valid_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid_name {
                self.error(
                    Some(at),
                    field,
                    format!("\"${{{name}}}\" is not a valid environment variable name"),
                    "use letters, digits and _ in ${NAME}",
                );
                ok = false;
            } else if let Some(value) = (self.env)(name) {
                out.push_str(&value);
            } else {
                self.error(
                    Some(at),
                    field,
                    format!("environment variable {name} is not set"),
                    format!("set {name} in the environment"),
                );
                ok = false;
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        ok.then_some(out)
    }

    /// An unsigned integer of type `T`, at least `min`; `default` when absent or bad (reported).
    pub(super) fn int<T>(&mut self, leaf: Option<&Leaf>, field: &str, default: T, min: u64) -> T
    where
        T: TryFrom<u64> + Copy,
    {
        let Some(leaf) = leaf else {
            return default;
        };
        let at = Some(leaf.span());
        let at = at.as_ref();
        let Value::Integer(n) = leaf.get_ref() else {
            self.error(
                at,
                field,
                format!("is a {}, not an integer", leaf.get_ref().type_str()),
                "write a whole number without quotes",
            );
            return default;
        };
        let Ok(n) = u64::try_from(*n) else {
            self.error(
                at,
                field,
                format!("{n} is negative"),
                match min {
                    0 => "write a number of 0 or more".to_owned(),
                    min => format!("set it to {min} or more"),
                },
            );
            return default;
        };
        if n < min {
            self.error(
                at,
                field,
                format!("{n} is below the minimum {min}"),
                format!("set it to {min} or more"),
            );
            return default;
        }
        match T::try_from(n) {
            Ok(t) => t,
            Err(_) => {
                self.error(
                    at,
                    field,
                    format!("{n} is too large"),
                    "use a smaller number",
                );
                default
            }
        }
    }

    /// A duration like `"15s"` or `"250ms"`, above zero; `default` when absent or bad (reported).
    pub(super) fn duration(
        &mut self,
        leaf: Option<&Leaf>,
        field: &str,
        default: Duration,
    ) -> Duration {
        let Some(setting) = self.string(leaf, field) else {
            if let Some(leaf) = leaf.filter(|leaf| leaf.get_ref().is_integer()) {
                // `string` said "not a string"; say what a duration looks like.
                self.error(
                    Some(&leaf.span()),
                    field,
                    "needs a unit",
                    "write a duration like \"15s\" or \"250ms\"",
                );
            }
            return default;
        };
        let at = Some(&setting.span);
        match humantime::parse_duration(&setting.value) {
            Ok(duration) if duration.is_zero() => {
                self.error(
                    at,
                    field,
                    format!("\"{}\" is zero", setting.raw),
                    "use a duration above zero",
                );
                default
            }
            Ok(duration) => duration,
            Err(err) => {
                self.error(
                    at,
                    field,
                    format!("\"{}\" is not a duration: {err}", setting.raw),
                    "write a duration like \"15s\" or \"250ms\"",
                );
                default
            }
        }
    }

    /// A boolean; `default` when absent or bad (reported).
    pub(super) fn bool(&mut self, leaf: Option<&Leaf>, field: &str, default: bool) -> bool {
        let Some(leaf) = leaf else {
            return default;
        };
        match leaf.get_ref() {
            Value::Boolean(b) => *b,
            other => {
                self.error(
                    Some(&leaf.span()),
                    field,
                    format!("is a {}, not a boolean", other.type_str()),
                    "write true or false without quotes",
                );
                default
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_interpolate(raw: &str, expected: Result<&str, &str>) {
        let env = |name: &str| match name {
            "KEY" => Some("k3y".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let mut checker = Checker::new("config.toml".into(), "", &env);
        let actual = checker.interpolate(&(0..0), "node.url", raw);
        match expected {
            Ok(value) => assert_eq!(actual.as_deref(), Some(value), "{raw}"),
            Err(problem) => {
                assert_eq!(actual, None, "{raw}");
                assert!(
                    checker
                        .errors
                        .iter()
                        .any(|e| e.to_string().contains(problem)),
                    "{:?}",
                    checker.errors
                );
            }
        }
    }

    #[test]
    fn interpolates_environment_variables() {
        check_interpolate("https://x/v3/${KEY}", Ok("https://x/v3/k3y"));
        check_interpolate("${KEY}-${KEY}", Ok("k3y-k3y"));
        check_interpolate("a${EMPTY}b", Ok("ab"));
        check_interpolate("no variables $ here", Ok("no variables $ here"));
        check_interpolate(
            "${MISSING}",
            Err("environment variable MISSING is not set (set MISSING in the environment)"),
        );
        check_interpolate("${KEY", Err("without a closing"));
        check_interpolate("${1X}", Err("not a valid environment variable name"));
    }

    #[test]
    fn counts_lines_from_one() {
        let env = |_: &str| None;
        let checker = Checker::new("c".into(), "a\nbc\n\nd", &env);
        let lines: Vec<usize> = [0, 1, 2, 4, 5, 6].map(|o| checker.line(o)).to_vec();
        assert_eq!(lines, [1, 1, 2, 2, 3, 4]);
    }
}
