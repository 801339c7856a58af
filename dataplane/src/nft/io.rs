//! Applying, listing and deleting our table by running `nft` inside the target namespace.
//!
//! `nft` is run directly rather than through the `nftables` crate's helper, which leaves nft's
//! stderr uncaptured: an operator would see "applying failed" without nft's reason.

use std::{
    io::Write,
    process::{Command, Stdio},
};

use serde_json::Value;

use super::{
    build,
    error::Error,
    ruleset::{Family, Ident, Ruleset},
};
use crate::netns::Netns;

/// `nft`, in `ns` or the caller's namespace.
fn nft(ns: Option<&Netns>) -> Command {
    match ns {
        Some(ns) => ns.command("nft"),
        None => Command::new("nft"),
    }
}

/// Runs nft with `args`, feeding `stdin`; returns stdout. When nft fails, `refused` makes the
/// error of its stderr (nft's own message).
fn run(
    ns: Option<&Netns>,
    args: &[&str],
    stdin: Option<&str>,
    refused: impl FnOnce(String) -> Error,
) -> Result<String, Error> {
    let mut cmd = nft(ns);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(Error::Spawn)?;
    let mut input = child
        .stdin
        .take()
        .ok_or_else(|| Error::Output("no stdin".into()))?;
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).map_err(Error::Spawn)?;
    }
    drop(input);
    let out = child.wait_with_output().map_err(Error::Spawn)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(refused(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}

/// Replaces our whole table with `rs` in one transaction, in `ns` (or the caller's namespace).
/// On error the previous table, if any, is untouched.
pub fn apply(ns: Option<&Netns>, rs: &Ruleset) -> Result<(), Error> {
    run_batch(ns, rs, &build::batch(rs)?)
}

/// Runs `batch`, the [`build::batch`] of `rs`.
pub(super) fn run_batch(ns: Option<&Netns>, rs: &Ruleset, batch: &str) -> Result<(), Error> {
    tracing::debug!(table = %rs.table, bytes = batch.len(), "applying nftables batch");
    run(ns, &["-f", "-"], Some(batch), |stderr| Error::Refused {
        op: "applying",
        family: rs.family,
        table: rs.table.to_string(),
        stderr,
    })
    .map(drop)
}

/// Deletes the table if it exists.
pub fn delete(ns: Option<&Netns>, family: Family, table: &Ident) -> Result<(), Error> {
    run(
        ns,
        &["-f", "-"],
        Some(&build::delete_batch(family, table)),
        |stderr| Error::Refused {
            op: "deleting",
            family,
            table: table.to_string(),
            stderr,
        },
    )
    .map(drop)
}

/// The table as `nft -j list table` prints it (its objects, without `metainfo`), or `None` if
/// it does not exist.
pub fn list(
    ns: Option<&Netns>,
    family: Family,
    table: &Ident,
) -> Result<Option<Vec<Value>>, Error> {
    if !tables(ns)?.iter().any(|(f, t)| *f == family && t == table) {
        return Ok(None);
    }
    let out = run(
        ns,
        &["-j", "list", "table", family.as_str(), table.as_str()],
        None,
        |stderr| Error::Refused {
            op: "listing",
            family,
            table: table.to_string(),
            stderr,
        },
    )?;
    Ok(Some(objects(&out)?))
}

/// Every table in `ns`, as `(family, name)`; tables of other families (arp, bridge, netdev) and
/// names this crate would refuse are left out.
pub fn tables(ns: Option<&Netns>) -> Result<Vec<(Family, Ident)>, Error> {
    let out = run(ns, &["-j", "list", "tables"], None, |stderr| {
        Error::Refused {
            op: "listing",
            family: Family::Inet,
            table: "*".into(),
            stderr,
        }
    })?;
    let mut found = Vec::new();
    for obj in objects(&out)? {
        let Some(t) = obj.get("table") else { continue };
        let family = match t.get("family").and_then(Value::as_str) {
            Some("ip") => Family::Ip,
            Some("ip6") => Family::Ip6,
            Some("inet") => Family::Inet,
            _ => continue,
        };
        if let Some(name) = t
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| n.parse().ok())
        {
            found.push((family, name));
        }
    }
    Ok(found)
}

fn objects(out: &str) -> Result<Vec<Value>, Error> {
    let v: Value = serde_json::from_str(out).map_err(|e| Error::Output(e.to_string()))?;
    let list = v
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::Output(out.chars().take(200).collect()))?;
    Ok(list
        .iter()
        .filter(|o| o.get("metainfo").is_none())
        .cloned()
        .collect())
}
