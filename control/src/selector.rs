//! Node selectors (core/v1 `NodeSelector`) with Kubernetes' semantics: matching a node's
//! labels and name ([`selector_matches`]), validation naming the bad path ([`validate`]),
//! kubectl's `--selector` syntax for one term ([`parse_term`]) and the cartesian merge of an
//! imposed selector into a pod's required node affinity ([`merge`]).
//!
//! Semantics, as the scheduler's `nodeaffinity` helpers: no selector or no terms matches
//! every node; terms are ORed; a term's expressions and fields are ANDed; a term with neither
//! matches nothing; `NotIn` and `DoesNotExist` match an absent key; `Gt`/`Lt` compare integers
//! (a label that is not an integer does not match); `matchFields` knows `metadata.name` only.
//! Unlike upstream Liqo's `MergeNodeSelector`, [`merge`] keeps `matchFields`.
//!
//! It owns these rules only: it never reads nodes from an apiserver and never builds the
//! imposed selector (that is [`crate::offloading::webhook`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

use crate::names::validate_subdomain;

mod error;
#[cfg(test)]
mod tests;

pub use error::{KeyProblem, LabelsError, SelectorError, TermProblem, TextProblem, ValueProblem};

/// The only field `matchFields` may name.
pub const METADATA_NAME: &str = "metadata.name";

/// Operator `In`.
pub const IN: &str = "In";
/// Operator `NotIn`.
pub const NOT_IN: &str = "NotIn";
/// Operator `Exists`.
pub const EXISTS: &str = "Exists";
/// Operator `DoesNotExist`.
pub const DOES_NOT_EXIST: &str = "DoesNotExist";
/// Operator `Gt`.
pub const GT: &str = "Gt";
/// Operator `Lt`.
pub const LT: &str = "Lt";

/// Whether a node with these labels and this name matches the selector. An invalid selector
/// (see [`validate`]) is an error, whatever the node.
pub fn selector_matches(
    sel: Option<&NodeSelector>,
    labels: &BTreeMap<String, String>,
    name: &str,
) -> Result<bool, SelectorError> {
    let Some(sel) = sel else { return Ok(true) };
    validate(sel)?;
    if sel.node_selector_terms.is_empty() {
        return Ok(true);
    }
    Ok(sel
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, labels, name)))
}

fn term_matches(t: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == METADATA_NAME).then_some(name);
            requirement_matches(r, value)
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let contains = |v: &str| values.iter().any(|x| x == v);
    let compare = |ord: std::cmp::Ordering| {
        let bound = values.first().and_then(|b| b.parse::<i64>().ok());
        let value = value.and_then(|v| v.parse::<i64>().ok());
        matches!((value, bound), (Some(v), Some(b)) if v.cmp(&b) == ord)
    };
    match r.operator.as_str() {
        IN => value.is_some_and(contains),
        NOT_IN => !value.is_some_and(contains),
        EXISTS => value.is_some(),
        DOES_NOT_EXIST => value.is_none(),
        GT => compare(std::cmp::Ordering::Greater),
        LT => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

/// Checks every requirement as the apiserver checks a pod's node affinity: keys are
/// qualified names, `In`/`NotIn` need values, `Exists`/`DoesNotExist` none, `Gt`/`Lt` one
/// integer, values are label values; `matchFields` only `metadata.name` with `In`/`NotIn` and
/// one value. The error names the first bad path.
pub fn validate(sel: &NodeSelector) -> Result<(), SelectorError> {
    for (i, term) in sel.node_selector_terms.iter().enumerate() {
        for (j, r) in term.match_expressions.iter().flatten().enumerate() {
            validate_expression(r).map_err(|(field, problem)| SelectorError::Invalid {
                path: format!("nodeSelectorTerms[{i}].matchExpressions[{j}]{field}"),
                problem,
            })?;
        }
        for (j, r) in term.match_fields.iter().flatten().enumerate() {
            validate_field(r).map_err(|(field, problem)| SelectorError::Invalid {
                path: format!("nodeSelectorTerms[{i}].matchFields[{j}]{field}"),
                problem,
            })?;
        }
    }
    Ok(())
}

type Problem = (&'static str, String);

fn validate_expression(r: &NodeSelectorRequirement) -> Result<(), Problem> {
    label_key_problem(&r.key).map_err(|p| (".key", format!("{:?} {p}", r.key)))?;
    let values = r.values.as_deref().unwrap_or_default();
    let op = r.operator.as_str();
    match op {
        IN | NOT_IN if values.is_empty() => {
            return Err((
                ".values",
                format!("must be specified when operator is {op}"),
            ));
        }
        EXISTS | DOES_NOT_EXIST if !values.is_empty() => {
            return Err((
                ".values",
                format!("may not be specified when operator is {op}"),
            ));
        }
        GT | LT => {
            let [v] = values else {
                return Err((
                    ".values",
                    format!("must have one element when operator is {op}"),
                ));
            };
            v.parse::<i64>()
                .map_err(|_| (".values[0]", format!("{v:?} must be an integer")))?;
        }
        IN | NOT_IN | EXISTS | DOES_NOT_EXIST => {}
        _ => {
            return Err((
                ".operator",
                format!("{op:?} is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"),
            ));
        }
    }
    for v in values {
        label_value_problem(v).map_err(|p| (".values", format!("{v:?} {p}")))?;
    }
    Ok(())
}

fn validate_field(r: &NodeSelectorRequirement) -> Result<(), Problem> {
    if r.key != METADATA_NAME {
        return Err((".key", format!("{:?} is not {METADATA_NAME:?}", r.key)));
    }
    if r.operator != IN && r.operator != NOT_IN {
        return Err((".operator", format!("{:?} is not In or NotIn", r.operator)));
    }
    match r.values.as_deref().unwrap_or_default() {
        [_] => Ok(()),
        _ => Err((".values", "must have one element".to_owned())),
    }
}

/// Why a label key is not a qualified name: an optional DNS subdomain prefix and `/`, then
/// 1 to 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
pub fn label_key_problem(key: &str) -> Result<(), KeyProblem> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            validate_subdomain(prefix).map_err(|e| KeyProblem::Prefix(Box::new(e)))?;
            name
        }
        None => key,
    };
    name_problem(name, false).map_err(KeyProblem::Name)
}

/// Why a string is not a label value: at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both
/// ends, or empty.
pub fn label_value_problem(value: &str) -> Result<(), ValueProblem> {
    name_problem(value, true).map_err(ValueProblem)
}

/// Parses a `k=v,k2=v2` label list (`--cluster-labels`): each key a qualified name, each
/// value a label value, no key twice. The error names the entry at fault. An empty string is
/// no labels.
pub fn parse_labels(input: &str) -> Result<BTreeMap<String, String>, LabelsError> {
    let mut out = BTreeMap::new();
    for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| LabelsError::NotKeyValue { part: part.into() })?;
        let (k, v) = (k.trim(), v.trim());
        label_key_problem(k).map_err(|problem| LabelsError::Key {
            part: part.into(),
            key: k.into(),
            problem,
        })?;
        label_value_problem(v).map_err(|problem| LabelsError::Value {
            part: part.into(),
            value: v.into(),
            problem,
        })?;
        if out.insert(k.to_owned(), v.to_owned()).is_some() {
            return Err(LabelsError::Repeated { key: k.into() });
        }
    }
    Ok(out)
}

fn name_problem(s: &str, empty_ok: bool) -> Result<(), TextProblem> {
    if s.is_empty() {
        return if empty_ok {
            Ok(())
        } else {
            Err(TextProblem::Empty)
        };
    }
    if s.len() > 63 {
        return Err(TextProblem::TooLong);
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(TextProblem::InvalidChar);
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !s.starts_with(alnum) || !s.ends_with(alnum) {
        return Err(TextProblem::Edges);
    }
    Ok(())
}

fn requirement(key: &str, operator: &str, values: Option<Vec<String>>) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values,
    }
}

/// Parses one kubectl-syntax selector into a term, requirements in the given order:
/// `a=b` (or `a==b`) → In, `c!=d` → NotIn, `e in (x,y)`, `f notin (z)`, `g` → Exists,
/// `!h` → DoesNotExist, `n>1` → Gt, `n<9` → Lt. The error names the requirement at fault.
pub fn parse_term(input: &str) -> Result<NodeSelectorTerm, SelectorError> {
    let fail = |part: &str, problem| SelectorError::Parse {
        input: input.to_owned(),
        part: part.to_owned(),
        problem,
    };
    if input.trim().is_empty() {
        return Err(fail(input, TermProblem::Empty));
    }
    let mut exprs = Vec::new();
    for part in split_top_level(input).map_err(|p| fail(input, p))? {
        exprs.push(parse_requirement(part.trim()).map_err(|p| fail(part.trim(), p))?);
    }
    Ok(NodeSelectorTerm {
        match_expressions: Some(exprs),
        match_fields: None,
    })
}

/// Splits on the commas outside parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>, TermProblem> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0u32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' if depth > 0 => return Err(TermProblem::NestedParens),
            '(' => depth = 1,
            ')' if depth == 0 => return Err(TermProblem::UnmatchedClose),
            ')' => depth = 0,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(TermProblem::Unclosed);
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<NodeSelectorRequirement, TermProblem> {
    let key = |k: &str| -> Result<String, TermProblem> {
        let k = k.trim();
        label_key_problem(k).map_err(|problem| TermProblem::Key {
            key: k.into(),
            problem,
        })?;
        Ok(k.to_owned())
    };
    let value = |v: &str| -> Result<String, TermProblem> {
        let v = v.trim();
        label_value_problem(v).map_err(|problem| TermProblem::Value {
            value: v.into(),
            problem,
        })?;
        Ok(v.to_owned())
    };
    if part.is_empty() {
        return Err(TermProblem::EmptyRequirement);
    }
    if let Some(open) = part.find('(') {
        let head: Vec<&str> = part[..open].split_whitespace().collect();
        let op = match head.as_slice() {
            [_, "in"] => IN,
            [_, "notin"] => NOT_IN,
            _ => return Err(TermProblem::NotASet),
        };
        let Some(inner) = part[open + 1..].strip_suffix(')') else {
            return Err(TermProblem::AfterParens);
        };
        if inner.trim().is_empty() {
            return Err(TermProblem::NoValues {
                operator: head[1].into(),
            });
        }
        let values = inner.split(',').map(value).collect::<Result<Vec<_>, _>>()?;
        return Ok(requirement(&key(head[0])?, op, Some(values)));
    }
    if let Some(k) = part.strip_prefix('!') {
        if k.contains(['=', '<', '>']) {
            return Err(TermProblem::BangWithOperator);
        }
        return Ok(requirement(&key(k)?, DOES_NOT_EXIST, None));
    }
    for (token, op) in [("!=", NOT_IN), ("==", IN), ("=", IN), (">", GT), ("<", LT)] {
        if let Some((k, v)) = part.split_once(token) {
            let v = value(v)?;
            if (op == GT || op == LT) && v.parse::<i64>().is_err() {
                return Err(TermProblem::NotAnInteger { value: v });
            }
            return Ok(requirement(&key(k)?, op, Some(vec![v])));
        }
    }
    if part.split_whitespace().count() > 1 {
        return Err(TermProblem::NotARequirement);
    }
    Ok(requirement(&key(part)?, EXISTS, None))
}

/// The selector a pod must satisfy to meet both `pod` and `imposed`: each pod term ANDed
/// with each imposed term (pod terms outer), expressions and fields concatenated, the pod's
/// first. An empty side leaves the other unchanged.
pub fn merge(pod: &NodeSelector, imposed: &NodeSelector) -> NodeSelector {
    if pod.node_selector_terms.is_empty() {
        return imposed.clone();
    }
    if imposed.node_selector_terms.is_empty() {
        return pod.clone();
    }
    let concat = |a: &Option<Vec<NodeSelectorRequirement>>,
                  b: &Option<Vec<NodeSelectorRequirement>>| {
        let all: Vec<_> = a.iter().chain(b).flatten().cloned().collect();
        (!all.is_empty()).then_some(all)
    };
    let terms = pod
        .node_selector_terms
        .iter()
        .flat_map(|p| {
            imposed
                .node_selector_terms
                .iter()
                .map(move |i| NodeSelectorTerm {
                    match_expressions: concat(&p.match_expressions, &i.match_expressions),
                    match_fields: concat(&p.match_fields, &i.match_fields),
                })
        })
        .collect();
    NodeSelector {
        node_selector_terms: terms,
    }
}
