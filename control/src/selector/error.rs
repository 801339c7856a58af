//! Why a node selector, a label or a kubectl-syntax selector is refused. A "problem" is a
//! phrase completing a sentence whose subject (the bad key, value or requirement) the error
//! holding it names; it is part of that error's message, not a separate cause.

use crate::names::InvalidName;

/// A selector refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A requirement of a `NodeSelector` breaks Kubernetes' validation rules.
    #[error("{path}: {problem}")]
    Invalid {
        /// Where, relative to the selector: `nodeSelectorTerms[1].matchExpressions[0].values`.
        path: String,
        /// What is wrong, naming the bad value.
        problem: String,
    },
    /// A kubectl-syntax selector that does not parse.
    #[error("bad selector {input:?}: {part:?} {problem}")]
    Parse {
        /// The whole selector given.
        input: String,
        /// The comma-separated requirement at fault.
        part: String,
        /// What is wrong with it.
        problem: TermProblem,
    },
}

impl SelectorError {
    /// The same error with its path prefixed (`spec.clusterSelector.` + path); a parse error
    /// is returned as is.
    pub fn under(self, prefix: &str) -> Self {
        match self {
            SelectorError::Invalid { path, problem } => SelectorError::Invalid {
                path: format!("{prefix}{path}"),
                problem,
            },
            other => other,
        }
    }
}

/// What is wrong with the name part of a label key, or with a label value: at most 63 of
/// `[A-Za-z0-9_.-]`, alphanumeric at both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextProblem {
    /// Empty (a key's name may not be; a value may).
    #[error("is empty")]
    Empty,
    /// Longer than 63 characters.
    #[error("is longer than 63 characters")]
    TooLong,
    /// A character other than `A-Z`, `a-z`, `0-9`, `-`, `_`, `.`.
    #[error("has a character other than A-Z, a-z, 0-9, '-', '_', '.'")]
    InvalidChar,
    /// Not alphanumeric at both ends.
    #[error("does not start and end with an alphanumeric character")]
    Edges,
}

/// Why a label key is not a qualified name: an optional DNS subdomain prefix and `/`, then a
/// name (see [`TextProblem`]). Reads after the key: `"bad key" is not a qualified name: ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    /// The part before `/` is not a DNS subdomain.
    #[error("has a bad prefix: {0}")]
    Prefix(Box<InvalidName>),
    /// The part after `/` (or the whole key) is not a name.
    #[error("is not a qualified name: its name {0}")]
    Name(TextProblem),
}

/// Why a string is not a label value. Reads after the value: `"-x" is not a label value: ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("is not a label value: it {0}")]
pub struct ValueProblem(pub TextProblem);

/// A `k=v,k2=v2` label list refused, naming the entry at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelsError {
    /// An entry without `=`.
    #[error("label {part:?} is not key=value")]
    NotKeyValue {
        /// The entry.
        part: String,
    },
    /// An entry whose key is not a qualified name.
    #[error("label {part:?}: key {key:?} {problem}")]
    Key {
        /// The entry.
        part: String,
        /// Its key.
        key: String,
        /// What is wrong with the key.
        problem: KeyProblem,
    },
    /// An entry whose value is not a label value.
    #[error("label {part:?}: value {value:?} {problem}")]
    Value {
        /// The entry.
        part: String,
        /// Its value.
        value: String,
        /// What is wrong with the value.
        problem: ValueProblem,
    },
    /// A key given twice.
    #[error("label key {key:?} is given twice")]
    Repeated {
        /// The key.
        key: String,
    },
}

/// What is wrong with a kubectl-syntax selector or one of its requirements. Reads after the
/// requirement at fault: `"n>x" compares with "x", which is not an integer`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TermProblem {
    /// The whole selector is blank.
    #[error("is empty")]
    Empty,
    /// A `(` inside parentheses.
    #[error("has nested parentheses")]
    NestedParens,
    /// A `)` without its `(`.
    #[error("has an unmatched ')'")]
    UnmatchedClose,
    /// A `(` never closed.
    #[error("has an unclosed '('")]
    Unclosed,
    /// Nothing between two commas.
    #[error("is an empty requirement (two commas in a row?)")]
    EmptyRequirement,
    /// Parentheses without `in` or `notin` before them.
    #[error("is not `<key> in (<values>)` or `<key> notin (<values>)`")]
    NotASet,
    /// Text after the closing parenthesis.
    #[error("has text after ')'")]
    AfterParens,
    /// `in ()` or `notin ()`.
    #[error("has no values: {operator} needs at least one")]
    NoValues {
        /// `in` or `notin`.
        operator: String,
    },
    /// `!` together with `=`, `<` or `>`.
    #[error("mixes '!' with an operator")]
    BangWithOperator,
    /// `<` or `>` with a value that is not an integer.
    #[error("compares with {value:?}, which is not an integer")]
    NotAnInteger {
        /// The value.
        value: String,
    },
    /// Words without an operator.
    #[error("is not a requirement (a key has no spaces; use '=', '!=', in, notin)")]
    NotARequirement,
    /// A key that is not a qualified name.
    #[error("has key {key:?}, which {problem}")]
    Key {
        /// The key.
        key: String,
        /// What is wrong with it.
        problem: KeyProblem,
    },
    /// A value that is not a label value.
    #[error("has value {value:?}, which {problem}")]
    Value {
        /// The value.
        value: String,
        /// What is wrong with it.
        problem: ValueProblem,
    },
}
