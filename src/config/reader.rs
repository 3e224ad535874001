//! Walking a `toml::Table` by hand: known keys per section, typed getters with defaults, `${VAR}`
//! interpolation, and the error list they all push to.
//!
//! Every getter records a located error and returns a default instead of stopping, so one pass reports
//! every problem. Messages quote what the user wrote (the `${VAR}` template), never an interpolated value,
//! which may be a key or a password.

use std::time::Duration;

use toml::{Table, Value};

use super::ConfigError;

/// A string setting: as written, and after `${VAR}` interpolation.
pub(super) struct Setting {
    /// As written in the file: safe to quote unless the user wrote a secret inline (URL fields never quote it).
    pub raw: String,
    /// Interpolated: may hold a secret; never put it in a message.
    pub value: String,
}

/// The error list and the environment, shared by every section.
pub(super) struct Reader<'a> {
    /// The config file, as given.
    pub file: String,
    /// Every problem found so far.
    pub errors: Vec<ConfigError>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

/// `section.key`, or `key` at the top level.
pub(super) fn field(section: &str, key: &str) -> String {
    if section.is_empty() {
        key.to_owned()
    } else {
        format!("{section}.{key}")
    }
}

impl<'a> Reader<'a> {
    pub(super) fn new(file: String, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            file,
            errors: Vec::new(),
            env,
        }
    }

    /// Records a problem in the config file.
    pub(super) fn error(
        &mut self,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let file = self.file.clone();
        self.error_in(file, field, problem, fix);
    }

    /// Records a problem in another file (an ABI).
    pub(super) fn error_in(
        &mut self,
        file: String,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.errors.push(ConfigError {
            file,
            field: field.to_owned(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    /// Reports every key of `table` that is not in `known`, suggesting the nearest known key.
    pub(super) fn check_keys(&mut self, section: &str, table: &Table, known: &[&str]) {
        for key in table.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let fix = match nearest(key, known) {
                Some(suggestion) => format!("did you mean \"{suggestion}\"?"),
                None => format!("valid keys here: {}", known.join(", ")),
            };
            self.error(&field(section, key), format!("unknown key \"{key}\""), fix);
        }
    }

    /// A sub-table (`[node]`); `None` when absent or not a table (reported).
    pub(super) fn table<'t>(
        &mut self,
        parent: &'t Table,
        section: &str,
        key: &str,
    ) -> Option<&'t Table> {
        match parent.get(key)? {
            Value::Table(table) => Some(table),
            other => {
                self.error(
                    &field(section, key),
                    format!("is a {}, not a table", other.type_str()),
                    format!("write it as a [{}] section", field(section, key)),
                );
                None
            }
        }
    }

    /// A string, interpolated; `None` when absent or bad (reported).
    pub(super) fn string(&mut self, table: &Table, section: &str, key: &str) -> Option<Setting> {
        let field = field(section, key);
        match table.get(key)? {
            Value::String(raw) => self.interpolate(&field, raw).map(|value| Setting {
                raw: raw.clone(),
                value,
            }),
            other => {
                self.error(
                    &field,
                    format!("is a {}, not a string", other.type_str()),
                    "put the value in double quotes",
                );
                None
            }
        }
    }

    /// A required string; reports its absence.
    pub(super) fn required_string(
        &mut self,
        table: &Table,
        section: &str,
        key: &str,
        fix: &str,
    ) -> Option<Setting> {
        if !table.contains_key(key) {
            self.error(&field(section, key), "is missing", fix);
            return None;
        }
        self.string(table, section, key)
    }

    /// Replaces each `${NAME}` in `raw` with the environment's value; `None` when one is unset (reported).
    pub(super) fn interpolate(&mut self, field: &str, raw: &str) -> Option<String> {
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw;
        let mut ok = true;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                self.error(
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
                    field,
                    format!("\"${{{name}}}\" is not a valid environment variable name"),
                    "use letters, digits and _ in ${NAME}",
                );
                ok = false;
            } else if let Some(value) = (self.env)(name) {
                out.push_str(&value);
            } else {
                self.error(
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
    pub(super) fn int<T>(
        &mut self,
        table: &Table,
        section: &str,
        key: &str,
        default: T,
        min: u64,
    ) -> T
    where
        T: TryFrom<u64> + Copy,
    {
        let field = field(section, key);
        let Some(value) = table.get(key) else {
            return default;
        };
        let Value::Integer(n) = value else {
            self.error(
                &field,
                format!("is a {}, not an integer", value.type_str()),
                "write a whole number without quotes",
            );
            return default;
        };
        let Ok(n) = u64::try_from(*n) else {
            self.error(
                &field,
                format!("{n} is negative"),
                "write a number of 0 or more",
            );
            return default;
        };
        if n < min {
            self.error(
                &field,
                format!("{n} is below the minimum {min}"),
                format!("set it to {min} or more"),
            );
            return default;
        }
        match T::try_from(n) {
            Ok(t) => t,
            Err(_) => {
                self.error(&field, format!("{n} is too large"), "use a smaller number");
                default
            }
        }
    }

    /// A duration like `"15s"` or `"250ms"`, above zero; `default` when absent or bad (reported).
    pub(super) fn duration(
        &mut self,
        table: &Table,
        section: &str,
        key: &str,
        default: Duration,
    ) -> Duration {
        let field = field(section, key);
        let Some(setting) = self.string(table, section, key) else {
            if table.get(key).is_some_and(Value::is_integer) {
                // The string getter said "not a string"; say what a duration looks like.
                self.error(
                    &field,
                    "needs a unit",
                    "write a duration like \"15s\" or \"250ms\"",
                );
            }
            return default;
        };
        match humantime::parse_duration(&setting.value) {
            Ok(duration) if duration.is_zero() => {
                self.error(
                    &field,
                    format!("\"{}\" is zero", setting.raw),
                    "use a duration above zero",
                );
                default
            }
            Ok(duration) => duration,
            Err(err) => {
                self.error(
                    &field,
                    format!("\"{}\" is not a duration: {err}", setting.raw),
                    "write a duration like \"15s\" or \"250ms\"",
                );
                default
            }
        }
    }

    /// A boolean; `default` when absent or bad (reported).
    pub(super) fn bool(&mut self, table: &Table, section: &str, key: &str, default: bool) -> bool {
        match table.get(key) {
            None => default,
            Some(Value::Boolean(b)) => *b,
            Some(other) => {
                self.error(
                    &field(section, key),
                    format!("is a {}, not a boolean", other.type_str()),
                    "write true or false without quotes",
                );
                default
            }
        }
    }
}

/// The known key nearest to `key`, when near enough to be a likely typo.
fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (strsim::jaro_winkler(key, candidate), *candidate))
        .filter(|(similarity, candidate)| {
            *similarity >= 0.85 || strsim::levenshtein(key, candidate) <= 2
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_nearest(key: &str, expected: Option<&str>) {
        let known = [
            "url",
            "ws_url",
            "transport",
            "max_concurrency",
            "max_retries",
            "requests_per_second",
        ];
        assert_eq!(nearest(key, &known), expected, "{key}");
    }

    #[test]
    fn suggests_the_nearest_key_for_typos_only() {
        check_nearest("max_concurency", Some("max_concurrency"));
        check_nearest("urll", Some("url"));
        check_nearest("wsurl", Some("ws_url"));
        check_nearest("max_retry", Some("max_retries"));
        check_nearest("requests_per_sec", Some("requests_per_second"));
        check_nearest("colour", None);
    }

    fn check_interpolate(raw: &str, expected: Result<&str, &str>) {
        let env = |name: &str| match name {
            "KEY" => Some("k3y".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let mut reader = Reader::new("config.toml".into(), &env);
        let actual = reader.interpolate("node.url", raw);
        match expected {
            Ok(value) => assert_eq!(actual.as_deref(), Some(value), "{raw}"),
            Err(problem) => {
                assert_eq!(actual, None, "{raw}");
                assert!(
                    reader
                        .errors
                        .iter()
                        .any(|e| e.to_string().contains(problem)),
                    "{:?}",
                    reader.errors
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
}
