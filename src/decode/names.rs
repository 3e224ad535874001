//! Names: `snake_case`, and the column name of each event parameter (reserved words, fixed columns, duplicates).
//!
//! Pure string work; knows nothing about ABI types. The rules are documented on [`super`].

/// Columns every typed table has; a parameter with one of these names gets a `_` suffix.
pub(super) const FIXED_COLUMNS: &[&str] = &[
    "id",
    "block_number",
    "block_hash",
    "transaction_hash",
    "transaction_index",
    "log_index",
    "address",
];

/// SQLite's keywords (all of them, <https://sqlite.org/lang_keywords.html>), Postgres's reserved keywords
/// (<https://www.postgresql.org/docs/current/sql-keywords-appendix.html>, "reserved" and "reserved (can be
/// function or type)"), and the system column names of both (`rowid`, `oid`, `ctid`, `xmin`, ...), which a
/// user column cannot take in Postgres or would shadow in SQLite. Sorted, lowercase: checked by a test.
pub(super) const RESERVED_WORDS: &[&str] = &[
    "_rowid_",
    "abort",
    "action",
    "add",
    "after",
    "all",
    "alter",
    "always",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "attach",
    "authorization",
    "autoincrement",
    "before",
    "begin",
    "between",
    "binary",
    "both",
    "by",
    "cascade",
    "case",
    "cast",
    "check",
    "cmax",
    "cmin",
    "collate",
    "collation",
    "column",
    "commit",
    "concurrently",
    "conflict",
    "constraint",
    "create",
    "cross",
    "ctid",
    "current",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "database",
    "default",
    "deferrable",
    "deferred",
    "delete",
    "desc",
    "detach",
    "distinct",
    "do",
    "drop",
    "each",
    "else",
    "end",
    "escape",
    "except",
    "exclude",
    "exclusive",
    "exists",
    "explain",
    "fail",
    "false",
    "fetch",
    "filter",
    "first",
    "following",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "generated",
    "glob",
    "grant",
    "group",
    "groups",
    "having",
    "if",
    "ignore",
    "ilike",
    "immediate",
    "in",
    "index",
    "indexed",
    "initially",
    "inner",
    "insert",
    "instead",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "key",
    "last",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "match",
    "materialized",
    "natural",
    "no",
    "not",
    "nothing",
    "notnull",
    "null",
    "nulls",
    "of",
    "offset",
    "oid",
    "on",
    "only",
    "or",
    "order",
    "others",
    "outer",
    "over",
    "overlaps",
    "partition",
    "placing",
    "plan",
    "pragma",
    "preceding",
    "primary",
    "query",
    "raise",
    "range",
    "recursive",
    "references",
    "regexp",
    "reindex",
    "release",
    "rename",
    "replace",
    "restrict",
    "returning",
    "right",
    "rollback",
    "row",
    "rowid",
    "rows",
    "savepoint",
    "select",
    "session_user",
    "set",
    "similar",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tableoid",
    "tablesample",
    "temp",
    "temporary",
    "then",
    "ties",
    "to",
    "trailing",
    "transaction",
    "trigger",
    "true",
    "unbounded",
    "union",
    "unique",
    "update",
    "user",
    "using",
    "vacuum",
    "values",
    "variadic",
    "verbose",
    "view",
    "virtual",
    "when",
    "where",
    "window",
    "with",
    "without",
    "xmax",
    "xmin",
];

/// `snake_case` of an identifier.
///
/// ASCII letters and digits are kept (lowercased); everything else separates words. A word boundary is also
/// placed before an uppercase letter that follows a lowercase letter or a digit (`amount0In` -> `amount0_in`,
/// `ERC20Token` -> `erc20_token`), and before the last capital of an acronym followed by a lowercase letter
/// (`HTTPServer` -> `http_server`). A digit after a letter does not start a word (`Swap2` -> `swap2`).
pub(super) fn snake_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    // Whether a separator is owed before the next kept character.
    let mut pending_separator = false;
    for (char_idx, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            pending_separator = !out.is_empty();
            continue;
        }
        if c.is_ascii_uppercase() && char_idx > 0 {
            let previous = chars[char_idx - 1];
            let next_is_lower = chars
                .get(char_idx + 1)
                .is_some_and(|n| n.is_ascii_lowercase());
            let starts_word = previous.is_ascii_lowercase()
                || previous.is_ascii_digit()
                || (previous.is_ascii_uppercase() && next_is_lower);
            if starts_word && !out.is_empty() {
                pending_separator = true;
            }
        }
        if pending_separator {
            out.push('_');
            pending_separator = false;
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Whether `name` is a fixed column or a reserved word, and so needs a `_` suffix.
pub(super) fn needs_suffix(name: &str) -> bool {
    FIXED_COLUMNS.contains(&name) || RESERVED_WORDS.binary_search(&name).is_ok()
}

/// Column names for parameters named `params` (in ABI order); see the rules on [`super`].
pub(super) fn column_names<'a>(params: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (param_idx, param) in params.into_iter().enumerate() {
        let mut base = snake_case(param);
        if base.is_empty() {
            base = format!("arg{param_idx}");
        } else if base.starts_with(|c: char| c.is_ascii_digit()) {
            // Unquoted SQL identifiers can't start with a digit (Solidity names can't either; JSON ABIs might).
            base.insert(0, '_');
        }
        if needs_suffix(&base) {
            base.push('_');
        }
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            // `from_` twice gives `from_2`, not `from__2`.
            name = format!("{}_{n}", base.trim_end_matches('_'));
            n += 1;
        }
        names.push(name);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_snake(input: &str, expected: &str) {
        assert_eq!(snake_case(input), expected, "snake_case({input:?})");
    }

    #[test]
    fn snake_cases_identifiers() {
        check_snake("fromAddress", "from_address");
        check_snake("USDC", "usdc");
        check_snake("amount0In", "amount0_in");
        check_snake("ERC20Token", "erc20_token");
        check_snake("Swap", "swap");
        check_snake("Swap2", "swap2");
        check_snake("my-contract", "my_contract");
        check_snake("HTTPServer", "http_server");
        check_snake("already_snake", "already_snake");
        check_snake("_value", "value");
        check_snake("__a__b__", "a_b");
        check_snake("Uniswap V2", "uniswap_v2");
        check_snake("", "");
        check_snake("_", "");
        check_snake("tokenID", "token_id");
    }

    fn check_columns(params: &[&str], expected: &[&str]) {
        assert_eq!(
            column_names(params.iter().copied()),
            expected,
            "params {params:?}"
        );
    }

    #[test]
    fn names_columns_with_suffixes_for_reserved_words_fixed_columns_and_duplicates() {
        check_columns(&["from", "to", "value"], &["from_", "to_", "value"]);
        check_columns(
            &["address", "id", "blockNumber"],
            &["address_", "id_", "block_number_"],
        );
        check_columns(&["", "", "x"], &["arg0", "arg1", "x"]);
        check_columns(&["a", "A", "a"], &["a", "a_2", "a_3"]);
        check_columns(&["arg1", ""], &["arg1", "arg1_2"]);
        check_columns(&["from", "From"], &["from_", "from_2"]);
        check_columns(&["Order", "USER", "oid"], &["order_", "user_", "oid_"]);
    }

    #[test]
    fn keeps_the_reserved_word_list_sorted_and_lowercase() {
        let mut sorted = RESERVED_WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, RESERVED_WORDS);
        assert!(RESERVED_WORDS.iter().all(|w| *w == w.to_lowercase()));
    }
}
